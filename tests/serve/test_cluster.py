"""Several ``kelpie serve`` processes sharing one PostgreSQL database: an agent moves between
them without losing or repeating a message, both see the same state, and when one is killed
(SIGKILL) the other takes its agents over once their leases expire."""

from __future__ import annotations

import itertools
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import trio

from kelpie_agent.actors import ActorId, LeaseRecord, read_lease
from kelpie_agent.storage import PostgresKV

from .harness import BLOCKS, Server, postgres_url, spawn
from .load import Endpoints, Load, Sent, check_history, history

pytestmark = pytest.mark.postgres
LEASE = "3"  # seconds: a killed node's agents move within about that long
_schemas = itertools.count()


@attrs.frozen
class Database:
    url: str  # what kelpie serve is given: postgresql://...?host=/socket/dir&options=...
    dsn: str  # the same schema as a key=value DSN, for the test's own reads

    def leases(self, agents: list[str]) -> list[LeaseRecord | None]:
        async def read() -> list[LeaseRecord | None]:
            kv = await PostgresKV.open(self.dsn)
            try:
                return [await read_lease(kv, ActorId("agent", agent)) for agent in agents]
            finally:
                await kv.close()

        return trio.run(read)


@pytest.fixture
def database(postgres_dsn: str) -> Database:
    import psycopg
    from psycopg.conninfo import make_conninfo

    schema = f"kelpie_serve_{os.getpid()}_{next(_schemas)}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    dsn = make_conninfo(postgres_dsn, options=f"-c search_path={schema}")
    return Database(postgres_url(postgres_dsn, schema), dsn)


@pytest.fixture
def nodes(tmp_path: Path, database: Database) -> Iterator[dict[str, Server]]:
    """Two servers, A and B, on the database (started together)."""
    args = ("--db", database.url, "--lease-duration", LEASE)
    started = {name: spawn(tmp_path / name, *args) for name in ("A", "B")}
    try:
        for server in started.values():
            server.ready()
        yield started
    finally:
        for server in started.values():
            server.kill()


def _send(server: Server, agent: str, text: str) -> Sent:
    reply = server.client().agents.messages.create(
        agent, messages=[{"role": "user", "content": text, "otid": f"otid-{text}"}]
    )
    assert reply.messages[-1].content == f'I hear you. You said: "{text}"'  # type: ignore[union-attr]
    return Sent("seq", 0, agent, text, f"otid-{text}", tuple(m.id for m in reply.messages), "", 1)


def _run_until(load: Load, acknowledged: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while load.count() < acknowledged and not load.failures:
        assert time.monotonic() < deadline, f"only {load.count()} acknowledged"
        time.sleep(0.05)
    assert not load.failures, load.failures


def _served_messages(server: Server) -> int:
    return sum(1 for m in server.access_lines() if m[1] == "POST" and m[2].endswith("/messages"))


def test_two_nodes_share_agents_without_losing_or_repeating_a_message(
    nodes: dict[str, Server], database: Database
) -> None:
    a, b = nodes["A"], nodes["B"]
    host = socket.gethostname()
    assert {a.node, b.node} == {
        f"{host}:{a.url.rsplit(':', 1)[1]}",
        f"{host}:{b.url.rsplit(':', 1)[1]}",
    }
    agent = a.client().agents.create(name="shared", memory_blocks=BLOCKS).id
    other = b.client().agents.create(name="other").id
    # One at a time, alternating: the agent moves to whichever node is asked.
    sequential = [_send((a, b)[i % 2], agent, f"seq-{i}") for i in range(8)]
    [lease] = database.leases([agent])
    assert lease is not None and lease.node == b.node and lease.epoch >= 8  # 7 moves at least
    # Then concurrently: 2 clients per agent, each alternating between the nodes.
    endpoints = Endpoints()
    endpoints.up("A", a.url)
    endpoints.up("B", b.url)
    load = Load(endpoints, [agent, other], clients_per_agent=2)
    load.start()
    try:
        _run_until(load, 40)
    finally:
        endpoints.close()
        load.stop()
    acked = sequential + load.acked
    assert {s.node for s in load.acked} == {"A", "B"}
    for name in (agent, other):
        count = check_history(a.client(), name, acked, complete=True)
        assert count == 2 * len([s for s in acked if s.agent_id == name])  # input + reply
    # Both nodes see the same state.
    for name in (agent, other):
        seen = [[m.to_dict() for m in history(node.client(), name)] for node in (a, b)]
        assert seen[0] == seen[1]
        assert (
            a.client().agents.retrieve(name).to_dict() == b.client().agents.retrieve(name).to_dict()
        )
    assert {x.id for x in a.client().agents.list()} == {agent, other}
    assert _served_messages(a) > 0 and _served_messages(b) > 0
    for server in (a, b):
        assert server.stop() == 0, server.describe()
        assert "ERROR" not in server.stderr(), server.stderr()


def test_a_killed_nodes_agents_move_to_the_other_once_their_leases_expire(
    nodes: dict[str, Server], database: Database
) -> None:
    a, b = nodes["A"], nodes["B"]
    agents = [a.client().agents.create(name=f"k{i}").id for i in range(3)]
    endpoints = Endpoints()
    endpoints.up("A", a.url)  # B is up, but idle: every agent is on A
    load = Load(endpoints, agents, clients_per_agent=2)
    load.start()
    try:
        _run_until(load, 12)
        a.kill()  # mid-load: requests in flight are cut off, the leases stay in the database
        endpoints.down("A")
        held = database.leases(agents)
        assert [lease.node if lease else None for lease in held] == [a.node] * 3
        assert all(lease and lease.expires is not None for lease in held)
        killed_at = load.count()
        endpoints.up("B", b.url)  # the clients retry what was cut off, through B
        _run_until(load, killed_at + 24)
    finally:
        endpoints.close()
        load.stop()
    # At most one reply per client can have come from A after the count was read.
    assert sum(1 for s in load.acked if s.node == "B") >= 24 - 6
    assert load.interrupted > 0
    for agent in agents:
        check_history(b.client(), agent, load.acked, complete=True)
    taken = database.leases(agents)
    assert [lease.node if lease else None for lease in taken] == [b.node] * 3
    assert all(new and old and new.epoch > old.epoch for new, old in zip(taken, held, strict=True))
    assert b.stop() == 0, b.describe()
    assert "ERROR" not in b.stderr(), b.stderr()
    released = database.leases(agents)
    assert [lease.node if lease else "missing" for lease in released] == [None] * 3
