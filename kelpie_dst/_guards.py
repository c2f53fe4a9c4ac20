"""Nondeterminism guards: wall clock, entropy and unseeded RNGs, while a simulation steps.

Python code can leak nondeterminism through ``time.time``, ``datetime.now``, ``uuid4``,
``os.urandom``, ``secrets``, ``random.SystemRandom`` and an unseeded ``random.Random()``
(design.md §1). While a simulation steps, each of these is replaced:

* ``redirect`` (the default) serves a deterministic value from the simulation (virtual wall time,
  a seeded stream) and records the call site in a report;
* ``strict`` raises :class:`NondeterminismError` naming the caller's file and line;
* ``off`` leaves everything alone.

Replacement is by identity: every module attribute that *is* one of the originals is swapped (so
``from time import time`` is caught too, as freezegun does), and swapped back when the step ends.
The replacements are module-level singletons that fall back to the original when no guard set is
active, or when called from a thread outside the simulation (the host's progress bar, trio's
I/O thread), so a reference captured by a module imported mid-run is harmless afterwards.
Simulated threads are participants, guarded like the trio loop. Threads themselves (start,
join, locks, queues, sleeps, to_thread) are simulated, not guarded: ``kelpie_dst.threads``
supplies those replacements, which install and uninstall with these.

Also: simulated machines run in UTC (no value depends on the host's ``TZ``); calls made by an
import inside the simulation are plumbing (served quietly from the importing module's stream);
``time.monotonic``/``perf_counter`` read virtual time and are never violations. The reasons are
in docs/architecture.md ("Guards").
"""

from __future__ import annotations

import calendar
import datetime as _dt
import os
import random
import secrets
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ._errors import NondeterminismError
from ._guard_sites import (
    CallSite,
    References,
    call_site,
    describe_call,
    import_stream,
    importing_module,
    real_time_caller,
)
from .threads._core import PARTICIPANTS
from .threads._patches import CLASS_PATCHES as _THREAD_CLASS_PATCHES
from .threads._patches import MODULES as _THREAD_MODULES
from .threads._patches import PATCHES as _THREAD_PATCHES

if TYPE_CHECKING:
    from ._sim import Simulation

__all__ = ["MONOTONIC_OFFSET", "POLICIES", "CallSite", "Guards"]

POLICIES = ("redirect", "strict", "off")
T = TypeVar("T")

MONOTONIC_OFFSET = 100_000.0  # time.monotonic() at virtual time 0, as on a host up for a day
_get_ident = threading.get_ident
_ACTIVE: Guards | None = None


class _Source(Protocol):
    """Where served values come from: the run's guards, or an importing module's stream."""

    @property
    def sim(self) -> Simulation: ...

    @property
    def rng(self) -> random.Random: ...


class _ImportSource:
    def __init__(self, sim: Simulation, rng: random.Random) -> None:
        self.sim = sim
        self.rng = rng


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
_localtime, _gmtime, _ctime, _asctime = time.localtime, time.gmtime, time.ctime, time.asctime
_mktime, _strftime = time.mktime, time.strftime
_monotonic, _monotonic_ns = time.monotonic, time.monotonic_ns
_perf_counter, _perf_counter_ns = time.perf_counter, time.perf_counter_ns


# -- replacements ----------------------------------------------------------------------------
def _active() -> Guards | None:
    """The guards of the simulation stepping on this thread (the trio loop's, or a simulated
    thread's), if any."""
    guards = _ACTIVE
    if guards is None:
        return None
    ident = _get_ident()
    return guards if guards.thread == ident or ident in PARTICIPANTS else None


def _guarded(
    what: str, original: Callable[[], T], simulated: Callable[[_Source], T], imports: bool = True
) -> T:
    """Serve ``simulated`` (and report the call) on the simulation's thread while it steps;
    ``original`` otherwise. With ``imports``, calls made by an import are served quietly."""
    guards = _active()
    if guards is None:
        return original()
    module = importing_module(3) if imports else None
    if module is not None:
        return simulated(_ImportSource(guards.sim, import_stream(module)))
    guards.hit(what, call_site(3))
    return simulated(guards)


def _utc(timestamp: float) -> _real_datetime:
    """The naive UTC datetime of ``timestamp``: a simulated machine's local time."""
    return _real_datetime.fromtimestamp(timestamp, _dt.UTC).replace(tzinfo=None)


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
            lambda g: (
                _utc(g.sim.wall_time())
                if tz is None
                else _real_datetime.fromtimestamp(g.sim.wall_time(), tz)
            ),
        )

    @classmethod
    def utcnow(cls) -> _real_datetime:  # type: ignore[override]
        return _guarded(
            "datetime.utcnow",
            _real_datetime.utcnow,
            lambda g: _utc(g.sim.wall_time()),
        )

    @classmethod
    def today(cls) -> _real_datetime:  # type: ignore[override]
        return _guarded("datetime.today", _real_datetime.today, lambda g: _utc(g.sim.wall_time()))

    @classmethod
    def fromtimestamp(cls, t: float, tz: _dt.tzinfo | None = None) -> _real_datetime:  # type: ignore[override]
        if tz is None and _active() is not None:
            return _utc(t)
        return _real_datetime.fromtimestamp(t, tz)


