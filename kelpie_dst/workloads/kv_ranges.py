"""KV ranges: every read a store serves matches a model of what was acknowledged.

Clients on several nodes each own a key prefix (``c<n>/``) and are its only writer, so the
client's model of its prefix is exact: every acknowledged set or delete is applied to it, a
write that failed (``StorageError``: nothing applied) is not, and a write whose outcome is
unknown (``StorageUnavailableError``, or the client's node crashed under it) makes the key
*uncertain* until a later read settles it. Clients write concurrently, so commits meet in the
store (a SQLite group commit, with ``[topology.storage] backend = "sqlite"``).

The properties, checked as the clients go (``reads_match_model``):

* a ``get`` returns the model's value (an uncertain key: the value before or after the write
  whose outcome is unknown, which then settles it);
* a ``scan(start, end, limit, reverse)`` returns exactly the model's keys in ``[start, end)``, in
  key order (descending if ``reverse``, so ``limit`` keeps the *last* keys), at most ``limit``
  of them, with the model's values; the bounds are drawn from the keys themselves, so a
  scan often ends exactly at a stored key;
* inside a transaction, after its own sets and deletes, a scan shows the model with those
  writes applied (read-your-writes), and the commit applies all of them or none;
* an acknowledged write is durable when it is acknowledged: the database host's store holds
  it at that instant (on SQLite, the crash image: what a process killed right then would
  recover), not merely once some later commit has run.

Keys are acknowledged durably, so the checks hold across crashes of the database host
(``acknowledged writes survive``): the model is the workload's, not any node's.
"""

from __future__ import annotations

from collections.abc import Sequence

import trio

from kelpie_agent.storage import (
    ChecksumError,
    ConflictError,
    StorageError,
    StorageUnavailableError,
)
from kelpie_agent.storage._keys import prefix_end

from .._nodes import Node
from .._rng import RngStream
from ..scenario import WorkloadContext, invariant, workload
from ..shims import FaultyKV, open_kv
from ._kv_clients import run_clients

__all__ = ["kv_ranges", "ranges_ops_issued", "reads_match_model"]

# Names whose byte order interleaves: "a" < "a\x00" < "ab" < "b" < "ba" < "c"
NAMES = (b"a", b"a\x00", b"ab", b"b", b"ba", b"c", b"ca", b"d")
_Bounds = tuple[bytes, bytes, int | None, bool]  # start, end, limit, reverse


@workload(
    params={"clients": 8, "ops": 25, "think": 0.05, "txn_ratio": 0.3},
    sizes=("clients", "ops"),
    bounds={"clients": (1, 200), "ops": (1, 100_000), "think": (0, 60), "txn_ratio": (0, 1)},
    backends=("sim", "sqlite"),
)
async def kv_ranges(ctx: WorkloadContext) -> None:
    sim = ctx.sim
    clients, ops = ctx.params["clients"], ctx.params["ops"]
    nodes = ctx.topology.nodes or ("node-1",)
    db = sim.add_node(ctx.topology.database or "db")
    remaining = dict.fromkeys(range(clients), ops)
    models = {n: _Model(n) for n in range(clients)}
    violations: list[str] = []
    ctx.state.update(remaining=remaining, violations=violations, models=models, db=db)

    async def client(node: Node, number: int) -> None:
        kv = open_kv(node, host=db)
        rng = ctx.rng(f"ranges/{number}")
        model = models[number]
        model.abandon()  # a write in flight when the node crashed: outcome unknown
        while remaining[number] > 0:
            remaining[number] -= 1
            draw = rng.random()
            try:
                if draw < 0.3:
                    await _write(kv, model, rng.choice(NAMES), rng.random() < 0.3, ctx)
                elif draw < 0.3 + ctx.params["txn_ratio"]:
                    await _transaction(kv, model, rng, violations, ctx)
                elif draw < 0.85:
                    await _scan(kv, model, rng, violations, ctx)
                else:
                    await _get(kv, model, rng.choice(NAMES), violations, ctx)
            except StorageError:
                ctx.count("ranges.failed")
            await trio.sleep(ctx.params["think"] * rng.random())

    await run_clients(sim, nodes, remaining, client)


class _Model:
    """One client's prefix: name -> value (None: absent); uncertain names -> the values a
    write whose outcome is unknown may have left."""

    def __init__(self, number: int) -> None:
        self.prefix = f"c{number}/".encode()
        self.values: dict[bytes, bytes | None] = dict.fromkeys(NAMES)
        self.uncertain: dict[bytes, set[bytes | None]] = {}
        self.pending: dict[bytes, bytes | None] = {}  # the write in flight, if any
        self.counter = 0

    def key(self, name: bytes) -> bytes:
        return self.prefix + name

    def value(self) -> bytes:
        self.counter += 1
        return self.prefix + b"v%d" % self.counter

    def begin(self, writes: dict[bytes, bytes | None]) -> None:
        self.pending = dict(writes)

    def acknowledged(self) -> None:
        for name, value in self.pending.items():
            self.values[name] = value
            self.uncertain.pop(name, None)
        self.pending = {}

    def failed(self) -> None:
        self.pending = {}

    def abandon(self) -> None:
        """The write in flight may or may not have applied."""
        for name, value in self.pending.items():
            self.uncertain.setdefault(name, {self.values[name]}).add(value)
        self.pending = {}

    def settle(self, name: bytes, seen: bytes | None) -> str | None:
        """A read saw ``seen`` for ``name``: a problem, or None (and the key is settled)."""
        allowed = self.uncertain.pop(name, None)
        if allowed is not None and seen in allowed:
            self.values[name] = seen
            return None
        if allowed is None and seen == self.values[name]:
            return None
        expected = sorted(allowed, key=repr) if allowed is not None else self.values[name]
        return f"{self.key(name)!r} read {seen!r}, the model says {expected!r}"


