"""Nondeterminism guards: redirect serves deterministic values, strict names the call site."""

import datetime
import importlib.util
import os
import random
import secrets
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from time import time as imported_time

import anyio.to_thread
import pytest
import trio

import kelpie_dst
from kelpie_dst import FailureKind
from kelpie_dst._cli_common import print_report


async def everything() -> dict[str, object]:
    await trio.sleep(2)
    results: list[int] = []
    thread = threading.Thread(target=lambda: results.append(7))
    thread.start()
    thread.join()
    return {
        "time": time.time(),
        "time_ns": time.time_ns(),
        "imported_time": imported_time(),
        "now": datetime.datetime.now(datetime.UTC).isoformat(),
        "utcnow": datetime.datetime.utcnow().isoformat(),
        "today": datetime.date.today().isoformat(),
        "uuid4": str(uuid.uuid4()),
        "uuid1": str(uuid.uuid1()),
        "urandom": os.urandom(8).hex(),
        "token": secrets.token_hex(8),
        "randbits": secrets.randbits(32),
        "sysrandom": random.SystemRandom().random(),
        "unseeded": random.Random().random(),
        "thread": results,
        "thread_alive": thread.is_alive(),
        "to_thread": await trio.to_thread.run_sync(lambda: 11),
        "anyio_to_thread": await anyio.to_thread.run_sync(lambda: 12),
    }


def test_redirect_serves_deterministic_values() -> None:
    first = kelpie_dst.run(everything, seed=1, epoch=1_000_000.0)
    again = kelpie_dst.run(everything, seed=1, epoch=1_000_000.0)
    other = kelpie_dst.run(everything, seed=2, epoch=1_000_000.0)
    assert first.ok, first.failure
    assert first.value == again.value
    assert first.trace_hash == again.trace_hash
    assert first.value["uuid4"] != other.value["uuid4"]  # type: ignore[index]
    values = first.value
    assert isinstance(values, dict)
    assert values["time"] == values["imported_time"] == 1_000_002.0
    assert values["time_ns"] == 1_000_002 * 10**9
    assert values["now"] == "1970-01-12T13:46:42+00:00"
    assert values["thread"] == [7] and values["thread_alive"] is False
    assert values["to_thread"] == 11 and values["anyio_to_thread"] == 12
    calls = {call for call, _site, _n in first.redirected}
    assert {"time.time", "uuid.uuid4", "os.urandom"} <= calls
    assert not [c for c in calls if "thread" in c]  # threads are simulated, not redirected
    assert all(site.startswith("tests.dst.test_guards:") for _c, site, _n in first.redirected)


def _clock_program(tmp_path: Path, blank_lines: int) -> Callable[[], Awaitable[float]]:
    """``program`` of a module of its own, with ``blank_lines`` blank lines above its calls."""
    source = "\n" * blank_lines + (
        "import time\n\n\nasync def program():\n"
        "    first = time.time()\n"
        "    return first + time.time()  # a second line of the same function\n"
    )
    path = tmp_path / f"guard_lines_{blank_lines}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("guard_lines", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    program: Callable[[], Awaitable[float]] = module.program
    return program


def test_code_added_above_a_redirected_call_does_not_move_the_trace(tmp_path: Path) -> None:
    """The trace names a redirected site by module and function, once (Dlead12-3): blank
    lines above the calls keep the trace hash, while the report keeps each line."""
    high = kelpie_dst.run(_clock_program(tmp_path, 0), seed=4)
    low = kelpie_dst.run(_clock_program(tmp_path, 3), seed=4)
    assert high.ok and low.ok
    assert high.trace_hash == low.trace_hash
    assert [site for _call, site, _n in high.redirected] == ["guard_lines:5", "guard_lines:6"]
    assert [site for _call, site, _n in low.redirected] == ["guard_lines:8", "guard_lines:9"]


def test_originals_are_restored_after_a_run() -> None:
    kelpie_dst.run(everything, seed=3)
    assert time.time() > 1_700_000_000
    assert datetime.datetime.now().year >= 2025
    assert type(datetime.datetime.now()) is datetime.datetime
    assert datetime.datetime.__name__ == "datetime" and datetime.datetime.__module__ == "datetime"
    assert imported_time is time.time
    assert uuid.uuid4() != uuid.uuid4()


def test_isinstance_keeps_working_while_patched() -> None:
    async def main() -> bool:
        real = datetime.datetime(2020, 1, 1)
        return isinstance(real, datetime.datetime) and type(real) is type(datetime.datetime.now())

    assert kelpie_dst.run(main).value is True


@pytest.mark.parametrize(
    ("entry", "call", "line"),
    [
        ("uses_time", "time.time", 18),
        ("uses_uuid", "uuid.uuid4", 23),
    ],
)
def test_strict_fails_naming_the_call_site(entry: str, call: str, line: int) -> None:
    from kelpie_dst.examples import leaky

    result = kelpie_dst.run(getattr(leaky, entry), guards="strict")
    assert result.failure is not None
    assert result.failure.kind is FailureKind.NONDETERMINISM
    assert result.exit_code == 4
    assert f"{call} called at " in result.failure.message
    assert f"leaky.py:{line}" in result.failure.message


def test_strict_allows_simulated_threads() -> None:
    from kelpie_dst.examples import leaky

    result = kelpie_dst.run(leaky.uses_thread, guards="strict")
    assert result.ok, result.failure
    assert result.value == [42]


def test_strict_violation_swallowed_by_the_program_still_fails() -> None:
    async def main() -> None:
        try:
            os.urandom(4)
        except Exception:
            pass

    result = kelpie_dst.run(main, guards="strict")
    assert result.failure is not None and result.failure.kind is FailureKind.NONDETERMINISM


def test_strict_allow_list_exempts_modules() -> None:
    async def main() -> float:
        return time.time()

    result = kelpie_dst.run(main, guards="strict", guard_allow=["tests.dst"])
    assert result.ok and result.value == kelpie_dst.DEFAULT_EPOCH
    assert result.guards == "strict" and len(result.redirected) == 1


@pytest.mark.parametrize(
    ("guards", "allow", "line"),
    [
        ("redirect", (), "guards redirected 1 call site(s); --strict makes them fail"),
        ("strict", ("tests.dst",), "guards redirected 1 call site(s) in guard_allow modules"),
    ],
)
def test_the_report_line_says_what_strict_would_do(
    guards: str, allow: tuple[str, ...], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def main() -> float:
        return time.time()

    result = kelpie_dst.run(main, guards=guards, guard_allow=allow)
    print_report(result, "replay: -")
    assert line in capsys.readouterr().out.splitlines()


def test_off_leaves_everything_alone() -> None:
    async def main() -> float:
        return time.time()

    result = kelpie_dst.run(main, guards="off")
    assert result.ok and result.value > 1_700_000_000  # type: ignore[operator]
    assert result.redirected == ()