class _SimDate(_real_date, metaclass=_FakeTypeMeta):
    def __new__(cls, *args: Any, **kwargs: Any) -> _real_date:  # type: ignore[misc]
        return _real_date(*args, **kwargs)

    @classmethod
    def today(cls) -> _real_date:  # type: ignore[override]
        return _guarded("date.today", _real_date.today, lambda g: _utc(g.sim.wall_time()).date())


# time's C functions read the real clock when given no time, and the host's zone always.
def _sim_struct(
    what: str, secs: float | None, original: Callable[[], time.struct_time]
) -> time.struct_time:
    if _active() is None:
        return original()
    if secs is None:
        return _guarded(what, original, lambda g: _gmtime(g.sim.wall_time()))
    return _gmtime(secs)


def _sim_localtime(secs: float | None = None, /) -> time.struct_time:
    return _sim_struct("time.localtime", secs, lambda: _localtime(secs))


def _sim_gmtime(secs: float | None = None, /) -> time.struct_time:
    return _sim_struct("time.gmtime", secs, lambda: _gmtime(secs))


def _sim_ctime(secs: float | None = None, /) -> str:
    if _active() is None:
        return _ctime(secs)
    return _asctime(_sim_struct("time.ctime", secs, lambda: _localtime(secs)))


def _sim_asctime(t: Any = None, /) -> str:
    if t is not None or _active() is None:
        return _asctime() if t is None else _asctime(t)
    return _asctime(_sim_struct("time.asctime", None, _localtime))


def _sim_strftime(format: str, t: Any = None, /) -> str:
    if t is not None or _active() is None:
        return _strftime(format) if t is None else _strftime(format, t)
    return _strftime(format, _sim_struct("time.strftime", None, _localtime))


def _sim_mktime(t: Any, /) -> float:
    return float(calendar.timegm(t)) if _active() is not None else _mktime(t)


def _virtual_clock(original: Callable[[], T], ns: bool) -> Callable[[], T]:
    def read() -> T:
        guards = _active()
        if guards is None:
            return original()
        if real_time_caller(2):
            return original()
        now = MONOTONIC_OFFSET + guards.sim.now()
        return round(now * 1e9) if ns else now  # type: ignore[return-value]

    read.__name__ = read.__qualname__ = original.__name__
    return read


_sim_monotonic = _virtual_clock(_monotonic, ns=False)
_sim_monotonic_ns = _virtual_clock(_monotonic_ns, ns=True)
_sim_perf_counter = _virtual_clock(_perf_counter, ns=False)
_sim_perf_counter_ns = _virtual_clock(_perf_counter_ns, ns=True)


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
    if a is None and _active() is not None:
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
        (_secrets_randbits, _sim_secrets_randbits),
        (_secrets_choice, _sim_secrets_choice),
        (_localtime, _sim_localtime),
        (_gmtime, _sim_gmtime),
        (_ctime, _sim_ctime),
        (_asctime, _sim_asctime),
        (_strftime, _sim_strftime),
        (_mktime, _sim_mktime),
        (_monotonic, _sim_monotonic),
        (_monotonic_ns, _sim_monotonic_ns),
        (_perf_counter, _sim_perf_counter),
        (_perf_counter_ns, _sim_perf_counter_ns),
        *_THREAD_PATCHES,
    ]
}
# class attributes patched directly (inherited by subclasses)
_CLASS_PATCHES: list[tuple[type, str, object, object]] = [
    (random.Random, "seed", _random_seed, _sim_seed),
    *[(random.SystemRandom, n, _sysrandom[n], _sysrandom_method(n)) for n in _sysrandom],
    *_THREAD_CLASS_PATCHES,
]
_SKIP_MODULES = frozenset(
    {
        __name__,
        "_datetime",
        "kelpie_dst._guards_sources",
        "kelpie_dst.net._stdlib",
        *_THREAD_MODULES,
    }
)

# The sources added by issue #14 (clocks by id, entropy devices, the C RNG, datetime on
# instances, real processes) live in their own module; it needs the helpers above.
from . import _guards_sources  # noqa: E402

for _original, _replacement in _guards_sources.IDENTITY:
    _BY_IDENTITY[id(_original)] = (_original, _replacement)
_CLASS_PATCHES += _guards_sources.CLASS_PATCHES


_REFERENCES = References(_BY_IDENTITY, _SKIP_MODULES)


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
        self._traced: set[tuple[str, str]] = set()  # (call, module:function) in the trace
        self.violations: list[str] = []
        self.thread: int | None = None  # the thread that steps the simulation

    def hit(self, what: str, site: CallSite) -> None:
        if self.policy == "strict" and not site.within(self.allow):
            message = (
                f"{describe_call(what, site)} called at {site.file}:{site.line} "
                f"(in {site.function}); "
                "in a simulation, use the simulator's clock, streams and trio instead"
            )
            self.violations.append(message)
            self.sim.trace_event("guard.violation", call=what, site=site.traced)
            raise NondeterminismError(message)
        key = (what, site)
        if key not in self.report:
            traced = (what, site.traced)
            if traced not in self._traced:  # once per call and function, whatever the line
                self._traced.add(traced)
                self.sim.trace_event("guard.redirect", call=what, site=site.traced)
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
        _guards_sources.install()
        self.thread = _get_ident()
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
        _guards_sources.uninstall()
        _REFERENCES.scan_and_restore_strays()

    def redirected(self) -> list[tuple[str, str, int]]:
        """(call, site, count) for every redirected call, sorted."""
        return sorted((what, site.key, n) for (what, site), n in self.report.items())
