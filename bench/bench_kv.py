"""Operations per second of the storage port: SimKV (plain ``trio.run``) vs SqliteKV (temp file).

Run with ``.venv/bin/python bench/bench_kv.py``. Each workload runs on a store pre-filled with
1,000 keys: single ``set`` (SqliteKV fsyncs each: ``synchronous=FULL``), single ``get``, a
``scan`` of 100 keys, and a transaction of 5 gets and 5 sets. SqliteKV pays for a worker thread
per call and for SQLite itself; SimKV pays only for a trio checkpoint and the CRC.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from kelpie_agent.storage import KV, SqliteKV
from kelpie_dst.shims import SimKV

KEYS = 1000
VALUE = bytes(range(256)) * 2  # 512 bytes


def key(i: int) -> bytes:
    return b"bench/%06d" % (i % KEYS)


async def fill(kv: KV) -> None:
    async with kv.transaction() as txn:
        for i in range(KEYS):
            await txn.set(key(i), VALUE)


async def op_set(kv: KV, i: int) -> None:
    await kv.set(key(i), VALUE)


async def op_get(kv: KV, i: int) -> None:
    await kv.get(key(i * 7))


async def op_scan(kv: KV, i: int) -> None:
    rows = await kv.scan(key(i * 13 % (KEYS - 100)), limit=100)
    assert len(rows) == 100


async def op_txn(kv: KV, i: int) -> None:
    async with kv.transaction() as txn:
        for j in range(5):
            await txn.get(key(i * 10 + j))
        for j in range(5):
            await txn.set(key(i * 10 + 5 + j), VALUE)


WORKLOADS: list[tuple[str, Callable[[KV, int], Awaitable[None]]]] = [
    ("set", op_set),
    ("get", op_get),
    ("scan 100 keys", op_scan),
    ("10-op transaction", op_txn),
]


async def measure(kv: KV, op: Callable[[KV, int], Awaitable[None]], seconds: float) -> float:
    """Operations per second, running ``op`` for about ``seconds``."""
    done, started = 0, time.perf_counter()
    while True:
        for _ in range(20):
            await op(kv, done)
            done += 1
        elapsed = time.perf_counter() - started
        if elapsed >= seconds:
            return done / elapsed


async def run_backend(make: Callable[[], Awaitable[KV]], seconds: float) -> list[float]:
    kv = await make()
    try:
        await fill(kv)
        return [await measure(kv, op, seconds) for _, op in WORKLOADS]
    finally:
        await kv.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per workload")
    args = parser.parse_args()

    async def sim() -> KV:
        await trio.lowlevel.checkpoint()
        return SimKV()

    with tempfile.TemporaryDirectory() as tmp:

        async def sqlite() -> KV:
            return await SqliteKV.open(Path(tmp) / "bench.sqlite")

        sim_rates = trio.run(run_backend, sim, args.seconds)
        sqlite_rates = trio.run(run_backend, sqlite, args.seconds)

    print(f"{'operation':<20} {'SimKV ops/s':>12} {'SqliteKV ops/s':>15} {'Sim/SQLite':>11}")
    for (name, _), s, q in zip(WORKLOADS, sim_rates, sqlite_rates, strict=True):
        print(f"{name:<20} {s:>12,.0f} {q:>15,.0f} {s / q:>10.1f}x")


if __name__ == "__main__":
    main()
