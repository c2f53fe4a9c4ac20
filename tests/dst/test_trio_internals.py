"""The simulator depends on two private trio attributes; fail loudly if a release removes them."""

import random

import trio

from kelpie_dst._sched import RandomStrategy, check_trio_internals, installed_scheduler


def test_private_scheduler_hooks_exist() -> None:
    run_module = trio._core._run
    assert isinstance(run_module._r, random.Random)
    assert run_module._ALLOW_DETERMINISTIC_SCHEDULING in (True, False)
    assert hasattr(run_module.GLOBAL_RUN_CONTEXT, "__dict__")
    check_trio_internals()


def test_scheduler_batches_go_through_r_shuffle_when_deterministic() -> None:
    # If trio stops calling _r.shuffle(batch), our strategies silently stop working.
    calls: list[int] = []

    class Spy(RandomStrategy):
        def _order(self, batch):  # type: ignore[no-untyped-def]
            calls.append(len(batch))
            super()._order(batch)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(trio.sleep, 0)

    with installed_scheduler(Spy(1)):
        trio.run(main)
    assert calls and max(calls) >= 3


def test_installed_scheduler_restores_trio_state() -> None:
    run_module = trio._core._run
    before = (run_module._r, run_module._ALLOW_DETERMINISTIC_SCHEDULING)
    with installed_scheduler(RandomStrategy(5)):
        assert run_module._ALLOW_DETERMINISTIC_SCHEDULING is True
        assert isinstance(run_module._r, RandomStrategy)
    assert (run_module._r, run_module._ALLOW_DETERMINISTIC_SCHEDULING) == before


def test_trio_version_is_in_the_tested_range() -> None:
    major, minor = (int(x) for x in trio.__version__.split(".")[:2])
    assert (0, 27) <= (major, minor) < (0, 36), trio.__version__


def test_the_deadline_table_the_trace_hooks_is_unchanged() -> None:
    # _sched._TracedDeadlines inlines Deadlines.add and swaps the runner's table at start:
    # if trio changes either, timers silently leave the trace (issue #14).
    import inspect

    from kelpie_dst._sched import _TracedDeadlines

    source = inspect.getsource(trio._core._run.Deadlines.add)
    assert "heappush(self._heap, (deadline, id(cancel_scope), cancel_scope))" in source
    assert "self._active += 1" in source
    assert {"_heap", "_active"} <= set(trio._core._run.Deadlines.__slots__)
    assert issubclass(_TracedDeadlines, trio._core._run.Deadlines)
