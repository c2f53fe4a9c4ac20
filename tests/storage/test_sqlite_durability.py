"""SqliteKV keeps what it acknowledged, and notices when the file has been damaged."""

from __future__ import annotations

import os
import select
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio

from kelpie_agent.storage import ChecksumError, SqliteKV, StorageUnavailableError

REPO = Path(__file__).resolve().parents[2]


async def _write_sample(kv: SqliteKV) -> dict[bytes, bytes]:
    await kv.set(b"single", b"one")
    await kv.set(b"gone", b"soon")
    await kv.delete(b"gone")
    async with kv.transaction() as txn:
        for i in range(50):
            await txn.set(b"t/%02d" % i, b"value %d" % i)
    return {b"single": b"one"} | {b"t/%02d" % i: b"value %d" % i for i in range(50)}


@pytest.mark.trio
async def test_acknowledged_writes_survive_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "kv.sqlite"
    kv = await SqliteKV.open(path)
    expected = await _write_sample(kv)
    await kv.close()
    kv = await SqliteKV.open(path)
    assert dict(await kv.scan()) == expected
    await kv.close()


def test_acknowledged_writes_survive_a_killed_process(tmp_path: Path) -> None:
    """The writer is SIGKILLed right after its writes are acknowledged, without closing."""
    path = tmp_path / "kv.sqlite"
    child = textwrap.dedent(
        f"""
        import sys, trio
        sys.path.insert(0, {str(REPO)!r})
        from kelpie_agent.storage import SqliteKV
        from tests.storage.test_sqlite_durability import _write_sample

        async def main():
            kv = await SqliteKV.open({str(path)!r})
            await _write_sample(kv)
            print("acked", flush=True)
            await trio.sleep_forever()

        trio.run(main)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", child], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert proc.stdout is not None
        # A guard against hanging forever if the child breaks, not a timing assertion.
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "the writer never acknowledged its writes"
        assert proc.stdout.readline().strip() == "acked"
        assert Path(f"{path}-wal").exists(), "the acknowledged writes should still be in the WAL"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    async def reopen() -> dict[bytes, bytes]:
        kv = await SqliteKV.open(path)
        try:
            return dict(await kv.scan())
        finally:
            await kv.close()

    expected = {b"single": b"one"} | {b"t/%02d" % i: b"value %d" % i for i in range(50)}
    assert trio.run(reopen) == expected


@pytest.mark.trio
async def test_flipped_bit_in_the_file_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "kv.sqlite"
    sentinel = b"KELPIE-SENTINEL-" * 8
    kv = await SqliteKV.open(path)
    await kv.set(b"victim", sentinel)
    await kv.set(b"bystander", b"intact")
    await kv.close()
    assert not Path(f"{path}-wal").exists(), "close should have checkpointed the WAL"

    raw = bytearray(path.read_bytes())
    where = raw.find(sentinel)
    assert where >= 0, "the value should be stored verbatim (after its frame header)"
    while where >= 0:
        raw[where + 20] ^= 0x04  # silent bit rot, invisible to SQLite itself
        where = raw.find(sentinel, where + 1)
    path.write_bytes(bytes(raw))

    kv = await SqliteKV.open(path)
    with pytest.raises(ChecksumError):
        await kv.get(b"victim")
    with pytest.raises(ChecksumError):
        await kv.scan()
    assert await kv.get(b"bystander") == b"intact"
    await kv.close()


@pytest.mark.trio
async def test_a_file_that_is_not_a_database_is_reported_as_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "kv.sqlite"
    path.write_bytes(b"this is not an SQLite database\n" * 200)
    with pytest.raises(ChecksumError):
        await SqliteKV.open(path)


@pytest.mark.trio
async def test_the_file_has_one_owner(tmp_path: Path) -> None:
    path = tmp_path / "kv.sqlite"
    first = await SqliteKV.open(path)
    with pytest.raises(StorageUnavailableError):
        await SqliteKV.open(path)
    await first.close()
    second = await SqliteKV.open(path)
    await second.close()


@pytest.mark.trio
async def test_durability_settings(tmp_path: Path) -> None:
    path = tmp_path / "kv.sqlite"
    kv = await SqliteKV.open(path)
    assert await kv._run(lambda: kv._conn.execute("PRAGMA synchronous").fetchone()) == (2,)  # FULL
    await kv.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'kv'").fetchone()
        assert "WITHOUT ROWID" in sql
    conn.close()


@pytest.mark.trio
async def test_open_rejects_a_non_path(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="path must be"):
        await SqliteKV.open(b"kv.sqlite")  # type: ignore[arg-type]
    assert not os.listdir(tmp_path)
