"""More nondeterminism sources for the guards (issue #14): clocks by id, entropy devices, the C
RNG, ``datetime`` called on an instance, and real processes.

:mod:`kelpie_dst._guards` merges :data:`IDENTITY` and :data:`CLASS_PATCHES` into its tables,
and calls :func:`install`/:func:`uninstall` with its own, so these sources follow the same rules
(redirect, strict, off; only on the simulation's thread; imports are plumbing):

* ``time.clock_gettime(_ns)``: ``CLOCK_REALTIME``/``CLOCK_TAI`` read the node's wall clock and
  count as a call (strict fails it); the monotonic and CPU clocks read virtual time, as
  ``time.monotonic`` does; ``time.process_time``/``thread_time`` read virtual time too.
* ``os.getrandom``, ``ssl.RAND_bytes``, and reading ``/dev/urandom`` or ``/dev/random``
  (``open``, ``io.open``, ``pathlib``, ``os.open``) serve bytes of the guards stream.
* ``_random.Random()`` (the C generator under ``random.Random``) without a seed is seeded from
  the guards stream.
* ``datetime.now()``/``utcnow()``/``today()`` and ``date.today()`` called on an *instance*, on
  ``type(instance)`` or on a subclass defined before the run: the real C types are patched in
  place while a step runs (their ``__dict__`` is read-only from Python, so through the dict
  that ``gc.get_referents`` returns, followed by ``PyType_Modified``).
* ``subprocess.Popen``, ``os.system``, ``os.fork`` and ``os.posix_spawn(p)`` start real
  processes: they cannot be redirected, so they run and count as a call (strict fails it).
"""

from __future__ import annotations

import _random
import builtins
import ctypes
import datetime as _dt
import gc
import io
import os
import random
import ssl
import subprocess
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from . import _guards as _g
from ._guard_sites import real_time_caller
from .net import _stdlib as _net_stdlib

if TYPE_CHECKING:
    from ._guards import _Source

__all__ = ["CLASS_PATCHES", "IDENTITY", "install", "uninstall"]

# -- originals -------------------------------------------------------------------------------
_clock_gettime, _clock_gettime_ns = time.clock_gettime, time.clock_gettime_ns
_process_time, _process_time_ns = time.process_time, time.process_time_ns
_thread_time, _thread_time_ns = time.thread_time, time.thread_time_ns
_getrandom = os.getrandom
_rand_bytes = ssl.RAND_bytes
_open = builtins.open  # io.open is the same object
_os_open = os.open
_CRandom = _random.Random
_popen_execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]
_system, _fork = os.system, os.fork
_posix_spawn, _posix_spawnp = os.posix_spawn, os.posix_spawnp

_WALL_CLOCKS = frozenset(
    getattr(time, name) for name in ("CLOCK_REALTIME", "CLOCK_TAI") if hasattr(time, name)
)
_VIRTUAL_CLOCKS = frozenset(
    getattr(time, name)
    for name in (
        "CLOCK_MONOTONIC",
        "CLOCK_MONOTONIC_RAW",
        "CLOCK_BOOTTIME",
        "CLOCK_UPTIME",
        "CLOCK_HIGHRES",
        "CLOCK_PROCESS_CPUTIME_ID",
        "CLOCK_THREAD_CPUTIME_ID",
    )
    if hasattr(time, name)
)
_ENTROPY_DEVICES = frozenset({"/dev/urandom", "/dev/random"})
_DEVICE_BYTES = 1 << 16  # what an os.open() of an entropy device can read in a simulation


# -- clocks ----------------------------------------------------------------------------------
def _clock(clk_id: int, original: Callable[[int], Any], ns: bool) -> Any:
    guards = _g._active()
    if guards is None:
        return original(clk_id)
    if clk_id in _WALL_CLOCKS:
        what = "time.clock_gettime_ns" if ns else "time.clock_gettime"
        wall = _g._guarded(what, lambda: original(clk_id), lambda g: g.sim.wall_time())
        return round(wall * 1e9) if ns else wall
    if clk_id in _VIRTUAL_CLOCKS and not real_time_caller(3):
        now = _g.MONOTONIC_OFFSET + guards.sim.now()
        return round(now * 1e9) if ns else now
    return original(clk_id)


