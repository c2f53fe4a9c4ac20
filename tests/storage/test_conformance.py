"""The storage conformance suite against every backend, plus backend-specific behaviour."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from kelpie_agent.storage import KV, ConflictError, PostgresKV, SqliteKV, StorageUnavailableError
from kelpie_agent.storage.testing import CHECKS, run_check
from kelpie_dst.shims import SimKV, SimKVStore

NAMES = [*CHECKS, "checksums"]


async def corrupt_sim(kv: KV, key: bytes) -> None:
    assert isinstance(kv, SimKV)
    kv.store.corrupt(key)


async def corrupt_sqlite(kv: KV, key: bytes) -> None:
    # SqliteKV holds the file exclusively, so damage it through its own connection.
    assert isinstance(kv, SqliteKV)

    def flip() -> None:
        conn: sqlite3.Connection = kv._conn
        (framed,) = conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        damaged = framed[:-1] + bytes([framed[-1] ^ 0x01])
        conn.execute("UPDATE kv SET value = ? WHERE key = ?", (damaged, key))

    await kv._run(flip)


def corrupt_postgres(dsn_of: Callable[[], str]) -> Callable[[KV, bytes], Awaitable[None]]:
    async def corrupt(kv: KV, key: bytes) -> None:
        import psycopg

        def flip() -> None:
            with psycopg.connect(dsn_of(), autocommit=True) as conn:
                conn.execute(
                    "UPDATE kv SET value = set_byte(value, length(value) - 1,"
                    " get_byte(value, length(value) - 1) # 1) WHERE key = %s",
                    (key,),
                )

        await trio.to_thread.run_sync(flip)

    return corrupt


@pytest.mark.trio
@pytest.mark.parametrize("name", NAMES)
async def test_simkv(name: str) -> None:
    async def make() -> KV:
        await trio.lowlevel.checkpoint()
        return SimKV()

    await run_check(name, make, corrupt=corrupt_sim)


@pytest.mark.trio
@pytest.mark.parametrize("name", NAMES)
async def test_sqlite(name: str, tmp_path: Path) -> None:
    counter = itertools.count()

    async def make() -> KV:
        return await SqliteKV.open(tmp_path / f"kv{next(counter)}.sqlite")

    await run_check(name, make, corrupt=corrupt_sqlite)


@pytest.mark.postgres
@pytest.mark.trio
@pytest.mark.parametrize("name", NAMES)
async def test_postgres(name: str, make_postgres_kv: Callable[[], Awaitable[PostgresKV]]) -> None:
    last_dsn: list[str] = []

    async def make() -> KV:
        kv = await make_postgres_kv()
        last_dsn.append(kv._dsn)
        return kv

    await run_check(name, make, corrupt=corrupt_postgres(lambda: last_dsn[-1]))


# -- the optimistic backends (SimKV, SqliteKV) are exact; pin that down ------------------------


@pytest.fixture(params=["sim", "sqlite"])
def make_occ_kv(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Awaitable[KV]]:
    async def make() -> KV:
        if request.param == "sim":
            await trio.lowlevel.checkpoint()
            return SimKV()
        return await SqliteKV.open(tmp_path / "occ.sqlite")

    return make


@pytest.mark.trio
async def test_occ_read_of_changed_key_conflicts_at_once(
    make_occ_kv: Callable[[], Awaitable[KV]],
) -> None:
    kv = await make_occ_kv()
    await kv.set(b"a", b"0")
    await kv.set(b"b", b"0")
    with pytest.raises(ConflictError):
        async with kv.transaction() as t1:
            await t1.get(b"a")
            await kv.set(b"b", b"1")
            with pytest.raises(ConflictError):
                await t1.get(b"b")
            # Once conflicted, the transaction stays conflicted, even if the caller carries on.
            with pytest.raises(ConflictError):
                await t1.get(b"zzz")
    await kv.close()


@pytest.mark.trio
async def test_occ_swallowed_conflict_still_fails_commit(
    make_occ_kv: Callable[[], Awaitable[KV]],
) -> None:
    kv = await make_occ_kv()
    with pytest.raises(ConflictError):
        async with kv.transaction() as t1:
            await t1.set(b"mine", b"1")
            await kv.set(b"k", b"1")
            with pytest.raises(ConflictError):
                await t1.scan()
    assert await kv.get(b"mine") is None
    await kv.close()


@pytest.mark.trio
async def test_occ_only_observed_part_of_limited_scan_conflicts(
    make_occ_kv: Callable[[], Awaitable[KV]],
) -> None:
    kv = await make_occ_kv()
    for key in (b"q/a", b"q/c", b"q/e"):
        await kv.set(key, b"0")
    async with kv.transaction() as t1:  # saw q/a and q/c: writes after q/c do not matter
        assert [k for k, _ in await t1.scan_prefix(b"q/", limit=2)] == [b"q/a", b"q/c"]
        await kv.set(b"q/d", b"1")
        await kv.delete(b"q/e")
        await t1.set(b"out", b"1")
    assert await kv.get(b"out") == b"1"
    with pytest.raises(ConflictError):
        async with kv.transaction() as t1:  # but a write between q/a and q/c does
            await t1.scan_prefix(b"q/", limit=2)
            await kv.set(b"q/b", b"1")
            await t1.set(b"out", b"2")
    with pytest.raises(ConflictError):
        async with kv.transaction() as t1:  # reverse: saw q/d and q/c
            assert [k for k, _ in await t1.scan_prefix(b"q/", limit=2, reverse=True)] == [
                b"q/d",
                b"q/c",
            ]
            await kv.set(b"q/zz", b"1")
            await t1.set(b"out", b"3")
    assert await kv.get(b"out") == b"1"
    await kv.close()


@pytest.mark.trio
async def test_occ_read_only_transaction_never_conflicts_at_commit(
    make_occ_kv: Callable[[], Awaitable[KV]],
) -> None:
    kv = await make_occ_kv()
    async with kv.transaction() as t1:
        assert await t1.scan() == []
        await kv.set(b"k", b"1")
    await kv.close()


# -- SimKV specifics -----------------------------------------------------------------------------


@pytest.mark.trio
async def test_simkv_handles_sharing_a_store_share_data_and_conflicts() -> None:
    store = SimKVStore()
    node_a, node_b, elsewhere = SimKV(store), SimKV(store), SimKV()
    await node_a.set(b"k", b"a")
    assert await node_b.get(b"k") == b"a"
    assert await elsewhere.get(b"k") is None
    with pytest.raises(ConflictError):
        async with node_a.transaction() as ta:
            await ta.get(b"k")
            async with node_b.transaction() as tb:
                await tb.set(b"k", b"b")
            await ta.set(b"k", b"a2")
    await node_a.close()  # a crashed node's handle goes away; the store (the disk) remains
    assert await SimKV(store).get(b"k") == b"b"
    assert len(store) == 1
    with pytest.raises(RuntimeError):
        await node_a.get(b"k")


@pytest.mark.trio
async def test_simkv_every_storage_access_passes_the_fault_hooks() -> None:
    seen: list[tuple[str, bytes | None]] = []

    class Recording(SimKV):
        async def _before_op(self, op: str, key: bytes | None) -> None:
            seen.append((op, key))
            await super()._before_op(op, key)

        async def _before_commit(self, writes: object) -> None:
            seen.append(("commit", None))
            await super()._before_commit(writes)  # type: ignore[arg-type]

    kv = Recording()
    await kv.set(b"a", b"1")
    await kv.get(b"a")
    await kv.delete(b"a")
    await kv.scan_prefix(b"x")
    async with kv.transaction() as txn:
        await txn.get(b"b")
        await txn.set(b"b", b"1")  # buffered: no storage access
        await txn.get(b"b")  # served from the buffer
        await txn.scan()
    assert seen == [
        ("set", b"a"),
        ("get", b"a"),
        ("delete", b"a"),
        ("scan", None),
        ("get", b"b"),
        ("scan", None),
        ("commit", None),
    ]


def test_simkv_corrupt_validates_its_arguments() -> None:
    store = SimKVStore()
    trio.run(SimKV(store).set, b"k", b"v")
    with pytest.raises(KeyError):
        store.corrupt(b"missing")
    with pytest.raises(ValueError, match="outside"):
        store.corrupt(b"k", bit=6 * 8)
    store.corrupt(b"k", bit=0)  # the format byte: still detected


def test_simkv_runs_under_plain_trio_run_without_threads() -> None:
    async def main() -> list[tuple[bytes, bytes]]:
        kv = SimKV()
        async with kv.transaction() as txn:
            await txn.set(b"k", b"v")
        return await kv.scan()

    assert trio.run(main) == [(b"k", b"v")]


# -- PostgresKV specifics ------------------------------------------------------------------------


@pytest.mark.trio
async def test_postgres_unreachable_server_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(StorageUnavailableError):
        await PostgresKV.open(f"host={tmp_path} port=5432 user=nobody dbname=none")


@pytest.mark.postgres
@pytest.mark.trio
async def test_postgres_handles_sharing_a_database_stay_serializable(
    make_postgres_kv: Callable[[], Awaitable[PostgresKV]],
) -> None:
    """Like several server processes: separate handles (pools) on one database, racing."""
    first = await make_postgres_kv()
    dsn = first._dsn
    await first.close()
    handles: list[PostgresKV] = []

    async def open_one() -> None:  # concurrent opens race to create the table
        handles.append(await PostgresKV.open(dsn, max_connections=2))

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(open_one)

    async def worker(kv: PostgresKV, me: int) -> None:
        for i in range(4):
            while True:
                try:
                    async with kv.transaction() as txn:
                        owner = await txn.get(b"lease")
                        count = int(await txn.get(b"count") or b"0")
                        await txn.set(b"count", b"%d" % (count + 1))
                        await txn.set(b"lease", b"%d" % me if owner is None else owner)
                        await txn.set(b"log/%d/%d" % (me, i), b"")
                    break
                except ConflictError:
                    await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        for me, kv in enumerate(handles):
            nursery.start_soon(worker, kv, me)
            nursery.start_soon(worker, kv, me + 10)
    kv = handles[0]
    assert await kv.get(b"count") == b"24"
    assert len(await kv.scan_prefix(b"log/")) == 24
    assert await kv.get(b"lease") in {b"0", b"1", b"2", b"10", b"11", b"12"}
    for kv in handles:
        await kv.close()
