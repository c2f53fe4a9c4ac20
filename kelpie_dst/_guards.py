"""Nondeterminism guards: wall clock, entropy, unseeded RNGs and threads, while a simulation steps.

Python code can leak nondeterminism through ``time.time``, ``datetime.now``, ``uuid4``,
``os.urandom``, ``secrets``, ``random.SystemRandom``, an unseeded ``random.Random()``, and
threads (design.md §1). While a simulation steps, each of these is replaced:

* ``redirect`` (the default) serves a deterministic value from the simulation (virtual wall time,
  a seeded stream) and records the call site in a report;
* ``strict`` raises :class:`NondeterminismError` naming the caller's file and line;
* ``off`` leaves everything alone.

Replacement is by identity: every module attribute that *is* one of the originals is swapped (so
``from time import time`` is caught too, as freezegun does), and swapped back when the step ends.
The replacements are module-level singletons that fall back to the original when no guard set is
active, so a reference captured by a module imported mid-run is harmless afterwards.
"""

from __future__ import annotations

import datetime as _dt
import os
import random
import secrets
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import outcome
import trio

from ._errors import NondeterminismError

if TYPE_CHECKING:
    from ._sim import Simulation

__all__ = ["POLICIES", "CallSite", "Guards"]

POLICIES = ("redirect", "strict", "off")
T = TypeVar("T")

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

_ACTIVE: Guards | None = None


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


def _call_site(depth: int = 2) -> CallSite:
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


# -- originals -------------------------------------------------------------------------------
_time_time = time.time
_time_time_ns = time.time_ns
_real_datetime = _dt.datetime
_real_date = _dt.date
_uuid1 = uuid.uuid1
_uuid4 = uuid.uuid4
_urandom = os.urandom
_random_seed = random.Random.seed
_sysrandom = {
    name: getattr(random.SystemRandom, name) for name in ("random", "getrandbits", "randbytes")
}
_secrets_randbits: Callable[[int], int] = secrets.randbits
_secrets_choice: Callable[[Any], Any] = secrets.choice
_thread_start = threading.Thread.start
_to_thread = trio.to_thread.run_sync


# -- replacements ----------------------------------------------------------------------------
def _guarded(what: str, original: Callable[[], T], simulated: Callable[[Guards], T]) -> T:
    guards = _ACTIVE
    if guards is None:
        return original()
    guards.hit(what, _call_site(3))
    return simulated(guards)


def _sim_time() -> float:
    return _guarded("time.time", _time_time, lambda g: g.sim.wall_time())


def _sim_time_ns() -> int:
    return _guarded("time.time_ns", _time_time_ns, lambda g: round(g.sim.wall_time() * 1e9))


class _FakeTypeMeta(type):
    """Makes ``isinstance(real_value, patched_class)`` keep working (freezegun's trick)."""

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, cls.__bases__[0])

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, cls.__bases__[0])


class _SimDatetime(_real_datetime, metaclass=_FakeTypeMeta):
    def __new__(cls, *args: Any, **kwargs: Any) -> _real_datetime:  # type: ignore[misc]
        return _real_datetime(*args, **kwargs)

    @classmethod
    def now(cls, tz: _dt.tzinfo | None = None) -> _real_datetime:  # type: ignore[override]
        return _guarded(
            "datetime.now",
            lambda: _real_datetime.now(tz),
            lambda g: _real_datetime.fromtimestamp(g.sim.wall_time(), tz),
        )

    @classmethod
    def utcnow(cls) -> _real_datetime:  # type: ignore[override]
        return _guarded(
            "datetime.utcnow",
            _real_datetime.utcnow,
            lambda g: _real_datetime.fromtimestamp(g.sim.wall_time(), _dt.UTC).replace(tzinfo=None),
        )

    @classmethod
    def today(cls) -> _real_datetime:  # type: ignore[override]
        return _guarded(
            "datetime.today",
            _real_datetime.today,
            lambda g: _real_datetime.fromtimestamp(g.sim.wall_time()),
        )


