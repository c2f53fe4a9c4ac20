"""Threads and the simulated world: nodes crash and pause, processes exit, runs end, to_thread
calls are cancelled, simulations are stepped."""

from __future__ import annotations

import concurrent.futures
import io
import queue
import threading
import time

import anyio.from_thread
import anyio.to_thread
import pytest
import trio

import kelpie_dst
from kelpie_dst import FailureKind, Node, Simulation
from kelpie_dst._trace import decode_trace
from tests.threads import programs


def now() -> float:
    sim = kelpie_dst.current_simulation()
    assert sim is not None
    return sim.now()


def test_a_crash_kills_the_nodes_threads_silently(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    beats: list[float] = []

    async def main(sim: Simulation) -> list[float]:
        async def server(node: Node) -> None:
            def beat() -> None:
                while True:
                    beats.append(now())
                    time.sleep(1)

            threading.Thread(target=beat, daemon=False).start()
            pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
            pool.submit(time.sleep, 100)  # one worker is killed in its job, one waiting
            pool.submit(time.sleep, 0.5)
            await trio.sleep_forever()

        node = sim.add_node("server", server)
        await trio.sleep(2.5)
        sim.crash(node)
        await trio.sleep(5)
        return list(beats)

    result = kelpie_dst.run(main, seed=1, record=True)
    assert result.ok, result.failure and result.failure.describe()
    assert result.value == [0.0, 1.0, 2.0]  # nothing after the crash at 2.5
    assert "Exception" not in capfd.readouterr().err  # a killed process raises nothing
    assert not caplog.records  # not even the pool's "Exception in worker"


def test_a_paused_nodes_threads_do_not_run() -> None:
    async def main(sim: Simulation) -> list[float]:
        beats: list[float] = []

        async def server(node: Node) -> None:
            def beat() -> None:
                for _ in range(6):
                    beats.append(now())
                    time.sleep(1)

            threading.Thread(target=beat).start()
            await trio.sleep_forever()

        node = sim.add_node("server", server)
        await trio.sleep(1.5)
        sim.pause(node)
        await trio.sleep(3)
        sim.resume(node)
        await trio.sleep(5)
        return beats

    result = kelpie_dst.run(main, seed=3)
    assert result.value == [0.0, 1.0, 4.5, 5.5, 6.5, 7.5]  # frozen from 1.5 to 4.5


def test_main_returning_waits_for_non_daemon_threads_and_kills_daemons() -> None:
    done: list[str] = []

    async def main() -> None:
        threading.Thread(target=lambda: time.sleep(5) or done.append("worker")).start()
        threading.Thread(
            target=lambda: time.sleep(50) or done.append("daemon"), daemon=True
        ).start()
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)  # never shut down
        pool.submit(lambda: time.sleep(3) or done.append("job"))

    result = kelpie_dst.run(main, seed=1)
    assert result.ok, result.failure and result.failure.describe()
    assert sorted(done) == ["job", "worker"] and result.virtual_time == 5.0


def test_a_forgotten_non_daemon_thread_is_a_liveness_failure() -> None:
    result = kelpie_dst.run(programs.left_running, seed=1)
    assert result.failure is not None and result.failure.kind is FailureKind.LIVENESS
    details = result.failure.details
    assert "thread 'forgotten'" in details and "a process waits at exit for it" in details
    assert "queue.py" in details and "in get" in details


def test_a_loop_blocked_forever_is_a_deadlock_naming_both_sides() -> None:
    result = kelpie_dst.run(programs.join_deadlock, seed=1)
    assert result.failure is not None and result.failure.kind is FailureKind.LIVENESS
    assert result.exit_code == 2
    line = programs.line_of("thread.join()", after="async def join_deadlock")
    assert f"programs.py:{line} in join_deadlock: thread.join()" in result.failure.message
    assert "thread 'waiter'" in result.failure.details


def test_a_thread_waiting_for_the_blocked_loop_is_reported() -> None:
    async def main() -> None:
        token = trio.lowlevel.current_trio_token()
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            future = pool.submit(trio.from_thread.run, trio.sleep, 1, trio_token=token)
            future.result()  # blocks the loop that from_thread.run needs: a real deadlock

    result = kelpie_dst.run(main, seed=1)
    assert result.failure is not None and result.failure.kind is FailureKind.LIVENESS
    assert "waiting for the trio loop (trio.from_thread)" in result.failure.details


def test_to_thread_cancellation_abandon_and_check_cancelled() -> None:
    async def main() -> list[object]:
        seen: list[object] = []
        finished = threading.Event()

        def slow() -> None:
            time.sleep(5)
            finished.set()

        with trio.move_on_after(1):  # abandoned at once; the thread goes on in the background
            await trio.to_thread.run_sync(slow, abandon_on_cancel=True)
        seen.append(("abandoned", now()))
        with trio.move_on_after(1) as scope:  # not abandonable: waits for the thread
            await trio.to_thread.run_sync(time.sleep, 3)  # and returns, as in trio
        seen.append(("waited", now(), scope.cancel_called, scope.cancelled_caught))
        await trio.to_thread.run_sync(finished.wait)
        seen.append(("background finished", now()))

        def polite() -> str:
            for _ in range(10):
                time.sleep(1)
                trio.from_thread.check_cancelled()
            return "never cancelled"

        with trio.move_on_after(2.5):
            seen.append(await trio.to_thread.run_sync(polite))
        seen.append(("polite", now()))
        try:
            trio.from_thread.check_cancelled()
        except RuntimeError as error:
            seen.append(str(error))
        return seen

    result = kelpie_dst.run(main, seed=1)
    assert result.ok, result.failure and result.failure.describe()
    assert result.value == [
        ("abandoned", 1.0),
        ("waited", 4.0, True, False),
        ("background finished", 5.0),
        ("polite", 8.0),
        "this thread wasn't created by Trio, can't check for cancellation",
    ]


