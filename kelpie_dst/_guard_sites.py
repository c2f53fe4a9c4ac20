"""Where guarded calls come from, and where the guarded originals are referenced.

* :func:`call_site` names the first frame of the caller's own code: the first frame outside the
  standard library, site-packages and the simulator (``kelpie_dst``, except its examples and
  workloads), as ``module:line``, which is the same on every machine; and the API of the library
  that the user's line called (``concurrent.futures.ThreadPoolExecutor.submit``,
  ``trio.run_process``), so a report names what the user wrote.
* :func:`importing_module` tells whether a call happens while a module is being imported inside
  the simulation (between the host loop and the call there is an ``importlib`` frame), and which.
* :class:`References` finds, by identity, every module attribute that *is* one of the originals,
  so ``from time import time`` is swapped too (as freezegun does).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from types import FrameType, ModuleType
from typing import Any

import attrs

from ._rng import RngStream
from .threads._core import SimThread
from .threads._core import current as current_participant

__all__ = [
    "CallSite",
    "References",
    "call_site",
    "describe_call",
    "import_stream",
    "importing_module",
    "real_time_caller",
]

# Code that is not the user's: the call site reported is the first frame outside it.
_LIBRARY_DIRS = tuple(
    sorted(
        {
            os.path.join(os.path.realpath(p), "")
            for p in (
                sysconfig.get_paths()["stdlib"],
                sysconfig.get_paths()["platstdlib"],
                os.path.dirname(os.__file__),
            )
        }
    )
)
_SITE_DIRS = ("/site-packages/", "/dist-packages/", "\\site-packages\\")
_USER_PARTS_OF_KELPIE_DST = ("kelpie_dst.examples", "kelpie_dst.workloads")
_library_file: dict[str, bool] = {}  # co_filename -> not the user's (cached)
_stdlib_file: dict[str, bool] = {}  # co_filename -> the standard library's (cached)
# Callers that keep the real monotonic clock (and a real time.sleep): real I/O whose timeouts
# must elapse in real time (virtual time stands still while it blocks), trio's own clock, test
# harnesses. threading, queue and concurrent.futures are simulated, so they get virtual time.
_REAL_TIME = frozenset(
    {
        *("subprocess", "selectors", "socket", "ssl", "sched"),
        *("asyncio", "multiprocessing", "trio"),
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
    # the library API the user's line called, when the guarded call happened inside it
    via: str = attrs.field(default="", eq=False, order=False)
    # the modules of every frame from the guarded call up to the site (for guard_allow)
    chain: tuple[str, ...] = attrs.field(default=(), eq=False, order=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.module}:{self.line}"

    @property
    def traced(self) -> str:
        """``module:function``, as the trace names the site: without the line, so a trace
        (and its hash) does not move when code is added above the call (Dlead12-3)."""
        return f"{self.module}:{self.function}"

    def within(self, prefixes: tuple[str, ...]) -> bool:
        """True if the site, or a frame between it and the guarded call, is in one of the
        modules (or packages) ``prefixes``."""
        return any(
            name == p or name.startswith(p + ".")
            for name in (self.module, *self.chain)
            for p in prefixes
        )


def is_library_frame(frame: FrameType) -> bool:
    """True for frames of the standard library, site-packages, frozen or generated code, and
    the simulator itself; false for the user's code (kelpie_dst's examples and workloads
    count as the user's)."""
    name: str = frame.f_globals.get("__name__", "?")
    if name == "kelpie_dst" or name.startswith("kelpie_dst."):
        return not name.startswith(_USER_PARTS_OF_KELPIE_DST)
    path = frame.f_code.co_filename
    known = _library_file.get(path)
    if known is None:
        known = _library_file[path] = (
            path.startswith("<")
            or any(part in path for part in _SITE_DIRS)
            or os.path.realpath(path).startswith(_LIBRARY_DIRS)
        )
    return known


def _site(frame: FrameType, via: str = "", chain: tuple[str, ...] = ()) -> CallSite:
    code = frame.f_code
    name = frame.f_globals.get("__name__", "?")
    return CallSite(name, frame.f_lineno, code.co_filename, code.co_name, via, chain)