def _sim_clock_gettime(clk_id: int, /) -> float:
    return _clock(clk_id, _clock_gettime, ns=False)  # type: ignore[no-any-return]


def _sim_clock_gettime_ns(clk_id: int, /) -> int:
    return _clock(clk_id, _clock_gettime_ns, ns=True)  # type: ignore[no-any-return]


def _cpu_clock(original: Callable[[], Any], ns: bool) -> Callable[[], Any]:
    """CPU time in a simulation: virtual time since the run began (a busy machine)."""

    def read() -> Any:
        guards = _g._active()
        if guards is None or real_time_caller(2):
            return original()
        now = guards.sim.now()
        return round(now * 1e9) if ns else now

    read.__name__ = read.__qualname__ = original.__name__
    return read


# -- entropy -------------------------------------------------------------------------------
def _sim_getrandom(size: int, flags: int = 0) -> bytes:
    return _g._guarded(
        "os.getrandom", lambda: _getrandom(size, flags), lambda g: g.rng.randbytes(size)
    )


def _sim_rand_bytes(n: int, /) -> bytes:
    return _g._guarded("ssl.RAND_bytes", lambda: _rand_bytes(n), lambda g: g.rng.randbytes(n))


def _entropy_device(file: object) -> bool:
    if isinstance(file, int) or not isinstance(file, str | bytes | os.PathLike):
        return False
    path = os.fspath(file)
    return (path.decode(errors="replace") if isinstance(path, bytes) else path) in _ENTROPY_DEVICES


class _EntropyDevice(io.RawIOBase):
    """``/dev/urandom`` in a simulation: endless bytes from a seeded stream."""

    def __init__(self, rng: random.Random, name: str) -> None:
        super().__init__()
        self._rng = rng
        self.name = name

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        view[:] = self._rng.randbytes(len(view))
        return len(view)


def _sim_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
    if _g._ACTIVE is None or not _entropy_device(file):
        return _open(file, mode, *args, **kwargs)

    def device(g: _Source) -> Any:
        raw = _EntropyDevice(g.rng, os.fsdecode(file))
        return (
            raw if kwargs.get("buffering", args[0] if args else -1) == 0 else io.BufferedReader(raw)
        )

    return _g._guarded(
        f"open({os.fsdecode(file)})", lambda: _open(file, mode, *args, **kwargs), device
    )


def _sim_os_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
    if _g._ACTIVE is None or not _entropy_device(path):
        return _os_open(path, flags, mode, dir_fd=dir_fd)

    def device(g: _Source) -> int:
        fd = os.memfd_create("kelpie-dst-entropy")
        os.write(fd, g.rng.randbytes(_DEVICE_BYTES))
        os.lseek(fd, 0, os.SEEK_SET)
        return fd

    return _g._guarded(
        f"os.open({os.fsdecode(path)})", lambda: _os_open(path, flags, mode, dir_fd=dir_fd), device
    )


class _SimCRandom(_CRandom, metaclass=_g._FakeTypeMeta):
    """``_random.Random``: unseeded instances are seeded from the guards stream."""

    def __new__(cls, *args: Any) -> Any:
        if cls is not _SimCRandom:  # a subclass defined while the guards were on
            return _CRandom.__new__(cls, *args)
        if args:
            return _CRandom(*args)
        return _g._guarded(
            "_random.Random() without a seed",
            _CRandom,
            lambda g: _CRandom(g.rng.getrandbits(64)),
        )