class _SimDate(_real_date, metaclass=_FakeTypeMeta):
    def __new__(cls, *args: Any, **kwargs: Any) -> _real_date:  # type: ignore[misc]
        return _real_date(*args, **kwargs)

    @classmethod
    def today(cls) -> _real_date:  # type: ignore[override]
        return _guarded(
            "date.today",
            _real_date.today,
            lambda g: _real_date.fromtimestamp(g.sim.wall_time()),
        )


def _sim_uuid4() -> uuid.UUID:
    return _guarded("uuid.uuid4", _uuid4, lambda g: uuid.UUID(bytes=g.rng.randbytes(16), version=4))


def _sim_uuid1(node: int | None = None, clock_seq: int | None = None) -> uuid.UUID:
    return _guarded(
        "uuid.uuid1",
        lambda: _uuid1(node, clock_seq),
        lambda g: uuid.UUID(int=g.rng.getrandbits(128), version=1),
    )


def _sim_urandom(size: int, /) -> bytes:
    return _guarded("os.urandom", lambda: _urandom(size), lambda g: g.rng.randbytes(size))


def _sim_seed(self: random.Random, a: Any = None, version: int = 2) -> None:
    if a is None and _ACTIVE is not None:
        a = _guarded(
            "random.Random() without a seed", lambda: None, lambda g: g.rng.getrandbits(64)
        )
    _random_seed(self, a, version)


def _sysrandom_method(name: str) -> Callable[..., Any]:
    original = _sysrandom[name]

    def method(self: random.SystemRandom, *args: Any) -> Any:
        return _guarded(
            "random.SystemRandom",
            lambda: original(self, *args),
            lambda g: getattr(g.rng, name)(*args),
        )

    method.__name__ = name
    return method


def _sim_secrets_randbits(k: int) -> int:
    return _guarded("secrets", lambda: _secrets_randbits(k), lambda g: g.rng.getrandbits(k))


def _sim_secrets_choice(seq: Any) -> Any:
    return _guarded("secrets", lambda: _secrets_choice(seq), lambda g: g.rng.choice(seq))


def _sim_thread_start(self: threading.Thread) -> None:
    if sys._getframe(1).f_globals.get("__name__") == "trio._core._thread_cache":
        # trio's own I/O worker (guest mode with a wait_all_tasks_blocked cushion): let it be.
        _thread_start(self)
        return

    def inline(_: Guards) -> None:
        # Run the thread's body now, on the simulation thread, and leave the Thread object
        # looking finished, so join() and is_alive() behave.
        self._started.set()  # type: ignore[attr-defined]
        try:
            self.run()
        finally:
            self._is_stopped = True  # type: ignore[attr-defined]
            self._tstate_lock = None  # type: ignore[attr-defined]

    _guarded("threading.Thread.start", lambda: _thread_start(self), inline)


async def _sim_to_thread(
    sync_fn: Callable[..., T],
    *args: Any,
    thread_name: str | None = None,
    abandon_on_cancel: bool = False,
    limiter: Any = None,
    cancellable: bool | None = None,
) -> T:
    if _ACTIVE is None:
        return await _to_thread(
            sync_fn,
            *args,
            thread_name=thread_name,
            abandon_on_cancel=abandon_on_cancel,
            limiter=limiter,
        )
    _ACTIVE.hit("trio.to_thread.run_sync", _call_site(2))
    await trio.lowlevel.checkpoint_if_cancelled()
    result = outcome.capture(sync_fn, *args)
    await trio.lowlevel.cancel_shielded_checkpoint()
    return result.unwrap()


