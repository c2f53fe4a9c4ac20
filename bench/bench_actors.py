"""Requests per second through the actor runtime, and figures from the single-activation sweep.

Run with ``.venv/bin/python bench/bench_actors.py`` (``--chaos N`` adds a sweep of N seeds of
the tests' 3-node chaos scenario and prints what happened in it).

Workloads, each with two actors: ``memory`` (the response comes from memory, no storage) and
``fenced`` (every request commits one write through ``ctx.transaction()``: a read of the
lease's owner record plus the write):

* ``one actor``: one caller sends requests to one actor, back to back;
* ``100 actors``: 100 callers, one actor each, all at once.

They run in the simulator (one node, SimKV, no faults) and under plain ``trio.run`` with
``system_ports()``, on SimKV and on a SqliteKV temp file. Rates are requests per wall-clock
second; the machine is shared, so compare rows of one run rather than runs.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

import kelpie_dst
from kelpie_agent.actors import ActorContext, ActorId, Dispatcher, DispatcherOptions
from kelpie_agent.ports import Ports, system_ports
from kelpie_agent.storage import KV, SqliteKV
from kelpie_dst.shims import SimKV, open_kv, sim_ports

OPTIONS = DispatcherOptions(idle_timeout=600.0)


class Tally:
    """``memory``: counts in memory. ``fenced``: also commits each count."""

    def __init__(self, actor_id: ActorId, fenced: bool) -> None:
        self.key = f"bench/{actor_id.id}".encode()
        self.fenced = fenced
        self.count = 0
        self.ctx: ActorContext | None = None

    async def activate(self, ctx: ActorContext) -> None:
        self.ctx = ctx
        self.count = int(await ctx.kv.get(self.key) or b"0")

    async def handle(self, message: Any) -> int:
        assert self.ctx is not None
        if self.fenced:
            async with self.ctx.transaction() as txn:
                await txn.set(self.key, b"%d" % (self.count + 1))
        else:
            await trio.lowlevel.checkpoint()
        self.count += 1
        return self.count

    async def deactivate(self) -> None:
        await trio.lowlevel.checkpoint()


def factories() -> dict[str, Callable[[ActorId], Tally]]:
    return {
        "memory": lambda aid: Tally(aid, fenced=False),
        "fenced": lambda aid: Tally(aid, fenced=True),
    }


async def workload(kv: KV, ports: Ports, kind: str, actors: int, total: int) -> None:
    dispatcher = Dispatcher(kv, ports, node_id="bench", factories=factories(), options=OPTIONS)
    per_actor = total // actors

    async def caller(i: int) -> None:
        aid = ActorId(kind, f"a{i}")
        for _ in range(per_actor):
            await dispatcher.request(aid, None)

    async with trio.open_nursery() as nursery:
        await nursery.start(dispatcher.run)
        async with trio.open_nursery() as callers:
            for i in range(actors):
                callers.start_soon(caller, i)
        nursery.cancel_scope.cancel()


def timed(run: Callable[[], object], total: int) -> float:
    start = time.perf_counter()
    run()
    return total / (time.perf_counter() - start)


def in_simulation(kind: str, actors: int, total: int) -> float:
    async def main(sim: kelpie_dst.Simulation) -> None:
        node = sim.add_node("bench")
        await workload(open_kv(node), sim_ports(node), kind, actors, total)

    def run() -> None:
        result = kelpie_dst.run(main, seed=1)
        assert result.ok, result.failure and result.failure.describe()

    return timed(run, total)


def plain_trio(kind: str, actors: int, total: int, make_kv: Callable[[], Awaitable[KV]]) -> float:
    async def main() -> None:
        kv = await make_kv()
        try:
            await workload(kv, system_ports(), kind, actors, total)
        finally:
            await kv.close()

    return timed(lambda: trio.run(main), total)


def benchmarks(total: int) -> None:
    tmp = tempfile.TemporaryDirectory()
    counter = iter(range(1_000_000))

    async def simkv() -> KV:
        return SimKV()

    async def sqlite() -> KV:
        return await SqliteKV.open(Path(tmp.name) / f"bench{next(counter)}.db")

    print(f"{total} requests per row; requests per wall-clock second")
    print(
        f"{'workload':<12} {'actor':<7} {'simulation':>11} {'trio+SimKV':>11} {'trio+SQLite':>12}"
    )
    for label, actors in (("one actor", 1), ("100 actors", 100)):
        for kind in ("memory", "fenced"):
            sim_rate = in_simulation(kind, actors, total)
            trio_rate = plain_trio(kind, actors, total, simkv)
            sqlite_total = total if kind == "memory" else max(actors, total // 10)
            sqlite_rate = plain_trio(kind, actors, sqlite_total, sqlite)
            rates = (sim_rate, trio_rate, sqlite_rate)
            print("{:<12} {:<7} {:>11,.0f} {:>11,.0f} {:>12,.0f}".format(label, kind, *rates))
    tmp.cleanup()


def chaos(seeds: int) -> None:
    """The tests' single-activation scenario over many seeds, with what happened in it."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.actors import checks, workloads

    totals: collections.Counter[str] = collections.Counter()
    failures: list[str] = []
    start = time.perf_counter()
    virtual = 0.0
    for seed in range(seeds):
        out: dict[str, Any] = {}

        async def main(sim: kelpie_dst.Simulation, out: dict[str, Any] = out) -> None:
            out["sim"] = sim
            out.update(await workloads.ledger_chaos(sim))

        result = kelpie_dst.run(
            main, seed=seed, faults=workloads.chaos_faults(), guards="strict", record=True
        )
        virtual += result.virtual_time
        if not result.ok:
            failures.append(f"seed {seed}: {result.failure and result.failure.message}")
            continue
        clients, cluster = out["clients"], out["cluster"]
        fencing = checks.check_fencing(cluster.store.log)
        problems = [*fencing.stale_writes, *fencing.interleaved]
        problems += checks.check_ledgers(out["final"], clients.acked, clients.issued)
        problems += checks.check_spans_disjoint(cluster.journal.spans)
        if problems:
            failures.append(f"seed {seed}: {problems[0]}")
        totals["acknowledged increments"] += len(clients.acked)
        totals["request attempts"] += clients.attempts
        totals["effective activations"] += len(fencing.effective)
        for event in out["sim"].trace.events:
            if event.kind == "log" and str(event.fields.get("message", "")).startswith("actor."):
                totals[str(event.fields["message"])] += 1
            elif event.kind == "fault":
                totals[f"fault {event.fields.get('fault')}"] += 1
    wall = time.perf_counter() - start
    print(
        f"\nchaos sweep: {seeds} seeds, {seeds - len(failures)} passed, {wall:.1f}s wall, "
        f"{virtual:.0f}s virtual ({virtual / wall:.0f}x)"
    )
    for failure in failures:
        print("  FAILED", failure)
    for name, count in sorted(totals.items()):
        print(f"  {name:<36} {count:>8,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--chaos", type=int, default=0, metavar="SEEDS")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    if not args.skip_throughput:
        benchmarks(args.requests)
    if args.chaos:
        chaos(args.chaos)


if __name__ == "__main__":
    main()
