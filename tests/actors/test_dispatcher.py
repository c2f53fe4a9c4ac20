"""One node: activation, mailbox order, idle deactivation, errors, cancellation, shutdown.

Each test runs inside the simulator with the strict nondeterminism guards, over a few seeds
(``--dst-seeds N`` for more); the invariant under test is in each test's name.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import pytest
import trio

from kelpie_agent.actors import (
    ActorId,
    ActorStoppedError,
    LeaseLostError,
    UnknownActorKindError,
    read_lease,
)
from kelpie_agent.actors._lease import LEASE
from kelpie_agent.storage import KV, ConflictError
from kelpie_dst import Simulation
from kelpie_dst.shims import open_kv

from .actors import Add, Boom, Counter, Get, Slow, pack, state_key, unpack
from .harness import OPTIONS, local_dispatcher

A = ActorId("counter", "a")
B = ActorId("counter", "b")
dst = pytest.mark.dst(seeds=3, guards="strict")


@dst
async def test_one_mailbox_processes_requests_one_at_a_time_in_arrival_order(
    dst: Simulation,
) -> None:
    async with local_dispatcher(dst) as local:
        results: dict[int, int] = {}

        async def send(i: int) -> None:
            await trio.sleep(i * 0.01)  # arrival order = i
            results[i] = await local.dispatcher.request(A, Slow(0.1, i))

        async with trio.open_nursery() as nursery:
            for i in range(1, 6):
                nursery.start_soon(send, i)
        # Running totals in arrival order prove both ordering and one-at-a-time handling.
        assert results == {1: 1, 2: 3, 3: 6, 4: 10, 5: 15}
        handles = local.journal.of("handle")
        assert all(a.end <= b.start for a, b in itertools.pairwise(handles))
        assert local.dispatcher.active() == (A,)


@dst
async def test_activation_loads_state_and_idle_deactivation_persists_it(dst: Simulation) -> None:
    async with local_dispatcher(dst) as local:
        await local.kv.set(state_key(A), pack({"count": 40}))
        assert await local.dispatcher.request(A, Add(2)) == 42
        assert await local.dispatcher.request(A, Add(1)) == 43
        assert unpack(await local.kv.get(state_key(A))) == {"count": 40}  # write-behind
        await trio.sleep(OPTIONS.idle_timeout + 1)
        assert local.dispatcher.active() == ()
        assert unpack(await local.kv.get(state_key(A))) == {"count": 43}
        deactivation = local.journal.of("deactivate")[0]
        assert deactivation.start == pytest.approx(local.journal.of("handle")[-1].end + 10)
        lease = await read_lease(local.kv, A)
        assert lease is not None and lease.node is None and lease.epoch == 1  # released
        # Reactivation restores the persisted state, under a new epoch.
        assert await local.dispatcher.request(A, Get()) == 43
        assert [s.epoch for s in local.journal.of("activate")] == [1, 2]


@dst
async def test_actors_are_independent_and_each_activates_once(dst: Simulation) -> None:
    async with local_dispatcher(dst) as local:
        async with trio.open_nursery() as nursery:
            for actor in (A, B) * 5:
                nursery.start_soon(local.dispatcher.request, actor, Add(1))
        assert await local.dispatcher.request(A, Get()) == 5
        assert await local.dispatcher.request(B, Get()) == 5
        assert sorted(s.actor for s in local.journal.of("activate")) == ["counter/a", "counter/b"]


@dst
async def test_a_handle_exception_reaches_the_caller_and_the_actor_stays_active(
    dst: Simulation,
) -> None:
    async with local_dispatcher(dst) as local:
        await local.dispatcher.request(A, Add(3))
        with pytest.raises(ValueError, match="bad input"):
            await local.dispatcher.request(A, Boom("bad input"))
        assert await local.dispatcher.request(A, Add(1)) == 4  # same activation, same memory
        assert len(local.journal.of("activate")) == 1


@dst
async def test_a_failing_activate_fails_the_request_but_not_the_runtime(dst: Simulation) -> None:
    Counter.fail_activation = {"broken"}
    try:
        async with local_dispatcher(dst) as local:
            broken = ActorId("counter", "broken")
            with pytest.raises(RuntimeError, match="cannot activate broken"):
                await local.dispatcher.request(broken, Get())
            assert broken not in local.dispatcher.active()
            lease = await read_lease(local.kv, broken)
            assert lease is not None and lease.node is None  # released after the failure
            assert await local.dispatcher.request(A, Add(1)) == 1  # others unaffected
            Counter.fail_activation = set()
            assert await local.dispatcher.request(broken, Add(1)) == 1  # retried, and works
    finally:
        Counter.fail_activation = set()


@dst
async def test_a_cancelled_caller_does_not_interrupt_the_message_in_flight(
    dst: Simulation,
) -> None:
    async with local_dispatcher(dst) as local:
        with trio.move_on_after(0.5):
            await local.dispatcher.request(A, Slow(2.0, 10))  # cancelled mid-handle
        with trio.move_on_after(0.1):
            # Queued behind the slow message, cancelled before it started: never handled.
            async with trio.open_nursery() as nursery:
                nursery.start_soon(local.dispatcher.request, A, Add(100))
        assert await local.dispatcher.request(A, Get()) == 10
        handled = local.journal.of("handle")
        assert [round(s.end - s.start, 3) for s in handled] == [2.0, 0.0]


@dst
async def test_explicit_deactivate_persists_and_releases(dst: Simulation) -> None:
    async with local_dispatcher(dst) as local:
        await local.dispatcher.request(A, Add(7))
        await local.dispatcher.deactivate(A)
        assert local.dispatcher.active() == ()
        assert unpack(await local.kv.get(state_key(A))) == {"count": 7}
        lease = await read_lease(local.kv, A)
        assert lease is not None and lease.node is None
        await local.dispatcher.deactivate(B)  # not active: a no-op


class FlakyCounter(Counter):
    """Its deactivate fails the first ``failures`` times."""

    failures = 1

    async def deactivate(self) -> None:
        if FlakyCounter.failures > 0:
            FlakyCounter.failures -= 1
            raise OSError("disk full")
        await super().deactivate()


@dst
async def test_a_failed_deactivate_keeps_the_actor_active_so_no_state_is_lost(
    dst: Simulation,
) -> None:
    FlakyCounter.failures = 1
    holder: list[FlakyCounter] = []

    def make(aid: ActorId) -> FlakyCounter:
        holder.append(FlakyCounter(aid, journal))
        return holder[-1]

    from .actors import Journal

    journal = Journal()
    async with local_dispatcher(dst, factories={"counter": make}) as local:
        await local.dispatcher.request(A, Add(5))
        with pytest.raises(OSError, match="disk full"):
            await local.dispatcher.deactivate(A)
        assert local.dispatcher.active() == (A,)
        assert await local.dispatcher.request(A, Add(1)) == 6
        await trio.sleep(OPTIONS.idle_timeout + 1)  # the idle deactivation succeeds
        assert local.dispatcher.active() == ()
        assert unpack(await local.kv.get(state_key(A))) == {"count": 6}
        assert len(holder) == 1


@dst
async def test_stopping_the_dispatcher_deactivates_everything_and_releases_leases(
    dst: Simulation,
) -> None:
    async with local_dispatcher(dst) as local:
        await local.dispatcher.request(A, Add(1))
        await local.dispatcher.request(B, Add(2))
        kv, dispatcher = local.kv, local.dispatcher
    for actor, count in ((A, 1), (B, 2)):
        assert unpack(await kv.get(state_key(actor))) == {"count": count}
        lease = await read_lease(kv, actor)
        assert lease is not None and lease.node is None
    with pytest.raises(ActorStoppedError, match="has stopped"):
        await dispatcher.request(A, Get())


class _ReleasesConflict:
    """A store whose first ``conflicts`` lease releases (transactions deleting a lease record)
    fail with ``ConflictError`` and apply nothing, as PostgreSQL's serializable isolation
    fails some of the concurrent releases of a stopping node."""

    def __init__(self, kv: KV, conflicts: int) -> None:
        self._kv = kv
        self.conflicts = conflicts

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kv, name)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        async with self._kv.transaction() as txn:
            deleted: list[bytes] = []
            real_delete = txn.delete

            async def delete(key: bytes) -> None:
                deleted.append(key)
                await real_delete(key)

            txn.delete = delete  # type: ignore[method-assign]
            yield txn
            if self.conflicts and any(key.startswith(LEASE) for key in deleted):
                self.conflicts -= 1
                raise ConflictError("a serialization failure at the release's commit")


@dst
async def test_a_release_that_conflicts_is_retried_so_a_clean_stop_leaves_no_lease_held(
    dst: Simulation,
) -> None:
    """Without the retry the lease stays held until it expires, and another node waits for it."""
    node = dst.current_node()
    assert node is not None
    kv = _ReleasesConflict(open_kv(node), conflicts=3)
    async with local_dispatcher(dst, kv=cast(KV, kv)) as local:
        await local.dispatcher.request(A, Add(1))
        await local.dispatcher.request(B, Add(2))
    assert kv.conflicts == 0
    for actor in (A, B):
        lease = await read_lease(kv, actor)
        assert lease is not None and lease.node is None, lease


@dst
async def test_a_message_interrupted_by_shutdown_fails_its_caller_and_skips_deactivate(
    dst: Simulation,
) -> None:
    errors: list[BaseException] = []
    # The caller's nursery outlives the dispatcher's.
    async with trio.open_nursery() as callers, local_dispatcher(dst) as local:
        await local.dispatcher.request(A, Add(1))

        async def slow() -> None:
            try:
                await local.dispatcher.request(A, Slow(5.0))
            except ActorStoppedError as error:
                errors.append(error)

        callers.start_soon(slow)
        await trio.sleep(1.0)
    assert len(errors) == 1 and "outcome is unknown" in str(errors[0])
    assert local.journal.of("deactivate") == []  # memory was mid-update: not persisted
    lease = await read_lease(local.kv, A)
    assert lease is not None and lease.node is None


@dst
async def test_requests_before_run_and_for_unknown_kinds_fail_clearly(dst: Simulation) -> None:
    async with local_dispatcher(dst) as local:
        with pytest.raises(UnknownActorKindError, match="no factory for actor kind 'agent'"):
            await local.dispatcher.request(ActorId("agent", "x"), Get())
        with pytest.raises(TypeError, match="actor_id must be an ActorId"):
            await local.dispatcher.request(("counter", "a"), Get())  # type: ignore[arg-type]
        with pytest.raises(RuntimeError, match="only be called once"):
            await local.dispatcher.run()


@dst
async def test_a_write_after_the_lease_was_taken_over_raises_lease_lost(dst: Simulation) -> None:
    async with local_dispatcher(dst) as local:
        await local.dispatcher.request(A, Add(1))
        # Another node takes the lease over behind our back (as after a long pause).
        from kelpie_agent.actors._lease import OWNER, Owner, actor_key, owner_value

        await local.kv.set(actor_key(OWNER, A), owner_value(Owner("n9", "s9", 5, "t9")))
        with pytest.raises(LeaseLostError, match="now held by 'n9'"):
            await local.dispatcher.deactivate(A)  # deactivate's fenced write fails
        assert local.dispatcher.active() == ()
        assert await local.kv.get(state_key(A)) is None  # nothing was written