async def _write(
    kv: FaultyKV, model: _Model, name: bytes, delete: bool, ctx: WorkloadContext
) -> None:
    value = None if delete else model.value()
    model.begin({name: value})
    try:
        if value is None:
            await kv.delete(model.key(name))
        else:
            await kv.set(model.key(name), value)
    except StorageUnavailableError:
        model.abandon()
        raise
    except StorageError:
        model.failed()
        raise
    _durable(ctx, model)
    model.acknowledged()
    ctx.count("ranges.writes")


async def _get(
    kv: FaultyKV, model: _Model, name: bytes, violations: list[str], ctx: WorkloadContext
) -> None:
    seen = await kv.get(model.key(name))
    problem = model.settle(name, seen)
    if problem:
        violations.append(f"t={trio.current_time():.3f} get: {problem}")
    ctx.count("ranges.gets")


def _bounds(model: _Model, rng: RngStream) -> _Bounds:
    """A range of the client's prefix whose ends are mostly stored keys' names."""
    lo, hi = sorted(rng.sample(range(len(NAMES) + 1), 2))
    start = model.prefix if lo == 0 and rng.random() < 0.5 else model.key(NAMES[lo])
    last = prefix_end(model.prefix)
    assert last is not None
    end = model.key(NAMES[hi]) if hi < len(NAMES) else last
    return start, end, rng.choice((None, None, 1, 2, 3)), rng.random() < 0.5


def _expected(
    values: dict[bytes, bytes | None],
    prefix: bytes,
    bounds: _Bounds,
) -> list[tuple[bytes, bytes]]:
    start, end, limit, reverse = bounds
    rows = sorted(
        (prefix + name, value)
        for name, value in values.items()
        if value is not None and start <= prefix + name < end
    )
    if reverse:
        rows.reverse()
    return rows if limit is None else rows[:limit]


def _compare(
    what: str,
    model: _Model,
    bounds: _Bounds,
    rows: Sequence[tuple[bytes, bytes]],
    values: dict[bytes, bytes | None],
) -> str | None:
    start, end, limit, reverse = bounds
    if any(start <= model.key(n) < end for n in model.uncertain):
        return None  # an unknown outcome inside the range: settle it first
    expected = _expected(values, model.prefix, bounds)
    if list(rows) == expected:
        return None
    return (
        f"{what} [{start!r}, {end!r}) limit={limit} reverse={reverse} returned "
        f"{[k for k, _ in rows]}, the model says {[k for k, _ in expected]}"
        + ("" if [k for k, _ in rows] != [k for k, _ in expected] else " (values differ)")
    )


async def _scan(
    kv: FaultyKV, model: _Model, rng: RngStream, violations: list[str], ctx: WorkloadContext
) -> None:
    for name in sorted(model.uncertain):  # settle what can be settled, so the scan is exact
        seen = await kv.get(model.key(name))
        problem = model.settle(name, seen)
        if problem:
            violations.append(f"t={trio.current_time():.3f} get: {problem}")
    bounds = _bounds(model, rng)
    start, end, limit, reverse = bounds
    rows = await kv.scan(start, end, limit=limit, reverse=reverse)
    problem = _compare("scan", model, bounds, rows, model.values)
    if problem:
        violations.append(f"t={trio.current_time():.3f} {problem}")
    ctx.count("ranges.scans")


async def _transaction(
    kv: FaultyKV, model: _Model, rng: RngStream, violations: list[str], ctx: WorkloadContext
) -> None:
    writes: dict[bytes, bytes | None] = {}
    for name in rng.sample(NAMES, rng.choice((1, 2, 3))):
        writes[name] = None if rng.random() < 0.4 else model.value()
    bounds = _bounds(model, rng)
    start, end, limit, reverse = bounds
    model.begin(writes)
    try:
        async with kv.transaction() as txn:
            for name, value in writes.items():
                if value is None:
                    await txn.delete(model.key(name))
                else:
                    await txn.set(model.key(name), value)
            rows = await txn.scan(start, end, limit=limit, reverse=reverse)
            problem = _compare("scan in a transaction", model, bounds, rows, model.values | writes)
            if problem:
                violations.append(f"t={trio.current_time():.3f} {problem}")
    except StorageUnavailableError:
        model.abandon()
        raise
    except (ConflictError, StorageError):
        model.failed()
        raise
    _durable(ctx, model)
    model.acknowledged()
    ctx.count("ranges.transactions")


def _durable(ctx: WorkloadContext, model: _Model) -> None:
    """The write just acknowledged is durable now: the database host's store (for SQLite, what
    a process would recover from the files if the host were killed at this instant) holds it."""
    store = open_kv(ctx.state["db"]).store
    for name, value in model.pending.items():
        try:
            stored = store._get(model.key(name))
        except ChecksumError:  # storage.corruption flipped a bit of it at rest
            continue
        if stored != value:
            ctx.state["violations"].append(
                f"t={trio.current_time():.3f} {model.key(name)!r} was acknowledged as "
                f"{value!r}, but the durable store holds {stored!r}"
            )


@invariant
def reads_match_model(ctx: WorkloadContext) -> None:
    """Every get and scan returned what the clients' acknowledged writes say (see above)."""
    violations = ctx.state.get("violations", [])
    assert not violations, f"{len(violations)} read(s) disagree with the model:\n" + "\n".join(
        violations[:10]
    )


@invariant
def ranges_ops_issued(ctx: WorkloadContext) -> None:
    """Every client issued all of its operations (none stopped early)."""
    left = {c: n for c, n in ctx.state.get("remaining", {}).items() if n}
    assert not left, f"clients with operations left: {left}"
