"""Guard coverage (issue #14): the sources the guards did not cover, strict naming the user's
line, and module-level random state reset between in-process runs."""

from __future__ import annotations

import _random
import builtins
import concurrent.futures
import datetime
import email.utils
import io
import os
import shutil
import ssl
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable

import pytest
import trio

import kelpie_dst
from kelpie_dst import FailureKind


class Stamp(datetime.datetime):
    """A datetime subclass defined before the run (as libraries define theirs)."""


INSTANCE = datetime.datetime(2020, 1, 1)  # bound before the run
REAL_OPEN = builtins.open


def _read_device() -> str:
    with open("/dev/urandom", "rb") as device:
        return device.read(8).hex()


def _os_read_device() -> str:
    fd = os.open("/dev/urandom", os.O_RDONLY)
    try:
        return os.read(fd, 8).hex()
    finally:
        os.close(fd)


SOURCES: dict[str, Callable[[], object]] = {
    "time.clock_gettime": lambda: time.clock_gettime(time.CLOCK_REALTIME),
    "time.clock_gettime_ns": lambda: time.clock_gettime_ns(time.CLOCK_REALTIME),
    "os.getrandom": lambda: os.getrandom(8).hex(),
    "open(/dev/urandom)": _read_device,
    "os.open(/dev/urandom)": _os_read_device,
    "ssl.RAND_bytes": lambda: ssl.RAND_bytes(8).hex(),
    "_random.Random() without a seed": lambda: _random.Random().random(),
    "datetime.now": lambda: INSTANCE.now().isoformat(),
    "datetime.utcnow": lambda: type(INSTANCE).utcnow().isoformat(),
    "datetime.today": lambda: Stamp.today().isoformat(),
    "date.today": lambda: INSTANCE.date().today().isoformat(),
}


def program(source: Callable[[], object]) -> Callable[[], Awaitable[object]]:
    async def main() -> object:
        await trio.sleep(2)
        return source()

    return main


@pytest.mark.parametrize("call", sorted(SOURCES))
def test_each_source_is_redirected_deterministically(call: str) -> None:
    main = program(SOURCES[call])
    first = kelpie_dst.run(main, seed=1)
    again = kelpie_dst.run(main, seed=1)
    assert first.ok, first.failure
    assert first.value == again.value and first.trace_hash == again.trace_hash
    assert [c for c, _site, _n in first.redirected] == [call]
    assert first.redirected[0][1].startswith(f"{__name__}:")


@pytest.mark.parametrize("call", sorted(SOURCES))
def test_strict_fails_each_source_naming_this_file(call: str) -> None:
    result = kelpie_dst.run(program(SOURCES[call]), seed=1, guards="strict")
    assert result.failure is not None and result.failure.kind is FailureKind.NONDETERMINISM
    assert f"{call} called at {__file__}:" in result.failure.message


def test_redirected_values() -> None:
    def values() -> list[object]:
        return [SOURCES[name]() for name in ("time.clock_gettime", "datetime.now", "date.today")]

    result = kelpie_dst.run(program(values), seed=1, epoch=1_000_000.0)
    assert result.value == [1_000_002.0, "1970-01-12T13:46:42", "1970-01-12"]
    stamp = kelpie_dst.run(program(lambda: Stamp.now()), seed=1).value
    assert type(stamp) is Stamp and stamp == Stamp(2026, 1, 1, 0, 0, 2)
    devices = [kelpie_dst.run(program(_read_device), seed=s).value for s in (1, 2)]
    assert devices[0] != devices[1]  # from the seed, not a constant


def test_monotonic_and_cpu_clocks_read_virtual_time_and_are_not_reported() -> None:
    def clocks() -> list[float]:
        return [time.clock_gettime(time.CLOCK_MONOTONIC), time.process_time()]

    result = kelpie_dst.run(program(clocks), seed=1, guards="strict")
    assert result.ok and result.value == [100_002.0, 2.0]


def test_originals_are_back_after_the_run() -> None:
    kelpie_dst.run(program(lambda: [f() for f in SOURCES.values()]), seed=1)
    assert INSTANCE.now().year >= 2025 and Stamp.today().year >= 2025
    assert type(_random.Random()) is _random.Random
    assert time.clock_gettime(time.CLOCK_REALTIME) > 1_700_000_000
    assert builtins.open is io.open is REAL_OPEN