def _api_name(frame: FrameType) -> str:
    """``package.Class.function`` for a library frame, without private module parts."""
    module: str = frame.f_globals.get("__name__", "?")
    public = ".".join(part for part in module.split(".") if not part.startswith("_")) or module
    qualname = frame.f_code.co_qualname
    if qualname.startswith("_") and not qualname.startswith("__"):
        # trio.run_process is trio._subprocess._run_process: use the name the user called
        exported = getattr(sys.modules.get(public), qualname.lstrip("_"), None)
        if getattr(exported, "__code__", None) is frame.f_code:
            qualname = qualname.lstrip("_")
    return f"{public}.{qualname}"


def call_site(depth: int = 2) -> CallSite:
    """The user's line that led to a guarded call ``depth`` frames up (see the module doc).

    Without such a line in the stack (a call from the simulator's own plumbing, or from a
    library with no user code above it), the first frame outside the standard library and the
    simulator; failing that, the frame ``depth`` up.
    """
    start = sys._getframe(depth)
    site, fallback, chain = _walk(start)
    if site is not None:
        return site
    host = _host_frame()
    if host is not None:  # a to_thread worker running library code: the caller's line
        site, _, host_chain = _walk(host)
        if site is not None:
            return attrs.evolve(site, chain=(*chain, *host_chain))
    return _site(fallback or start, "", chain)


def _walk(
    frame: FrameType | None,
) -> tuple[CallSite | None, FrameType | None, tuple[str, ...]]:
    """From ``frame`` outwards: the user's site (or None), the first frame outside the
    standard library and the simulator, and the modules passed on the way."""
    callee: FrameType | None = None  # the frame the user's line called
    chain: list[str] = []
    fallback: FrameType | None = None
    while frame is not None:
        name = frame.f_globals.get("__name__", "?")
        if name == _HOST:
            break
        if not is_library_frame(frame):
            via = ""
            if callee is not None and not callee.f_globals.get("__name__", "").startswith(
                "kelpie_dst._guard"
            ):
                via = _api_name(callee)
            return _site(frame, via, tuple(chain)), fallback, tuple(chain)
        if fallback is None and not name.startswith("kelpie_dst.") and not _is_stdlib(frame):
            fallback = frame
        chain.append(name)
        callee = frame
        frame = frame.f_back
    return None, fallback, tuple(chain)


def _host_frame() -> FrameType | None:
    """For a ``trio.to_thread`` worker whose host task (the caller) is running it now: the
    innermost frame of the trio loop, whose stack holds the caller's ``await`` (see
    docs/threads.md)."""
    me = current_participant()
    if not isinstance(me, SimThread) or me.kind != "worker" or me.host is None:
        return None
    ident = me.runtime.loop_ident
    if ident is None:
        return None
    loop = sys._current_frames().get(ident)
    coro_frame = getattr(me.host.coro, "cr_frame", None)
    frame = loop
    while frame is not None and frame is not coro_frame:
        frame = frame.f_back
    return loop if frame is not None else None


def describe_call(what: str, site: CallSite) -> str:
    """``what``, led by the library API the user called when that is not ``what`` itself:
    ``concurrent.futures.thread.ThreadPoolExecutor.submit (uses threading.Thread.start)``."""
    via = site.via
    if not via or via.rpartition(".")[2].startswith("__"):
        return what  # a constructor: ``what`` already names it
    return f"{via} (uses {what})"


def _is_stdlib(frame: FrameType) -> bool:
    path = frame.f_code.co_filename
    known = _stdlib_file.get(path)
    if known is None:  # realpath walks the file system: once per file, not per call
        known = _stdlib_file[path] = path.startswith("<") or (
            not any(part in path for part in _SITE_DIRS)
            and os.path.realpath(path).startswith(_LIBRARY_DIRS)
        )
    return known


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
            # No <module> frame above: an extension module (C, Cython) runs its init, as
            # numpy.random's does (it seeds a generator from secrets.randbits).
            return module if module is not None else _spec_name(frame)
        if module is None and frame.f_code.co_name == "<module>":
            module = name
        frame = frame.f_back
    return None


def _spec_name(frame: FrameType | None) -> str:
    """The name of the module importlib is loading, from its ``spec`` (an extension module)."""
    while frame is not None and frame.f_globals.get("__name__") in _IMPORTLIB:
        spec = frame.f_locals.get("spec")
        if spec is not None and isinstance(getattr(spec, "name", None), str):
            return str(spec.name)
        frame = frame.f_back
    return "<extension module>"


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
