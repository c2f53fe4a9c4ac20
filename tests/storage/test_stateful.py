"""Hypothesis state machines comparing each backend with a dict model.

Besides single operations and lone transactions (committed or rolled back), each machine races
two transactions: t1 does some operations, t2 runs and commits entirely inside t1, then t1 does
more and commits. Whatever happens must be serializable: t1's reads see its starting state (or
raise ConflictError), and the final contents equal t2-then-t1 or t1-then-t2, in an order
consistent with what each read. SimKV and SqliteKV are also held to their exact conflict rule
(docs/storage.md): t1 conflicts iff it wrote anything and t2 wrote a key t1 read, wrote, or
scanned; PostgreSQL may conflict more often, never less than serializability requires.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Collection
from typing import Any

import attrs
import psycopg
import pytest
import trio
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from psycopg.conninfo import make_conninfo

from kelpie_agent.storage import KV, ConflictError, KVOps, PostgresKV, SqliteKV
from kelpie_agent.storage._keys import in_range, prefix_end
from kelpie_agent.storage.testing import model_scan
from kelpie_dst.shims import SimKV

Op = tuple[Any, ...]
Range = tuple[bytes, bytes | None]

keys = st.lists(st.sampled_from([0x00, 0x61, 0x62, 0xFF]), max_size=3).map(bytes)
values = st.binary(max_size=4)
limits = st.none() | st.integers(0, 3)
single_ops = st.one_of(
    st.tuples(st.just("get"), keys),
    st.tuples(st.just("set"), keys, values),
    st.tuples(st.just("delete"), keys),
    st.tuples(st.just("scan"), keys, st.none() | keys, limits, st.booleans()),
    st.tuples(st.just("prefix"), keys, limits, st.booleans()),
)
op_lists = st.lists(single_ops, max_size=5)


class Boom(Exception):
    pass


@attrs.define
class Shadow:
    """What a transaction must see, and what it read and wrote (per the model)."""

    view: dict[bytes, bytes]
    snapshot: dict[bytes, bytes] = attrs.field()
    writes: dict[bytes, bytes | None] = attrs.field(factory=dict)
    keys: set[bytes] = attrs.field(factory=set)
    ranges: list[Range] = attrs.field(factory=list)

    @snapshot.default
    def _snapshot_default(self) -> dict[bytes, bytes]:
        return dict(self.view)


def hits(written: Collection[bytes], keys: Collection[bytes], ranges: list[Range]) -> bool:
    return any(k in keys or any(in_range(k, lo, hi) for lo, hi in ranges) for k in written)


def expect_read(op: Op, shadow: Shadow, in_txn: bool) -> tuple[Any, set[bytes], list[Range]]:
    """The result ``op`` must return, and the keys and ranges that result depends on."""
    if op[0] == "get":
        key = op[1]
        observed = {key} if in_txn and key not in shadow.writes else set()
        return shadow.view.get(key), observed, []
    if op[0] == "scan":
        _, start, end, limit, reverse = op
    else:
        _, start, limit, reverse = op
        end = prefix_end(start)
    rows = model_scan(shadow.view, start, end, limit, reverse)
    if not in_txn or limit == 0 or (end is not None and end <= start):
        return rows, set(), []
    if limit is not None and len(rows) == limit:
        last = rows[-1][0]
        return rows, set(), [(last, end) if reverse else (start, last + b"\x00")]
    return rows, set(), [(start, end)]


async def apply(
    target: KVOps,
    op: Op,
    shadow: Shadow,
    *,
    in_txn: bool,
    concurrent: Collection[bytes] = (),
    exact: bool = True,
) -> None:
    """Run ``op`` on ``target`` and check it against ``shadow``; ``concurrent`` holds the keys
    committed by others since the transaction began."""
    kind = op[0]
    if kind in ("set", "delete"):
        if kind == "set":
            await target.set(op[1], op[2])
            shadow.view[op[1]] = op[2]
        else:
            await target.delete(op[1])
            shadow.view.pop(op[1], None)
        shadow.writes[op[1]] = op[2] if kind == "set" else None
        return
    expected, observed_keys, observed_ranges = expect_read(op, shadow, in_txn)
    must_conflict = exact and hits(concurrent, observed_keys, observed_ranges)
    try:
        if kind == "get":
            actual: Any = await target.get(op[1])
        elif kind == "scan":
            actual = await target.scan(op[1], op[2], limit=op[3], reverse=op[4])
        else:
            actual = await target.scan_prefix(op[1], limit=op[2], reverse=op[3])
    except ConflictError:
        assert in_txn and concurrent, f"{op}: conflict with nothing committed concurrently"
        assert must_conflict or not exact, f"{op}: needless conflict"
        raise
    assert not must_conflict, f"{op}: read {concurrent} committed after the transaction began"
    assert actual == expected, f"{op}: expected {expected!r}, got {actual!r}"
    shadow.keys |= observed_keys
    shadow.ranges.extend(observed_ranges)


def effective(shadow: Shadow) -> tuple[set[bytes], set[bytes], list[Range]]:
    """(keys really changed, keys read, ranges read), counting a delete of a key absent from
    the snapshot as a read of it (it found nothing) rather than a write."""
    changed = {k for k, v in shadow.writes.items() if v is not None or k in shadow.snapshot}
    absent = {k for k, v in shadow.writes.items() if v is None and k not in shadow.snapshot}
    return changed, shadow.keys | absent, shadow.ranges


def applied(state: dict[bytes, bytes], *shadows: Shadow) -> dict[bytes, bytes]:
    result = dict(state)
    for shadow in shadows:
        for key, value in shadow.writes.items():
            if value is None:
                result.pop(key, None)
            else:
                result[key] = value
    return result


class KVMachine(RuleBasedStateMachine):
    exact = True  # SimKV and SqliteKV conflict exactly per docs/storage.md

    def __init__(self) -> None:
        super().__init__()
        self.model: dict[bytes, bytes] = {}
        self.kv: KV = trio.run(self.open)

    async def open(self) -> KV:
        raise NotImplementedError

    def teardown(self) -> None:
        trio.run(self.kv.close)

    @invariant()
    def contents_match_model(self) -> None:
        assert trio.run(self.kv.scan) == model_scan(self.model)

    @rule(op=single_ops)
    def single(self, op: Op) -> None:
        shadow = Shadow(self.model)
        trio.run(lambda: apply(self.kv, op, shadow, in_txn=False))

    @rule(ops=op_lists, fail=st.booleans())
    def transaction(self, ops: list[Op], fail: bool) -> None:
        shadow = Shadow(dict(self.model))

        async def body() -> None:
            async with self.kv.transaction() as txn:
                for op in ops:
                    await apply(txn, op, shadow, in_txn=True)
                if fail:
                    raise Boom

        if fail:
            with pytest.raises(Boom):
                trio.run(body)
        else:
            trio.run(body)
            self.model = shadow.view

    @rule(pre=op_lists, other=op_lists, post=op_lists)
    def race(self, pre: list[Op], other: list[Op], post: list[Op]) -> None:
        t1, t2 = Shadow(dict(self.model)), Shadow(dict(self.model))
        stage = ["pre"]

        async def body() -> None:
            async with self.kv.transaction() as txn1:
                for op in pre:
                    await apply(txn1, op, t1, in_txn=True)
                async with self.kv.transaction() as txn2:
                    for op in other:
                        await apply(txn2, op, t2, in_txn=True)
                stage[0] = "post"
                for op in post:
                    await apply(txn1, op, t1, in_txn=True, concurrent=t2.writes, exact=self.exact)
                stage[0] = "commit"

        try:
            trio.run(body)
            t1_committed = True
        except ConflictError:
            assert stage[0] != "pre", "conflict before anything was committed concurrently"
            t1_committed = False
        # t2 always commits: nothing committed while it ran.
        if self.exact and stage[0] == "commit":
            expect = bool(t1.writes) and hits(t2.writes, t1.keys | set(t1.writes), t1.ranges)
            assert t1_committed != expect, f"t1 committed={t1_committed}, expected {not expect}"
        after_t2 = applied(self.model, t2)
        if not t1_committed:
            self.model = after_t2
            return
        assert not {k for k, v in t1.writes.items() if v is not None} & {
            k for k, v in t2.writes.items() if v is not None
        }, "both transactions set the same key and both committed"
        t1_changed, t1_keys, t1_ranges = effective(t1)
        t2_changed, t2_keys, t2_ranges = effective(t2)
        serial = []
        if not hits(t2_changed, t1_keys, t1_ranges):  # t1 read nothing t2 changed: t2 then t1
            serial.append(applied(self.model, t2, t1))
        if not hits(t1_changed, t2_keys, t2_ranges):  # t2 read nothing t1 changed: t1 then t2
            serial.append(applied(self.model, t1, t2))
        actual = dict(trio.run(self.kv.scan))
        assert actual in serial, f"not serializable: {actual} is none of {serial}"
        self.model = actual


class SimMachine(KVMachine):
    async def open(self) -> KV:
        await trio.lowlevel.checkpoint()
        return SimKV()


class SqliteMachine(KVMachine):
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="kelpie-kv-")
        super().__init__()

    async def open(self) -> KV:
        return await SqliteKV.open(os.path.join(self.dir, "kv.sqlite"))

    def teardown(self) -> None:
        super().teardown()
        shutil.rmtree(self.dir, ignore_errors=True)


_schemas = itertools.count()


class PostgresMachine(KVMachine):
    exact = False

    def __init__(self, dsn: str) -> None:
        name = f"kelpie_stateful_{os.getpid()}_{next(_schemas)}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {name}")
        self.dsn = make_conninfo(dsn, options=f"-c search_path={name}")
        super().__init__()

    async def open(self) -> KV:
        return await PostgresKV.open(self.dsn)


def _settings(examples: int, steps: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


def test_simkv_matches_model() -> None:
    run_state_machine_as_test(SimMachine, settings=_settings(60, 30))


def test_sqlite_matches_model() -> None:
    run_state_machine_as_test(SqliteMachine, settings=_settings(25, 20))


@pytest.mark.postgres
def test_postgres_matches_model(postgres_dsn: str) -> None:
    factory: Callable[[], PostgresMachine] = lambda: PostgresMachine(postgres_dsn)  # noqa: E731
    run_state_machine_as_test(factory, settings=_settings(25, 20))