def test_real_processes_are_flagged_by_strict() -> None:
    async def main() -> None:
        import subprocess

        subprocess.run(["true"], check=True)

    result = kelpie_dst.run(main, seed=1, guards="strict")
    assert result.failure is not None
    assert "subprocess.run (uses subprocess.Popen) called at " in result.failure.message
    assert f"{__file__}:" in result.failure.message


# -- strict names the user's line ----------------------------------------------------------------
def _strict_message(main: Callable[[], Awaitable[object]]) -> str:
    result = kelpie_dst.run(main, seed=1, guards="strict")
    assert result.failure is not None and result.failure.kind is FailureKind.NONDETERMINISM
    return result.failure.message


def test_strict_on_a_thread_pool_names_the_users_line() -> None:
    """Threads are simulated, so strict accepts the pool itself (docs/threads.md); a clock
    read inside the pool's function names that line, not concurrent/futures/thread.py."""

    async def main() -> float:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            assert pool.submit(lambda: 1).result() == 1
            return pool.submit(lambda: time.time()).result()

    message = _strict_message(main)
    assert message.startswith("NondeterminismError: time.time called at ")
    assert f"{__file__}:" in message and "concurrent/futures" not in message


def test_strict_on_a_lazy_import_names_the_module_line() -> None:
    async def main() -> None:
        from . import lazy_start  # noqa: F401

    sys.modules.pop(f"{__package__}.lazy_start", None)
    message = _strict_message(main)
    assert "lazy_start.py:5 (in <module>)" in message and "frozen" not in message


def test_strict_on_a_subprocess_names_what_the_user_called() -> None:
    async def main() -> None:
        await trio.run_process(["true"])

    message = _strict_message(main)
    assert message.startswith("NondeterminismError: trio.run_process (uses ")
    assert f"{__file__}:" in message


def test_guard_allow_covers_calls_made_through_an_allowed_module() -> None:
    async def main() -> str:
        return email.utils.formatdate()  # the standard library calls time.time

    assert not kelpie_dst.run(main, seed=1, guards="strict").ok
    allowed = kelpie_dst.run(main, seed=1, guards="strict", guard_allow=["email"])
    assert allowed.ok and allowed.value == "Thu, 01 Jan 2026 00:00:00 -0000"


# -- module-level random state ---------------------------------------------------------------
async def make_temp_dir() -> str:
    path = tempfile.mkdtemp()
    kelpie_dst.log("made", name=os.path.basename(path))
    shutil.rmtree(path)
    return path


def test_one_mkdtemp_is_not_a_false_positive() -> None:
    report = kelpie_dst.check_determinism(make_temp_dir, seed=1, runs=2)
    assert report.deterministic, report.describe()
    names = {kelpie_dst.run(make_temp_dir, seed=s).value for s in (1, 1, 2)}
    assert len(names) == 2  # seeded per run: seed 1 twice gives one name


def test_the_hosts_temporary_names_go_on_undisturbed() -> None:
    before = tempfile._name_sequence  # type: ignore[attr-defined]
    kelpie_dst.run(make_temp_dir, seed=1)
    assert tempfile._name_sequence is before  # type: ignore[attr-defined]


def test_numpy_global_generator_is_seeded_per_run_and_restored() -> None:
    numpy = pytest.importorskip("numpy")

    async def draws() -> list[float]:
        return [float(x) for x in numpy.random.random(3)]

    numpy.random.seed(1234)
    host_next = numpy.random.get_state()[1][:4].tolist()
    first = kelpie_dst.run(draws, seed=1)
    again = kelpie_dst.run(draws, seed=1)
    other = kelpie_dst.run(draws, seed=2)
    assert first.value == again.value != other.value
    assert numpy.random.get_state()[1][:4].tolist() == host_next


def test_numpy_default_rng_without_a_seed_is_guarded() -> None:
    numpy = pytest.importorskip("numpy")

    async def draw() -> float:
        return float(numpy.random.default_rng().random())  # numpy seeds it from secrets

    first, again = (kelpie_dst.run(draw, seed=3) for _ in range(2))
    assert first.value == again.value
    message = _strict_message(draw)
    assert f"secrets called at {__file__}:" in message