# original -> replacement, swapped wherever a module attribute *is* the original.
_BY_IDENTITY: dict[int, tuple[object, object]] = {
    id(o): (o, r)
    for o, r in [
        (_time_time, _sim_time),
        (_time_time_ns, _sim_time_ns),
        (_real_datetime, _SimDatetime),
        (_real_date, _SimDate),
        (_uuid1, _sim_uuid1),
        (_uuid4, _sim_uuid4),
        (_urandom, _sim_urandom),
        (_to_thread, _sim_to_thread),
        (_secrets_randbits, _sim_secrets_randbits),
        (_secrets_choice, _sim_secrets_choice),
    ]
}
_REVERSE: dict[int, tuple[object, object]] = {id(r): (r, o) for o, r in _BY_IDENTITY.values()}
# class attributes patched directly (inherited by subclasses)
_CLASS_PATCHES: list[tuple[type, str, object, object]] = [
    (random.Random, "seed", _random_seed, _sim_seed),
    (threading.Thread, "start", _thread_start, _sim_thread_start),
    *[(random.SystemRandom, n, _sysrandom[n], _sysrandom_method(n)) for n in _sysrandom],
]
_SKIP_MODULES = frozenset({__name__, "_datetime"})


class _References:
    """Where the originals are referenced, found by scanning ``sys.modules`` incrementally."""

    def __init__(self) -> None:
        self.scanned: set[str] = set()
        self.locations: list[tuple[dict[str, Any], str, object, object]] = []

    def scan_new(self) -> None:
        for name, module in list(sys.modules.items()):
            if name in self.scanned or not isinstance(module, ModuleType):
                continue
            self.scanned.add(name)
            if name in _SKIP_MODULES:
                continue
            namespace = module.__dict__
            for attr, value in list(namespace.items()):
                pair = _BY_IDENTITY.get(id(value))
                if pair is not None and pair[0] is value:
                    self.locations.append((namespace, attr, pair[0], pair[1]))

    def scan_and_restore_strays(self) -> None:
        """Undo replacements captured by modules imported while the guards were on."""
        for name, module in list(sys.modules.items()):
            if name in self.scanned or not isinstance(module, ModuleType):
                continue
            for attr, value in list(module.__dict__.items()):
                pair = _REVERSE.get(id(value))
                if pair is not None and pair[0] is value:
                    module.__dict__[attr] = pair[1]


_REFERENCES = _References()


class Guards:
    """The guard set of one simulation: its policy, its stream, and its report."""

    def __init__(self, sim: Simulation, policy: str = "redirect", allow: tuple[str, ...] = ()):
        if policy not in POLICIES:
            raise ValueError(f"guard policy must be one of {', '.join(POLICIES)}, not {policy!r}")
        self.sim = sim
        self.policy = policy
        self.allow = allow
        self.rng = sim.rng("guards")
        self.report: Counter[tuple[str, CallSite]] = Counter()
        self.violations: list[str] = []

    def hit(self, what: str, site: CallSite) -> None:
        if self.policy == "strict" and not any(
            site.module == p or site.module.startswith(p + ".") for p in self.allow
        ):
            message = (
                f"{what} called at {site.file}:{site.line} (in {site.function}); "
                "in a simulation, use the simulator's clock, streams and trio instead"
            )
            self.violations.append(message)
            self.sim.trace_event("guard.violation", call=what, site=site.key)
            raise NondeterminismError(message)
        key = (what, site)
        if key not in self.report:
            self.sim.trace_event("guard.redirect", call=what, site=site.key)
        self.report[key] += 1

    def install(self) -> None:
        global _ACTIVE
        if self.policy == "off":
            return
        if _ACTIVE is not None:
            raise RuntimeError("another simulation's guards are already installed")
        _REFERENCES.scan_new()
        for namespace, attr, _original, replacement in _REFERENCES.locations:
            namespace[attr] = replacement
        for cls, attr, _original, replacement in _CLASS_PATCHES:
            setattr(cls, attr, replacement)
        _ACTIVE = self

    def uninstall(self) -> None:
        global _ACTIVE
        if _ACTIVE is not self:
            return
        _ACTIVE = None
        for namespace, attr, original, _replacement in _REFERENCES.locations:
            namespace[attr] = original
        for cls, attr, original, _replacement in _CLASS_PATCHES:
            setattr(cls, attr, original)
        _REFERENCES.scan_and_restore_strays()

    def redirected(self) -> list[tuple[str, str, int]]:
        """(call, site, count) for every redirected call, sorted."""
        return sorted((what, site.key, n) for (what, site), n in self.report.items())
