"""A conformance suite for implementations of the storage port.

In the spirit of ``trio.testing.check_two_way_stream``: give it a way to make a fresh, empty
store and it checks everything the port promises (docs/storage.md)::

    await check_kv_conformance(lambda: SqliteKV.open(tmp_path / f"{next(n)}.db"))

Each check gets its own store from ``make_kv`` and closes it afterwards. ``CHECKS`` names the
checks one by one so a test suite can report them separately (see :func:`run_check`); the
checksum check needs a backend-specific ``corrupt(kv, key)`` that damages the stored value.

Conflict checks only demand conflicts that serializability itself requires (lost updates,
write skew on keys and on scanned ranges, concurrent writes of one key); a backend may raise
``ConflictError`` more often than that, except where a check says it must not.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from ._errors import ChecksumError, ConflictError
from ._keys import MAX_KEY_SIZE, prefix_end
from ._port import KV, KVOps

__all__ = ["CHECKS", "check_checksums", "check_kv_conformance", "run_check"]

MakeKV = Callable[[], Awaitable[KV]]
Corrupt = Callable[[KV, bytes], Awaitable[None]]
Check = Callable[[KV], Awaitable[None]]

# Keys chosen to trip up ordering: empty, NUL and 0xff bytes, prefixes of each other.
KEYS = [
    b"",
    b"\x00",
    b"\x00\x00",
    b"\x00\xff",
    b"\x01",
    b"a",
    b"a\x00",
    b"a\xff",
    b"a\xff\x00",
    b"a\xff\xff",
    b"ab",
    b"b",
    b"\xff",
    b"\xff\x00",
    b"\xff\xff",
    b"\xff\xff\xff",
]
BOUNDS = [b"", b"\x00", b"a", b"a\xff", b"ab", b"b", b"\xff", b"\xff\xff", b"zz"]
PREFIXES = [b"", b"\x00", b"a", b"a\xff", b"ab", b"\xff", b"\xff\xff", b"zz"]


class _Boom(Exception):
    pass


def _fail(message: str) -> None:
    raise AssertionError(message)


def _eq(actual: object, expected: object, what: str) -> None:
    if actual != expected:
        _fail(f"{what}: expected {expected!r}, got {actual!r}")


async def _raises(
    exc_type: type[BaseException],
    what: str,
    fn: Callable[..., Awaitable[Any]],
    *args: Any,
    **kwargs: Any,
) -> None:
    try:
        await fn(*args, **kwargs)
    except exc_type:
        return
    _fail(f"{what}: expected {exc_type.__name__}")


def model_scan(
    model: Mapping[bytes, bytes],
    start: bytes = b"",
    end: bytes | None = None,
    limit: int | None = None,
    reverse: bool = False,
) -> list[tuple[bytes, bytes]]:
    """What ``scan`` must return over a dict."""
    keys = sorted((k for k in model if start <= k and (end is None or k < end)), reverse=reverse)
    return [(k, model[k]) for k in keys[:limit]]


async def _fill(kv: KVOps, model: Mapping[bytes, bytes]) -> None:
    for key, value in model.items():
        await kv.set(key, value)


# -- single operations ---------------------------------------------------------------------------


async def check_basic(kv: KV) -> None:
    _eq(await kv.get(b"missing"), None, "get of a missing key")
    await kv.set(b"k", b"v1")
    _eq(await kv.get(b"k"), b"v1", "get after set")
    await kv.set(b"k", b"v2")
    _eq(await kv.get(b"k"), b"v2", "get after overwrite")
    await kv.delete(b"k")
    _eq(await kv.get(b"k"), None, "get after delete")
    await kv.delete(b"k")  # deleting a missing key is fine
    await kv.set(b"empty", b"")
    _eq(await kv.get(b"empty"), b"", "empty value (must not read back as missing)")
    every_byte = bytes(range(256)) * 3
    await kv.set(b"bytes", every_byte)
    _eq(await kv.get(b"bytes"), every_byte, "value holding every byte value")
    big = bytes(range(256)) * 1024
    await kv.set(b"big", big)
    _eq(await kv.get(b"big"), big, "256 KiB value")
    longest = b"\xff" * MAX_KEY_SIZE
    await kv.set(longest, b"long")
    _eq(await kv.get(longest), b"long", "key of MAX_KEY_SIZE bytes")
    for key in KEYS:
        await kv.set(key, b"v:" + key)
    for key in KEYS:
        _eq(await kv.get(key), b"v:" + key, f"binary key {key!r}")


async def check_scan(kv: KV) -> None:
    model = {key: b"v:" + key for key in KEYS}
    await _fill(kv, model)
    _eq(await kv.scan(), model_scan(model), "scan() of everything, in bytewise key order")
    for start in BOUNDS:
        for end in [*BOUNDS, None]:
            for limit in (None, 0, 1, 3):
                for reverse in (False, True):
                    _eq(
                        await kv.scan(start, end, limit=limit, reverse=reverse),
                        model_scan(model, start, end, limit, reverse),
                        f"scan({start!r}, {end!r}, limit={limit}, reverse={reverse})",
                    )


async def check_scan_prefix(kv: KV) -> None:
    model = {key: b"v:" + key for key in KEYS}
    await _fill(kv, model)
    for prefix in PREFIXES:
        for limit in (None, 1, 2):
            for reverse in (False, True):
                _eq(
                    await kv.scan_prefix(prefix, limit=limit, reverse=reverse),
                    model_scan(model, prefix, prefix_end(prefix), limit, reverse),
                    f"scan_prefix({prefix!r}, limit={limit}, reverse={reverse})",
                )
    _eq(
        [k for k, _ in await kv.scan_prefix(b"a\xff")],
        [b"a\xff", b"a\xff\x00", b"a\xff\xff"],
        "prefix ending in 0xff",
    )


async def check_bad_arguments(kv: KV) -> None:
    too_long = b"k" * (MAX_KEY_SIZE + 1)
    async with kv.transaction() as txn:
        for ops in (kv, txn):
            for bad in ("text", 1, None, bytearray(b"k"), memoryview(b"k")):
                await _raises(TypeError, f"get({bad!r})", ops.get, bad)
                await _raises(TypeError, f"set({bad!r}, b'')", ops.set, bad, b"")
                await _raises(TypeError, f"set(b'k', {bad!r})", ops.set, b"k", bad)
                await _raises(TypeError, f"delete({bad!r})", ops.delete, bad)
                await _raises(TypeError, f"scan({bad!r})", ops.scan, bad)
                await _raises(TypeError, f"scan_prefix({bad!r})", ops.scan_prefix, bad)
            await _raises(TypeError, "scan(end='z')", ops.scan, b"", "z")
            await _raises(ValueError, "scan(limit=-1)", ops.scan, limit=-1)
            await _raises(TypeError, "scan(limit=1.5)", ops.scan, limit=1.5)
            await _raises(TypeError, "scan(limit=True)", ops.scan, limit=True)
            await _raises(TypeError, "scan(reverse=1)", ops.scan, reverse=1)
            await _raises(ValueError, "an oversized key", ops.set, too_long, b"")
            await _raises(ValueError, "an oversized key", ops.get, too_long)
    _eq(await kv.scan(), [], "store after rejected calls")


# -- transactions --------------------------------------------------------------------------------


async def check_commit(kv: KV) -> None:
    await kv.set(b"a", b"old")
    await kv.set(b"b", b"old")
    async with kv.transaction() as txn:
        await txn.set(b"a", b"new")
        await txn.delete(b"b")
        await txn.set(b"c", b"new")
        _eq(await kv.get(b"a"), b"old", "a buffered write is invisible outside before commit")
        _eq(await kv.get(b"c"), None, "a buffered insert is invisible outside before commit")
    _eq(await kv.scan(), [(b"a", b"new"), (b"c", b"new")], "store after commit")
    async with kv.transaction() as finished:
        pass
    await _raises(RuntimeError, "using a finished transaction", finished.get, b"a")
    await _raises(RuntimeError, "using a finished transaction", finished.set, b"a", b"")


async def check_rollback_on_exception(kv: KV) -> None:
    await kv.set(b"a", b"old")

    async def failing() -> None:
        async with kv.transaction() as txn:
            await txn.set(b"a", b"new")
            await txn.set(b"b", b"new")
            await txn.delete(b"a")
            raise _Boom

    await _raises(_Boom, "the exception raised inside the transaction must propagate", failing)
    _eq(await kv.scan(), [(b"a", b"old")], "store after rollback")


async def check_read_your_writes(kv: KV) -> None:
    await _fill(kv, {b"a": b"1", b"b": b"1"})
    async with kv.transaction() as txn:
        _eq(await txn.get(b"a"), b"1", "committed value inside a transaction")
        await txn.set(b"a", b"2")
        _eq(await txn.get(b"a"), b"2", "own write")
        await txn.set(b"a", b"3")
        _eq(await txn.get(b"a"), b"3", "own overwrite")
        await txn.delete(b"b")
        _eq(await txn.get(b"b"), None, "own delete")
        await txn.set(b"b", b"")
        _eq(await txn.get(b"b"), b"", "own empty value after own delete")
        await txn.set(b"n", b"x")
        await txn.delete(b"n")
        _eq(await txn.get(b"n"), None, "own insert then delete")
    _eq(await kv.scan(), [(b"a", b"3"), (b"b", b"")], "store after commit")


async def check_scan_in_transaction(kv: KV) -> None:
    committed = {b"p/%d" % i: b"c%d" % i for i in range(6)} | {b"q": b"c", b"p\xff": b"c"}
    await _fill(kv, committed)
    view = dict(committed)
    async with kv.transaction() as txn:
        for key in (b"p/1", b"p/2", b"p/4", b"q"):
            await txn.delete(key)
            view.pop(key)
        for key, value in ((b"p/3", b"t3"), (b"p/25", b"t"), (b"p/9", b"t"), (b"p", b"t")):
            await txn.set(key, value)
            view[key] = value
        for start, end in ((b"", None), (b"p/", b"p0"), (b"p/2", b"p/5"), (b"p/9", b"q\x00")):
            for limit in (None, 1, 2, 3):
                for reverse in (False, True):
                    _eq(
                        await txn.scan(start, end, limit=limit, reverse=reverse),
                        model_scan(view, start, end, limit, reverse),
                        f"txn.scan({start!r}, {end!r}, limit={limit}, reverse={reverse})",
                    )
        for prefix in (b"p", b"p/", b"p/2", b"q", b"p\xff"):
            for limit in (None, 2):
                _eq(
                    await txn.scan_prefix(prefix, limit=limit, reverse=True),
                    model_scan(view, prefix, prefix_end(prefix), limit, True),
                    f"txn.scan_prefix({prefix!r}, limit={limit}, reverse=True)",
                )
    _eq(await kv.scan(), model_scan(view), "store after commit")


async def _expect_conflict(what: str, body: Callable[[], Awaitable[None]]) -> None:
    try:
        await body()
    except ConflictError as exc:
        if getattr(exc, "retryable", False) is not True:
            _fail("ConflictError must have retryable = True")
        return
    _fail(f"{what}: expected ConflictError")


async def check_write_write_conflict(kv: KV) -> None:
    await kv.set(b"existing", b"0")
    for key in (b"existing", b"fresh"):

        async def race(key: bytes = key) -> None:
            async with kv.transaction() as t1:
                await t1.set(b"side-effect", b"t1")
                async with kv.transaction() as t2:
                    await t2.set(key, b"t2")
                await t1.set(key, b"t1")

        await _expect_conflict(f"two transactions writing {key!r}", race)
        _eq(await kv.get(key), b"t2", "the first committer's value")
        _eq(await kv.get(b"side-effect"), None, "a conflicted transaction applies nothing")


async def check_lost_update(kv: KV) -> None:
    await kv.set(b"counter", b"0")

    async def race() -> None:
        async with kv.transaction() as t1:
            seen = await t1.get(b"counter")
            async with kv.transaction() as t2:
                value = await t2.get(b"counter")
                await t2.set(b"counter", b"%d" % (int(value or b"0") + 1))
            await t1.set(b"counter", b"%d" % (int(seen or b"0") + 1))

    await _expect_conflict("read-modify-write racing another", race)
    _eq(await kv.get(b"counter"), b"1", "counter after one lost race")
    async with kv.transaction() as retry:  # the retry, alone, succeeds
        value = await retry.get(b"counter")
        await retry.set(b"counter", b"%d" % (int(value or b"0") + 1))
    _eq(await kv.get(b"counter"), b"2", "counter after retry")


async def check_write_skew(kv: KV) -> None:
    await _fill(kv, {b"a": b"0", b"b": b"0"})

    async def race() -> None:
        async with kv.transaction() as t1:
            await t1.get(b"a")
            async with kv.transaction() as t2:
                await t2.get(b"b")
                await t2.set(b"a", b"t2")
            await t1.set(b"b", b"t1")

    await _expect_conflict("write skew (each read what the other wrote)", race)
    _eq(await kv.scan(), [(b"a", b"t2"), (b"b", b"0")], "store after write skew")


async def check_phantom(kv: KV) -> None:
    await kv.set(b"slot", b"outside the range")

    async def race(scan: Callable[[KVOps], Awaitable[list[tuple[bytes, bytes]]]]) -> None:
        async with kv.transaction() as t1:
            _eq(await scan(t1), [], "t1 sees the empty range")
            async with kv.transaction() as t2:
                _eq(await scan(t2), [], "t2 sees the empty range")
                await t2.set(b"slot/b", b"t2")
            await t1.set(b"slot/a", b"t1")

    await _expect_conflict(
        "insert into a range another scanned", lambda: race(lambda ops: ops.scan_prefix(b"slot/"))
    )
    _eq(await kv.scan_prefix(b"slot/"), [(b"slot/b", b"t2")], "range after prefix race")
    await kv.delete(b"slot/b")
    await _expect_conflict(
        "insert into a range another scanned",
        lambda: race(lambda ops: ops.scan(b"slot/", b"slot/z", reverse=True)),
    )
    _eq(await kv.scan_prefix(b"slot/"), [(b"slot/b", b"t2")], "range after range race")


async def check_snapshot_reads(kv: KV) -> None:
    await _fill(kv, {b"a": b"0", b"b": b"0"})
    try:
        async with kv.transaction() as t1:
            _eq(await t1.get(b"a"), b"0", "first read")
            async with kv.transaction() as t2:
                await t2.set(b"a", b"1")
                await t2.set(b"b", b"1")
                await t2.set(b"c", b"1")
            _eq(await t1.get(b"b"), b"0", "a read after a concurrent commit (must not mix states)")
            _eq(await t1.scan(), [(b"a", b"0"), (b"b", b"0")], "scan after a concurrent commit")
    except ConflictError:
        pass  # also allowed: refusing to read once consistency cannot be guaranteed
    _eq(await kv.scan(), [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], "store after both")


async def check_no_needless_conflicts(kv: KV) -> None:
    await _fill(kv, {b"x": b"0", b"y": b"0", b"k": b"0"})
    async with kv.transaction() as t1:  # disjoint blind writes
        await t1.set(b"x", b"t1")
        await t1.set(b"new-1", b"t1")
        async with kv.transaction() as t2:
            await t2.set(b"y", b"t2")
            await t2.set(b"new-2", b"t2")
    async with kv.transaction() as t1:  # a read-only transaction racing a writer
        _eq(await t1.get(b"k"), b"0", "read-only read")
        async with kv.transaction() as t2:
            await t2.get(b"k")
            await t2.set(b"k", b"1")
    for _ in range(3):  # one after another, never a conflict
        async with kv.transaction() as txn:
            value = await txn.get(b"k")
            await txn.scan_prefix(b"")
            await txn.set(b"k", (value or b"") + b"+")
    _eq(await kv.get(b"k"), b"1+++", "sequential read-modify-writes")
    _eq(await kv.get(b"new-2"), b"t2", "disjoint writer")


async def check_concurrent_increments(kv: KV) -> None:
    """Several tasks increment one counter with retry-on-conflict; no increment is lost."""
    tasks, increments = 4, 5
    attempts = [0]

    async def worker(me: int) -> None:
        for i in range(increments):
            for _ in range(1000):
                attempts[0] += 1
                try:
                    async with kv.transaction() as txn:
                        value = int(await txn.get(b"counter") or b"0")
                        await txn.set(b"counter", b"%d" % (value + 1))
                        await txn.set(b"log/%d/%d" % (me, i), b"")
                    break
                except ConflictError:
                    await trio.lowlevel.checkpoint()
            else:
                _fail("1000 conflicts in a row")

    async with trio.open_nursery() as nursery:
        for me in range(tasks):
            nursery.start_soon(worker, me)
    _eq(await kv.get(b"counter"), b"%d" % (tasks * increments), "counter")
    _eq(len(await kv.scan_prefix(b"log/")), tasks * increments, "log entries")
    await kv.close()
    await kv.close()  # closing twice is fine


CHECKS: Mapping[str, Check] = {
    "basic": check_basic,
    "scan": check_scan,
    "scan_prefix": check_scan_prefix,
    "bad_arguments": check_bad_arguments,
    "commit": check_commit,
    "rollback_on_exception": check_rollback_on_exception,
    "read_your_writes": check_read_your_writes,
    "scan_in_transaction": check_scan_in_transaction,
    "write_write_conflict": check_write_write_conflict,
    "lost_update": check_lost_update,
    "write_skew": check_write_skew,
    "phantom": check_phantom,
    "snapshot_reads": check_snapshot_reads,
    "no_needless_conflicts": check_no_needless_conflicts,
    "concurrent_increments": check_concurrent_increments,
}


async def check_checksums(kv: KV, corrupt: Corrupt) -> None:
    """Corrupted values raise ChecksumError on every read path and are never returned."""
    await _fill(kv, {b"a": b"fine", b"b": b"precious", b"c": b"fine"})
    await corrupt(kv, b"b")
    await _raises(ChecksumError, "get of a corrupted value", kv.get, b"b")
    await _raises(ChecksumError, "scan over a corrupted value", kv.scan)
    await _raises(ChecksumError, "prefix scan over it", kv.scan_prefix, b"b")
    _eq(await kv.get(b"a"), b"fine", "an intact neighbour")
    _eq(await kv.scan(b"c"), [(b"c", b"fine")], "a scan that avoids the damage")

    async def read_in_transaction() -> None:
        async with kv.transaction() as txn:
            await txn.get(b"b")

    await _raises(ChecksumError, "transactional get of a corrupted value", read_in_transaction)
    await kv.set(b"b", b"rewritten")
    _eq(await kv.get(b"b"), b"rewritten", "overwriting a corrupted value heals it")


async def run_check(name: str, make_kv: MakeKV, *, corrupt: Corrupt | None = None) -> None:
    """Run one check (a key of ``CHECKS``, or ``"checksums"``) on a fresh store."""
    kv = await make_kv()
    try:
        if name == "checksums":
            if corrupt is None:
                raise ValueError("the checksums check needs a corrupt(kv, key) hook")
            await check_checksums(kv, corrupt)
        else:
            await CHECKS[name](kv)
    finally:
        with trio.CancelScope(shield=True):
            await kv.close()


async def check_kv_conformance(make_kv: MakeKV, *, corrupt: Corrupt | None = None) -> None:
    """Run every check, each on a fresh store from ``make_kv``; raises AssertionError."""
    for name in CHECKS:
        await run_check(name, make_kv)
    if corrupt is not None:
        await run_check("checksums", make_kv, corrupt=corrupt)
