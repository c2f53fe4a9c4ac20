"""Building histories for the checker tests: by hand, by simulation, and by brute force."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Hashable, Sequence

import attrs

from kelpie_dst.checkers import UNKNOWN, HistoryRecorder, KVModel, Operation, OpKind

# --- by hand -------------------------------------------------------------------------------------


def op(
    process: int,
    kind: str,
    key: str | bytes,
    start: float,
    end: float | None,
    *,
    value: Hashable = None,
    expected: Hashable = None,
    output: Hashable = None,
) -> Operation:
    """An operation; ``end=None`` means the outcome is unknown."""
    return Operation(
        process=process,
        kind=kind,
        key=key,
        value=value,
        expected=expected,
        output=UNKNOWN if end is None else output,
        invoke_time=start,
        response_time=math.inf if end is None else end,
    )


def w(p: int, key: str, value: Hashable, start: float, end: float | None) -> Operation:
    return op(p, "write", key, start, end, value=value)


def r(p: int, key: str, output: Hashable, start: float, end: float) -> Operation:
    return op(p, "read", key, start, end, output=output)


def cas(
    p: int, key: str, expected: Hashable, value: Hashable, ok: bool, start: float, end: float
) -> Operation:
    return op(p, "cas", key, start, end, value=value, expected=expected, output=ok)


# --- by simulating a real dict -------------------------------------------------------------------

FATES = ("ok", "ok", "ok", "ok", "ok", "info-applied", "info-lost", "fail")


@attrs.define
class Spec:
    client: int
    kind: OpKind
    key: str
    value: int
    expected: int | None
    gap: float
    duration: float
    point: float  # where in [invoke, response] the operation takes effect, as a fraction
    fate: str


def run_specs(specs: Sequence[Spec], clients: int) -> list[Operation]:
    """Execute ``specs`` against a real dict, each at an instant inside its interval."""
    clock = [0.0] * clients
    process = list(range(clients))
    timed = []
    for i, s in enumerate(specs):
        c = s.client % clients
        invoke = clock[c] + s.gap
        response = invoke + s.duration
        clock[c] = response
        timed.append((invoke + s.point * s.duration, i, process[c], invoke, response))
        if s.fate.startswith("info"):
            process[c] += clients  # a client that timed out is replaced, as in Jepsen
    store: dict[str, int] = {}
    outputs: dict[int, Hashable] = {}
    for _, i, *_ in sorted(timed):
        s = specs[i]
        if s.fate in ("info-lost", "fail"):
            continue
        current = store.get(s.key)
        if s.kind is OpKind.READ:
            outputs[i] = current
        elif s.kind is OpKind.WRITE:
            store[s.key] = s.value
        elif s.kind is OpKind.DELETE:
            store.pop(s.key, None)
        else:
            outputs[i] = current == s.expected
            if outputs[i]:
                store[s.key] = s.value
    rec = HistoryRecorder()
    for _, i, proc, invoke, response in sorted(timed, key=lambda t: (t[3], t[1])):
        s = specs[i]
        h = rec.invoke(proc, s.kind, s.key, value=s.value, expected=s.expected, time=invoke)
        if s.fate == "fail":
            rec.fail(h)
        elif s.fate.startswith("info"):
            rec.info(h)
        else:
            rec.ok(h, outputs.get(i), time=response)
    return list(rec.history())


def simulate(
    rng: random.Random, *, n_ops: int, clients: int, keys: int, unique: bool = False
) -> list[Operation]:
    """Random operations; values 0..4, or with ``unique`` a distinct value per operation."""
    kinds = [OpKind.READ] * 5 + [OpKind.WRITE] * 3 + [OpKind.CAS] * 2 + [OpKind.DELETE]
    specs: list[Spec] = []
    for n in range(n_ops):
        key = f"k{rng.randrange(keys)}"
        expected = rng.choice([None, *range(5)])
        if unique:  # a cas mostly expects the value most recently written to its key
            expected = next((s.value for s in reversed(specs) if s.key == key), None)
        specs.append(
            Spec(
                client=rng.randrange(clients),
                kind=rng.choice(kinds),
                key=key,
                value=n if unique else rng.randrange(5),
                expected=expected,
                gap=rng.random() / clients,
                duration=rng.random() * 2,
                point=rng.random(),
                fate=rng.choice(FATES) if rng.random() < 0.05 else "ok",
            )
        )
    return run_specs(specs, clients)


def mutate_read(history: list[Operation], near: int) -> int:
    """Make the first known read at or after ``near`` return a value never written."""
    i = next(j for j in range(near, len(history)) if known_read(history[j]))
    history[i] = attrs.evolve(history[i], output="never written")
    return i


def known_read(o: Operation) -> bool:
    return o.kind is OpKind.READ and not o.unknown


def plant_stale_read(history: list[Operation]) -> int:
    """Make a read in the middle return a value replaced by two completed, ordered writes.

    Needs unique values: then only one operation ever wrote the stale value.
    """
    done = [o for o in history if o.kind is OpKind.WRITE and not o.unknown]
    for i in range(len(history) // 2, len(history)):
        read = history[i]
        if not known_read(read):
            continue
        before = [o for o in done if o.key == read.key and o.response_time < read.invoke_time]
        for old, new in itertools.permutations(before, 2):
            if old.response_time < new.invoke_time and old.value != read.output:
                history[i] = attrs.evolve(read, output=old.value)
                return i
    raise AssertionError("no read to make stale")


# --- by brute force ------------------------------------------------------------------------------


def brute_force(history: Sequence[Operation]) -> bool:
    """Try every order; unknown-outcome operations may also be left out."""
    model = KVModel()
    known = [i for i, o in enumerate(history) if not o.unknown]
    for chosen in itertools.product([False, True], repeat=len(history) - len(known)):
        optional = [i for i, o in enumerate(history) if o.unknown]
        ops = sorted(known + [i for i, keep in zip(optional, chosen, strict=True) if keep])
        for order in itertools.permutations(ops):
            if any(
                history[b].response_time < history[a].invoke_time
                for x, a in enumerate(order)
                for b in order[x + 1 :]
            ):
                continue
            state = model.init()
            for i in order:
                ok, state = model.step(state, history[i])
                if not ok:
                    break
            else:
                return True
    return False


def arbitrary_op(
    p: int,
    kind: str,
    key: str,
    start: int,
    length: int,
    value: int,
    expected: int | None,
    out: int | None,
    lost: bool,
) -> Operation:
    """Any operation at all: its output need not be consistent with anything."""
    output: Hashable = out if kind == "read" else (out is not None) if kind == "cas" else None
    end = None if lost else float(start + length)
    return op(p, kind, key, start, end, value=value, expected=expected, output=output)