def test_the_to_thread_limiter_is_respected() -> None:
    async def main() -> float:
        limiter = trio.CapacityLimiter(1)
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(lambda: trio.to_thread.run_sync(time.sleep, 1, limiter=limiter))
        return now()

    assert kelpie_dst.run(main, seed=1).value == 3.0


def test_anyio_threads_work_as_trios() -> None:
    async def main() -> list[object]:
        def work() -> object:
            return anyio.from_thread.run(trio.sleep, 2) or anyio.from_thread.run_sync(now)

        return [await anyio.to_thread.run_sync(work), now()]

    assert kelpie_dst.run(main, seed=1).value == [2.0, 2.0]


def test_threads_live_across_steps_of_an_open_simulation() -> None:
    jobs: queue.Queue[int] = queue.Queue()
    got: list[tuple[int, float]] = []

    async def start() -> None:
        def consume() -> None:
            while (item := jobs.get()) >= 0:
                got.append((item, now()))

        threading.Thread(target=consume, daemon=True).start()

    async def feed(item: int) -> None:
        jobs.put(item)
        await trio.sleep(1)

    with kelpie_dst.open_simulation(seed=3) as handle:
        handle.step(start)
        handle.step(feed, 7)
        handle.advance(10)
        handle.step(feed, 8)
    assert got == [(7, 0.0), (8, 11.0)]


def test_thread_free_programs_pay_nothing() -> None:
    """No thread: no extra task, stream or event, so earlier traces keep their hashes."""

    async def main() -> None:
        await trio.sleep(1)

    sink = io.BytesIO()
    assert kelpie_dst.run(main, seed=1, trace_file=sink).ok
    events = list(decode_trace(sink.getvalue()))
    assert not [e for e in events if e.kind.startswith("thread") or "thread" in str(e.fields)]
    assert not [name for name in events[-1].fields["rng"] if name.startswith("threads/")]


def test_options_are_validated() -> None:
    with pytest.raises(kelpie_dst.UsageError, match="watchdog must be a positive number"):
        kelpie_dst.run(programs.timers, watchdog=0)
    with pytest.raises(kelpie_dst.UsageError, match="watchdog must be a positive number"):
        kelpie_dst.open_simulation(watchdog=-1.0)


def test_raw_start_new_thread_is_simulated_and_strict_refuses_it() -> None:
    import _thread

    async def main() -> list[object]:
        done = threading.Event()
        ident = _thread.start_new_thread(lambda: time.sleep(2) or done.set(), ())
        done.wait()
        return [isinstance(ident, int), now()]

    result = kelpie_dst.run(main, seed=1)
    assert result.value == [True, 2.0]
    assert [call for call, _site, _n in result.redirected] == ["_thread.start_new_thread"]
    strict = kelpie_dst.run(main, seed=1, guards="strict")
    assert strict.failure is not None and strict.failure.kind is FailureKind.NONDETERMINISM
    assert "_thread.start_new_thread called at" in strict.failure.message
    assert "test_lifecycle.py" in strict.failure.message


def test_a_thread_that_swallows_its_kill_is_given_up_on() -> None:
    async def main() -> None:
        def stubborn() -> None:
            while True:
                try:
                    time.sleep(1)
                except BaseException:  # what the test is about
                    pass

        threading.Thread(target=stubborn, daemon=True).start()
        await trio.sleep(2.5)

    result = kelpie_dst.run(main, seed=1)
    assert result.ok, result.failure and result.failure.describe()
    assert result.virtual_time == 2.5


def test_stdlib_sockets_in_threads_use_the_simulated_network() -> None:
    """A blocking stdlib client in a thread (plain or to_thread's) is served by the simulated
    network through the thread's host task; the trio loop itself may not block on one."""
    import socket

    async def main(sim: Simulation) -> list[object]:
        async def server(node: Node) -> None:
            async def echo(stream: trio.SocketStream) -> None:
                async with stream:
                    await stream.send_all(b"echo:" + await stream.receive_some(100))

            await trio.serve_tcp(echo, 7000)

        sim.add_node("srv", server)
        await trio.sleep(0.1)

        def client(tag: str) -> bytes:
            with socket.create_connection(("srv", 7000)) as sock:
                sock.sendall(tag.encode())
                return sock.recv(100)

        replies: list[object] = [await trio.to_thread.run_sync(client, "worker")]
        box: list[bytes] = []
        thread = threading.Thread(target=lambda: box.append(client("plain")))
        thread.start()
        await trio.to_thread.run_sync(thread.join)
        return [*replies, *box]

    first = kelpie_dst.run(main, seed=2)
    assert first.ok, first.failure and first.failure.describe()
    assert first.value == [b"echo:worker", b"echo:plain"]
    assert kelpie_dst.run(main, seed=2).trace_hash == first.trace_hash
