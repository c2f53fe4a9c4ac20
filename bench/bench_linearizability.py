"""Benchmark of kelpie_dst.checkers.check_linearizability on generated key-value histories.

Run with ``.venv/bin/python bench/bench_linearizability.py``. Each history comes from clients that
each run one operation at a time against a real dict; every operation takes effect at a random
instant inside its [invoke, response] interval, so the history is linearizable by construction.
Some operations time out (outcome unknown), and half of those took effect anyway. The "violation"
variant plants one stale read in the middle: a read that returns a value which two completed,
real-time-ordered writes had already replaced.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Hashable

import attrs

from kelpie_dst.checkers import HistoryRecorder, Operation, OpKind, check_linearizability

KINDS = (OpKind.READ, OpKind.WRITE, OpKind.CAS, OpKind.DELETE)
WEIGHTS = (50, 30, 15, 5)


@attrs.define
class _Planned:
    process: int
    kind: OpKind
    key: str
    value: Hashable
    expected: Hashable
    invoke: float
    response: float
    point: float
    unknown: bool
    applied: bool
    output: Hashable = None


def generate(
    n_ops: int,
    rng: random.Random,
    *,
    clients: int = 8,
    keys: int = 4,
    values: int | None = None,
    unknown_rate: float = 0.01,
) -> list[Operation]:
    """A linearizable history; ``values=None`` writes unique values, else values 0..values-1."""
    clock = [rng.random() for _ in range(clients)]
    process = list(range(clients))
    last_written: dict[str, Hashable] = {}
    plans: list[_Planned] = []
    for n in range(n_ops):
        c = min(range(clients), key=lambda i: (clock[i], i))
        kind = rng.choices(KINDS, WEIGHTS)[0]
        key = f"k{rng.randrange(keys)}"
        value = n if values is None else rng.randrange(values)
        # A CAS expects the latest value written so far, so that it usually succeeds.
        expected = last_written.get(key) if values is None else rng.randrange(values)
        invoke = clock[c]
        duration = rng.expovariate(1.0)
        unknown = rng.random() < unknown_rate
        plans.append(
            _Planned(
                process=process[c],
                kind=kind,
                key=key,
                value=value,
                expected=expected,
                invoke=invoke,
                response=invoke + duration,
                point=invoke + rng.random() * duration,
                unknown=unknown,
                applied=not unknown or rng.random() < 0.5,
            )
        )
        clock[c] = invoke + duration + rng.expovariate(4.0)
        if unknown:  # like Jepsen, a client whose call timed out is replaced by a new process
            process[c] += clients
        if kind in (OpKind.WRITE, OpKind.CAS):
            last_written[key] = value
    store: dict[str, Hashable] = {}
    for plan in sorted(plans, key=lambda p: p.point):
        if not plan.applied:
            continue
        current = store.get(plan.key)
        if plan.kind is OpKind.READ:
            plan.output = current
        elif plan.kind is OpKind.WRITE:
            store[plan.key] = plan.value
        elif plan.kind is OpKind.DELETE:
            store.pop(plan.key, None)
        else:
            plan.output = current == plan.expected
            if plan.output:
                store[plan.key] = plan.value
    rec = HistoryRecorder()
    for plan in plans:
        h = rec.invoke(
            plan.process,
            plan.kind,
            plan.key,
            value=plan.value,
            expected=plan.expected,
            time=plan.invoke,
        )
        if plan.unknown:
            rec.info(h)
        else:
            rec.ok(h, plan.output, time=plan.response)
    return list(rec.history())


def plant_stale_read(history: list[Operation]) -> int:
    """Make a read in the middle return a value that two completed, ordered writes replaced.

    Needs unique values (``values=None``), so that only one operation ever wrote that value.
    Returns the index of the read.
    """
    writes = [o for o in history if o.kind is OpKind.WRITE and not o.unknown]
    for i in range(len(history) // 2, len(history)):
        read = history[i]
        if read.kind is not OpKind.READ or read.unknown:
            continue
        done = [o for o in writes if o.key == read.key and o.response_time < read.invoke_time]
        done.sort(key=lambda o: o.response_time)
        for old in done:
            replaced = any(old.response_time < o.invoke_time for o in done)
            if replaced and old.value != read.output:
                history[i] = attrs.evolve(read, output=old.value)
                return i
    raise ValueError("no read can be made stale")


def measure(history: list[Operation]) -> tuple[bool | None, int, float]:
    start = time.perf_counter()
    result = check_linearizability(history)  # default budget: "unknown" if it runs out
    elapsed = time.perf_counter() - start
    return result.ok, result.steps, elapsed


def run_scenario(sizes: list[int], clients: int, keys: int, seed: int) -> None:
    print(f"\n{clients} clients, {keys} key(s), 1% of operations time out (outcome unknown)")
    header = f"{'history':<22} {'ops':>6} {'verdict':>7} {'steps':>8} {'seconds':>8} {'ops/s':>8}"
    print(header)
    print("-" * len(header))
    for n in sizes:
        cases: list[tuple[str, list[Operation], bool]] = []
        for label, values in (("valid, unique values", None), ("valid, values 0..4", 5)):
            rng = random.Random(seed * 100_003 + n)
            history = generate(n, rng, clients=clients, keys=keys, values=values)
            cases.append((label, history, True))
        stale = list(cases[0][1])
        plant_stale_read(stale)
        cases.append(("stale read planted", stale, False))
        for label, history, expected in cases:
            ok, steps, elapsed = measure(history)
            if ok is (not expected):
                raise AssertionError(f"wrong verdict {ok} for {label}, {n} operations")
            rate = len(history) / elapsed if elapsed > 0 else math.inf
            print(
                f"{label:<22} {len(history):>6} {ok!s:>7} {steps:>8} {elapsed:>8.3f} {rate:>8.0f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 2_000, 5_000, 10_000])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument(
        "--keys", type=int, nargs="+", default=[4, 1], help="one scenario per key count"
    )
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    for keys in args.keys:
        run_scenario(args.sizes, args.clients, keys, args.seed)


if __name__ == "__main__":
    main()
