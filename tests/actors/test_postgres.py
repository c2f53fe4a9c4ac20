"""The multi-process production setup: dispatchers of two "servers" (two PostgresKV
connection pools) sharing one PostgreSQL database, under plain trio and real time."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator

import pytest
import trio

from kelpie_agent.actors import ActorId, Dispatcher, read_lease
from kelpie_agent.ports import system_ports
from kelpie_agent.storage import PostgresKV

from .actors import Inc, Journal, Ledger
from .test_sqlite import FAST

pytestmark = pytest.mark.postgres
_schemas = itertools.count()
L = ActorId("ledger", "l")


async def _schema_dsn(dsn: str) -> str:
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"kelpie_actors_{os.getpid()}_{next(_schemas)}"

    def create() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {name}")

    await trio.to_thread.run_sync(create)
    return make_conninfo(dsn, options=f"-c search_path={name}")


@pytest.fixture
async def two_servers(postgres_dsn: str) -> AsyncIterator[tuple[PostgresKV, PostgresKV]]:
    dsn = await _schema_dsn(postgres_dsn)
    first, second = await PostgresKV.open(dsn), await PostgresKV.open(dsn)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


@pytest.mark.trio
async def test_two_servers_share_an_actor_without_losing_increments(
    two_servers: tuple[PostgresKV, PostgresKV],
) -> None:
    journal = Journal()
    servers = [
        Dispatcher(
            kv,
            system_ports(),
            node_id=name,
            factories={"ledger": lambda aid: Ledger(aid, journal)},
            options=FAST,
        )
        for name, kv in zip(("a", "b"), two_servers, strict=True)
    ]
    acked: list[int] = []

    async def client(server: Dispatcher, prefix: str) -> None:
        for i in range(8):
            acked.append(await server.request(L, Inc(f"{prefix}{i}")))

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for server in servers:
                await nursery.start(server.run)
            async with trio.open_nursery() as clients:
                clients.start_soon(client, servers[0], "a")
                clients.start_soon(client, servers[1], "b")
            nursery.cancel_scope.cancel()
    # Linearizable: the counts handed out are exactly 1..16.
    assert sorted(acked) == list(range(1, 17))
    assert {s.node for s in journal.of("activate")} == {"a", "b"}
    lease = await read_lease(two_servers[0], L)
    assert lease is not None and lease.node is None  # both released on shutdown
