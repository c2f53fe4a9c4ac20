"""Where guarded calls come from, and where the guarded originals are referenced.

* :func:`call_site` names the first frame of the caller's own code (past "plumbing" such as
  ``random`` or ``uuid``), as ``module:line``, which is the same on every machine.
* :func:`importing_module` tells whether a call happens while a module is being imported inside
  the simulation (between the host loop and the call there is an ``importlib`` frame), and which.
* :class:`References` finds, by identity, every module attribute that *is* one of the originals,
  so ``from time import time`` is swapped too (as freezegun does).
"""

from __future__ import annotations

import sys
from types import FrameType, ModuleType
from typing import Any

import attrs

from ._rng import RngStream

__all__ = [
    "CallSite",
    "References",
    "call_site",
    "import_stream",
    "importing_module",
    "real_time_caller",
]

# Frames in these modules are plumbing: the call site reported is the first frame outside them.
_PLUMBING = (
    "kelpie_dst._guards",
    "random",
    "uuid",
    "secrets",
    "threading",
    "tempfile",
    "trio",
    "anyio",
    "sniffio",
    "outcome",
    "contextlib",
    "functools",
    "asyncio",
)
# Callers that keep the real monotonic clock: blocking primitives whose timeouts must elapse in
# real time (virtual time stands still while they block), trio's own clock, test harnesses.
_REAL_TIME = frozenset(
    {
        *("threading", "queue", "subprocess", "selectors", "socket", "ssl", "sched"),
        *("asyncio", "concurrent", "multiprocessing", "trio"),
        *("_pytest", "pytest", "pluggy", "hypothesis"),
    }
)
_IMPORT_STREAMS: dict[str, RngStream] = {}
_IMPORTLIB = ("importlib._bootstrap", "importlib._bootstrap_external")
_HOST = "kelpie_dst._runner"  # the host loop: the bottom of every simulated task's stack


@attrs.frozen(order=True)
class CallSite:
    """Where a guarded call came from. ``module:line`` is stable across machines."""

    module: str
    line: int
    file: str
    function: str

    @property
    def key(self) -> str:
        return f"{self.module}:{self.line}"


def call_site(depth: int = 2) -> CallSite:
    """The caller ``depth`` frames up, or the first frame above it that is not plumbing."""
    fallback = sys._getframe(depth)
    frame: FrameType | None = fallback
    while frame is not None:
        name = frame.f_globals.get("__name__", "?")
        if not any(name == p or name.startswith(p + ".") for p in _PLUMBING):
            break
        frame = frame.f_back
    chosen = frame if frame is not None else fallback
    code = chosen.f_code
    return CallSite(
        chosen.f_globals.get("__name__", "?"), chosen.f_lineno, code.co_filename, code.co_name
    )


def importing_module(depth: int = 2) -> str | None:
    """The module whose top-level code is running, if the caller ``depth`` frames up runs
    during an import started inside the simulation; otherwise ``None``.

    Only frames above the host loop count, so a simulation started by a module's own top-level
    code (a script imported by a test runner, say) is not mistaken for an import.
    """
    frame: FrameType | None = sys._getframe(depth)
    module: str | None = None
    while frame is not None:
        name = frame.f_globals.get("__name__", "?")
        if name == _HOST:
            return None
        if name in _IMPORTLIB:
            return module
        if module is None and frame.f_code.co_name == "<module>":
            module = name
        frame = frame.f_back
    return None


def import_stream(module: str) -> RngStream:
    """The stream that serves ``module``'s guarded calls at import: seeded by its name alone,
    so the values do not depend on which run of the process happened to import it."""
    stream = _IMPORT_STREAMS.get(module)
    if stream is None:
        stream = _IMPORT_STREAMS[module] = RngStream(0, f"guards/import/{module}")
    return stream


def real_time_caller(depth: int = 2) -> bool:
    """True if the caller ``depth`` frames up must keep the real monotonic clock."""
    name: str = sys._getframe(depth).f_globals.get("__name__", "")
    return name.partition(".")[0] in _REAL_TIME


class References:
    """Where the originals are referenced, found by scanning ``sys.modules`` incrementally."""

    def __init__(self, by_identity: dict[int, tuple[object, object]], skip: frozenset[str]):
        self.by_identity = by_identity  # id(original) -> (original, replacement)
        self.reverse = {id(r): (r, o) for o, r in by_identity.values()}
        self.skip = skip
        self.scanned: set[str] = set()
        self._fingerprint: tuple[int, str] | None = None  # sys.modules when all were scanned
        self.locations: list[tuple[dict[str, Any], str, object, object]] = []

    def scan_new(self) -> None:
        """Record the references held by modules imported since the last scan."""
        if self._unchanged():
            return
        for name, module in list(sys.modules.items()):
            if name in self.scanned or not isinstance(module, ModuleType):
                continue
            self.scanned.add(name)
            if name in self.skip:
                continue
            namespace = module.__dict__
            for attr, value in list(namespace.items()):
                pair = self.by_identity.get(id(value))
                if pair is not None and pair[0] is value:
                    self.locations.append((namespace, attr, pair[0], pair[1]))
        self._fingerprint = _modules_fingerprint()

    def _unchanged(self) -> bool:
        """True if no module was imported since every module was scanned: then both scans
        would do nothing, and skipping them saves a walk over sys.modules per step. New
        imports append to sys.modules, so its size and last key change with any of them."""
        return self._fingerprint is not None and self._fingerprint == _modules_fingerprint()

    def scan_and_restore_strays(self) -> None:
        """Undo replacements captured by modules imported while the guards were on."""
        if self._unchanged():
            return
        for name, module in list(sys.modules.items()):
            if name in self.scanned or not isinstance(module, ModuleType):
                continue
            for attr, value in list(module.__dict__.items()):
                pair = self.reverse.get(id(value))
                if pair is not None and pair[0] is value:
                    module.__dict__[attr] = pair[1]


def _modules_fingerprint() -> tuple[int, str]:
    return len(sys.modules), next(reversed(sys.modules), "")
