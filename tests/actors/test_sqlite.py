"""The production path: dispatchers under plain trio, real time, system ports and a real
SQLite file (no simulator)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kelpie_agent.actors import ActorId, Dispatcher, DispatcherOptions, read_lease
from kelpie_agent.ports import system_ports
from kelpie_agent.storage import SqliteKV

from .actors import Add, Get, Inc, Journal, Ledger, pack, state_key, unpack
from .actors import Counter as CounterActor

FAST = DispatcherOptions(
    idle_timeout=0.3,
    lease_duration=2.0,
    renew_every=0.2,
    lease_margin=0.5,
    acquire_timeout=5.0,
    poll_interval=0.05,
    shutdown_timeout=2.0,
)
C = ActorId("counter", "c")
L = ActorId("ledger", "l")


def _dispatcher(kv: SqliteKV, node_id: str, journal: Journal) -> Dispatcher:
    return Dispatcher(
        kv,
        system_ports(),
        node_id=node_id,
        factories={
            "counter": lambda aid: CounterActor(aid, journal),
            "ledger": lambda aid: Ledger(aid, journal),
        },
        options=FAST,
    )


@pytest.mark.trio
async def test_state_survives_idle_deactivation_restart_and_reopening_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "actors.db"
    journal = Journal()
    kv = await SqliteKV.open(path)
    try:
        await kv.set(state_key(C), pack({"count": 10}))
        async with trio.open_nursery() as nursery:
            dispatcher = _dispatcher(kv, "local", journal)
            await nursery.start(dispatcher.run)
            assert await dispatcher.request(C, Add(1)) == 11
            assert await dispatcher.request(L, Inc("r1")) == 1
            with trio.fail_after(3):
                while dispatcher.active():
                    await trio.sleep(0.05)  # idle deactivation after 0.3 s
            assert unpack(await kv.get(state_key(C))) == {"count": 11}
            assert await dispatcher.request(C, Add(1)) == 12
            nursery.cancel_scope.cancel()  # shutdown: deactivates and releases
        lease = await read_lease(kv, C)
        assert lease is not None and lease.node is None and lease.epoch == 2
    finally:
        await kv.close()

    kv = await SqliteKV.open(path)  # a new process, the same node id
    try:
        async with trio.open_nursery() as nursery:
            dispatcher = _dispatcher(kv, "local", journal)
            await nursery.start(dispatcher.run)
            assert await dispatcher.request(C, Get()) == 12
            assert await dispatcher.request(L, Inc("r2")) == 2
            nursery.cancel_scope.cancel()
    finally:
        await kv.close()


@pytest.mark.trio
async def test_two_dispatchers_on_one_file_hand_an_actor_over(tmp_path: Path) -> None:
    journal = Journal()
    kv = await SqliteKV.open(tmp_path / "actors.db")
    try:
        async with trio.open_nursery() as nursery:
            a, b = _dispatcher(kv, "a", journal), _dispatcher(kv, "b", journal)
            await nursery.start(a.run)
            await nursery.start(b.run)
            assert await a.request(C, Add(2)) == 2
            with trio.fail_after(FAST.acquire_timeout):
                assert await b.request(C, Add(3)) == 5  # a persisted on handoff
            assert a.active() == () and b.active() == (C,)
            assert [s.node for s in journal.of("activate")] == ["a", "b"]
            lease = await read_lease(kv, C)
            assert lease is not None and lease.node == "b" and lease.expires is not None
            nursery.cancel_scope.cancel()
    finally:
        await kv.close()