# -- processes -------------------------------------------------------------------------------
def _real_process(what: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """A call that starts a real process: reported (strict fails it), then made."""

    def start(*args: Any, **kwargs: Any) -> Any:
        if _g._active() is not None:
            _g._guarded(what, lambda: None, lambda g: None, imports=False)
        return original(*args, **kwargs)

    start.__name__ = start.__qualname__ = getattr(original, "__name__", what)
    return start


# -- datetime on instances -------------------------------------------------------------------
_real_datetime, _real_date = _dt.datetime, _dt.date
_DT_ORIGINALS = {
    (cls, name): cls.__dict__[name]
    for cls, names in ((_real_datetime, ("now", "utcnow")), (_real_date, ("today",)))
    for name in names
}


def _from_timestamp(cls: type, timestamp: float, tz: _dt.tzinfo | None) -> Any:
    value = _real_datetime.fromtimestamp(timestamp, tz or _dt.UTC)
    if tz is None:
        value = value.replace(tzinfo=None)
    if cls is _real_datetime:
        return value
    return cls(*value.timetuple()[:6], value.microsecond, value.tzinfo)


def _dt_now(cls: type, tz: _dt.tzinfo | None = None) -> Any:
    original = _DT_ORIGINALS[(_real_datetime, "now")].__get__(None, cls)
    return _g._guarded(
        "datetime.now",
        lambda: original(tz),
        lambda g: _from_timestamp(cls, g.sim.wall_time(), tz),
    )


def _dt_utcnow(cls: type) -> Any:
    original = _DT_ORIGINALS[(_real_datetime, "utcnow")].__get__(None, cls)
    return _g._guarded(
        "datetime.utcnow", original, lambda g: _from_timestamp(cls, g.sim.wall_time(), None)
    )


def _date_today(cls: type) -> Any:
    """``date.today`` and, inherited, ``datetime.today`` (C code that reads ``time.time``
    and converts in the host's zone)."""
    original = _DT_ORIGINALS[(_real_date, "today")].__get__(None, cls)
    is_datetime = issubclass(cls, _real_datetime)

    def simulated(g: _Source) -> Any:
        moment = _from_timestamp(cls if is_datetime else _real_datetime, g.sim.wall_time(), None)
        if is_datetime:
            return moment
        day = moment.date()
        return day if cls is _real_date else cls(day.year, day.month, day.day)

    return _g._guarded("datetime.today" if is_datetime else "date.today", original, simulated)


_DT_REPLACEMENTS = {
    (_real_datetime, "now"): classmethod(_dt_now),
    (_real_datetime, "utcnow"): classmethod(_dt_utcnow),
    (_real_date, "today"): classmethod(_date_today),
}
_type_modified = ctypes.pythonapi.PyType_Modified
_type_modified.argtypes = [ctypes.py_object]
_type_modified.restype = None


def _set_type_attributes(values: Mapping[tuple[type[Any], str], object]) -> None:
    for (cls, name), value in values.items():
        gc.get_referents(cls.__dict__)[0][name] = value
    for cls in {cls for cls, _name in values}:
        _type_modified(cls)


def install() -> None:
    """Patch what identity replacement cannot reach (called by ``Guards.install``)."""
    _set_type_attributes(_DT_REPLACEMENTS)


def uninstall() -> None:
    _set_type_attributes(_DT_ORIGINALS)


# original -> replacement, merged into _guards' identity table
IDENTITY: list[tuple[object, object]] = [
    (_clock_gettime, _sim_clock_gettime),
    (_clock_gettime_ns, _sim_clock_gettime_ns),
    (_process_time, _cpu_clock(_process_time, ns=False)),
    (_process_time_ns, _cpu_clock(_process_time_ns, ns=True)),
    (_thread_time, _cpu_clock(_thread_time, ns=False)),
    (_thread_time_ns, _cpu_clock(_thread_time_ns, ns=True)),
    (_getrandom, _sim_getrandom),
    (_rand_bytes, _sim_rand_bytes),
    (_open, _sim_open),
    (_os_open, _sim_os_open),
    (_CRandom, _SimCRandom),
    (_system, _real_process("os.system", _system)),
    (_fork, _real_process("os.fork", _fork)),
    (_posix_spawn, _real_process("os.posix_spawn", _posix_spawn)),
    (_posix_spawnp, _real_process("os.posix_spawnp", _posix_spawnp)),
    *_net_stdlib.IDENTITY,  # stdlib sockets and name lookups (no way out)
]
# class attributes patched directly (inherited by subclasses)
CLASS_PATCHES: list[tuple[type, str, object, object]] = [
    (
        subprocess.Popen,
        "_execute_child",
        _popen_execute_child,
        _real_process("subprocess.Popen", _popen_execute_child),
    ),
]
