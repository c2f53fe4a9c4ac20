"""Guards for time zones, monotonic clocks and calls made by imports inside a simulation."""

import datetime
import importlib
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import kelpie_dst
from kelpie_dst._guards import MONOTONIC_OFFSET


@pytest.fixture
def host_zone() -> Iterator[None]:
    """Lets a test switch the host's time zone (TZ + tzset), restoring it afterwards."""
    saved = os.environ.get("TZ")
    yield
    if saved is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = saved
    time.tzset()


async def wall_readings() -> dict[str, object]:
    await trio.sleep(3661)  # 01:01:01 into the default epoch, 2026-01-01T00:00:00Z
    return {
        "now": datetime.datetime.now().isoformat(),
        "today": datetime.datetime.today().isoformat(),
        "date": datetime.date.today().isoformat(),
        "fromtimestamp": datetime.datetime.fromtimestamp(0).isoformat(),
        "localtime": tuple(time.localtime())[:6],
        "localtime_of": tuple(time.localtime(86400))[:6],
        "strftime": time.strftime("%Y-%m-%d %H:%M:%S"),
        "ctime": time.ctime(),
        "asctime": time.asctime(),
        "mktime": time.mktime(time.localtime(86400)),
    }


@pytest.mark.usefixtures("host_zone")
@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Asia/Kolkata"])
def test_simulated_machines_run_in_utc_whatever_the_host_zone(zone: str) -> None:
    os.environ["TZ"] = zone
    time.tzset()
    result = kelpie_dst.run(wall_readings, seed=1)
    assert result.ok, result.failure
    assert result.value == {
        "now": "2026-01-01T01:01:01",
        "today": "2026-01-01T01:01:01",
        "date": "2026-01-01",
        "fromtimestamp": "1970-01-01T00:00:00",
        "localtime": (2026, 1, 1, 1, 1, 1),
        "localtime_of": (1970, 1, 2, 0, 0, 0),
        "strftime": "2026-01-01 01:01:01",
        "ctime": "Thu Jan  1 01:01:01 2026",
        "asctime": "Thu Jan  1 01:01:01 2026",
        "mktime": 86400.0,
    }
    calls = {call for call, _site, _n in result.redirected}
    assert {"time.localtime", "time.strftime", "time.ctime", "datetime.now"} <= calls
    assert kelpie_dst.run(wall_readings, seed=1).trace_hash == result.trace_hash


def test_clock_reads_with_no_time_fail_strict_mode() -> None:
    async def main() -> str:
        return time.strftime("%H:%M")

    result = kelpie_dst.run(main, guards="strict")
    assert result.failure is not None and "time.strftime called at" in result.failure.message


def test_monotonic_clocks_read_virtual_time_and_are_not_violations() -> None:
    async def main() -> list[float]:
        readings = [time.monotonic(), time.perf_counter()]
        await trio.sleep(2.5)
        readings += [time.monotonic(), time.perf_counter(), trio.current_time()]
        readings += [time.monotonic_ns() / 1e9, time.perf_counter_ns() / 1e9]
        return readings

    result = kelpie_dst.run(main, seed=1, guards="strict")
    assert result.ok, result.failure
    assert (
        result.value
        == [MONOTONIC_OFFSET] * 2
        + [MONOTONIC_OFFSET + 2.5] * 2
        + [2.5]
        + [MONOTONIC_OFFSET + 2.5] * 2
    )
    assert result.redirected == ()
    assert time.monotonic() != MONOTONIC_OFFSET + 2.5  # restored after the run


def test_other_threads_keep_real_time_and_blocking_primitives_use_virtual_time() -> None:
    seen: list[float] = []
    stop = threading.Event()

    def watch() -> None:  # a host thread (a progress bar, say) running while the run steps
        while not stop.is_set():
            seen.append(time.monotonic())
            time.sleep(0.001)

    async def main() -> float:
        waited = time.monotonic()
        with pytest.raises(queue.Empty):
            queue.Queue().get(timeout=0.02)  # times out in virtual time (simulated threads)
        for _ in range(50):
            await trio.sleep(1)
            time.sleep(0.001)  # the trio loop blocks for a virtual millisecond
        return time.monotonic() - waited

    watcher = threading.Thread(target=watch)
    start = time.monotonic()
    watcher.start()
    try:
        result = kelpie_dst.run(main, seed=1)
    finally:
        stop.set()
        watcher.join()
    end = time.monotonic()
    assert result.ok, result.failure and result.failure.describe()
    assert result.value == pytest.approx(50 + 0.02 + 50 * 0.001)
    assert seen and all(start <= value <= end for value in seen)


IMPORTED = """
import random, time, uuid
INSTANCE = uuid.uuid4()
STARTED = time.time()
DRAW = random.Random().random()

def later():
    return uuid.uuid4()
"""


@pytest.fixture
def fresh_module(tmp_path: Path) -> Iterator[str]:
    name = f"kelpie_import_probe_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(IMPORTED)
    sys.path.insert(0, str(tmp_path))
    yield name
    sys.path.remove(str(tmp_path))
    sys.modules.pop(name, None)


def test_guarded_calls_made_by_an_import_are_plumbing(fresh_module: str) -> None:
    async def main() -> tuple[str, float, float]:
        await trio.sleep(1)
        module = importlib.import_module(fresh_module)
        return str(module.INSTANCE), module.STARTED, module.DRAW

    first = kelpie_dst.run(main, seed=1, guards="strict")  # imports the module
    second = kelpie_dst.run(main, seed=1, guards="strict")  # finds it imported
    assert first.ok, first.failure and first.failure.describe()
    assert first.value == second.value
    assert first.trace_hash == second.trace_hash  # not traced: only the first run imports
    assert first.redirected == ()
    instance, started, _ = first.value  # type: ignore[misc]
    assert started == kelpie_dst.DEFAULT_EPOCH + 1
    # A fresh process, another seed: the module's values are keyed by its name, not the seed.
    code = (
        f"import importlib, trio, kelpie_dst\n"
        f"async def main():\n"
        f"    return str(importlib.import_module({fresh_module!r}).INSTANCE)\n"
        f"print(kelpie_dst.run(main, seed=2, guards='strict').value)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert proc.stdout.strip() == instance


def test_calls_after_the_import_are_still_guarded(fresh_module: str) -> None:
    async def main() -> str:
        module = importlib.import_module(fresh_module)
        return str(module.later())

    result = kelpie_dst.run(main, seed=1, guards="strict")
    assert result.failure is not None
    assert "uuid.uuid4 called at" in result.failure.message and "in later" in result.failure.message
