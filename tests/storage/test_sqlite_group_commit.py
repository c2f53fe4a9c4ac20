"""SqliteKV's group commit: commits that arrive together share one SQLite transaction (one
fsync), each is still validated on its own and in order, and each is durable when it returns;
a commit cancelled while it waits is withdrawn."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from kelpie_agent.storage import ConflictError, SqliteKV

COMMITS = 40


async def _concurrently(kv: SqliteKV, count: int) -> list[BaseException | None]:
    outcomes: list[BaseException | None] = [None] * count

    async def one(i: int) -> None:
        try:
            async with kv.transaction() as txn:
                await txn.set(b"k/%03d" % i, b"v%d" % i)
                counter = int(await txn.get(b"counter") or b"0")
                await txn.set(b"counter", b"%d" % (counter + 1))
        except ConflictError as error:
            outcomes[i] = error

    async with trio.open_nursery() as nursery:
        for i in range(count):
            nursery.start_soon(one, i)
    return outcomes


@pytest.mark.trio
async def test_concurrent_commits_share_fsyncs_and_stay_serializable(tmp_path: Path) -> None:
    kv = await SqliteKV.open(tmp_path / "kv.sqlite")
    outcomes = await _concurrently(kv, COMMITS)
    committed = [i for i, outcome in enumerate(outcomes) if outcome is None]
    # every transaction read the counter before any committed: the first in a batch wins,
    # the others conflict (validated against the earlier members of their own batch)
    assert committed and all(isinstance(o, ConflictError) for o in outcomes if o is not None)
    assert int(await kv.get(b"counter") or b"0") == len(committed)
    await kv.close()
    again = await SqliteKV.open(tmp_path / "kv.sqlite")
    stored = dict(await again.scan_prefix(b"k/"))
    assert sorted(stored) == [b"k/%03d" % i for i in committed]
    await again.close()


@pytest.mark.trio
async def test_independent_commits_are_batched(tmp_path: Path) -> None:
    kv = await SqliteKV.open(tmp_path / "kv.sqlite")

    async def write(i: int) -> None:
        await kv.set(b"key/%03d" % i, b"%d" % i)

    async with trio.open_nursery() as nursery:
        for i in range(COMMITS):
            nursery.start_soon(write, i)
    assert kv.batches < COMMITS / 2, kv.batches  # most waited for the one before them
    assert len(await kv.scan_prefix(b"key/")) == COMMITS
    before = kv.batches
    for i in range(3):  # one at a time: one transaction each
        await kv.set(b"alone/%d" % i, b"x")
    assert kv.batches == before + 3
    await kv.close()


@pytest.mark.trio
async def test_a_commit_cancelled_while_waiting_is_withdrawn(tmp_path: Path) -> None:
    kv = await SqliteKV.open(tmp_path / "kv.sqlite")
    scope = trio.CancelScope()

    async def cancelled() -> None:
        with scope:
            await kv.set(b"withdrawn", b"3")

    async with trio.open_nursery() as nursery:
        await kv._lock.acquire()  # the connection is busy: commits queue up
        nursery.start_soon(kv.set, b"kept", b"1")
        nursery.start_soon(cancelled)
        nursery.start_soon(kv.set, b"kept2", b"2")
        await trio.testing.wait_all_tasks_blocked()
        assert len(kv._queue) == 3
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert len(kv._queue) == 2
        kv._lock.release()
    assert kv.batches == 1  # the two that stayed, in one transaction
    assert await kv.get(b"withdrawn") is None
    assert await kv.get(b"kept") == b"1" and await kv.get(b"kept2") == b"2"
    await kv.close()
