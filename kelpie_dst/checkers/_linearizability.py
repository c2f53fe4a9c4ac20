"""Linearizability checking of key-value histories (see ``docs/checkers.md``).

A history is linearizable when every operation can be given a single instant inside its
[invoke, response] interval such that, in the order of those instants, the operations are a valid
run of the sequential model. Intervals are closed: operations whose intervals touch are concurrent.

Keys are independent in a key-value store, so the history is first split by key (P-compositionality)
and each key is searched on its own (``_wgl.Search``): the cost grows with the concurrency on one
key, not with the length of the whole history. When a key has no linearization, the longest prefix
the search reached is replayed to explain why nothing can follow it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any, TypeVar

import attrs

from ._history import Key, Operation
from ._model import KVModel, Model
from ._result import BlockedOp, Counterexample, LinearizabilityResult, LinearizedOp
from ._wgl import Search

__all__ = ["DEFAULT_MAX_STEPS", "check_linearizability"]

S = TypeVar("S", bound=Hashable)

DEFAULT_MAX_STEPS = 10_000_000
"""Default search budget per key: each step is one model transition tried or one backtrack.

A step takes one to a few microseconds, so the default bounds a key at some tens of seconds."""

_SLICE = 2_000  # steps a search runs before the other one gets its turn
_SOLO_STEPS_PER_OP = 10  # the first search runs alone for this many steps per operation


def check_linearizability(
    history: Iterable[Operation],
    model: Model[Any] | None = None,
    *,
    by_key: bool = True,
    max_steps: int | None = DEFAULT_MAX_STEPS,
) -> LinearizabilityResult:
    """Check whether ``history`` is linearizable with respect to ``model`` (default: KVModel).

    With ``by_key`` (the default) each key is checked separately, which is sound only for models
    in which keys are independent, such as :class:`KVModel`. Keys are checked in sorted order and
    the check stops at the first key that is not linearizable. ``max_steps`` bounds the search on
    each key (``None``: unbounded); a key that exhausts it makes the verdict unknown (``ok=None``)
    unless another key is definitely not linearizable.
    """
    ops = list(history)
    for i, op in enumerate(ops):
        if not isinstance(op, Operation):
            raise TypeError(f"history item #{i} is a {type(op).__name__}, not an Operation")
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be positive or None, not {max_steps}")
    the_model: Model[Any] = KVModel() if model is None else model
    partitions = _partition(ops) if by_key else [(None, list(range(len(ops))))]
    steps = 0
    unknown_keys: list[Key | None] = []
    verdict_base = LinearizabilityResult(
        ok=True, operations=len(ops), keys=len(partitions), max_steps=max_steps
    )
    for key, indices in partitions:
        # An operation that cannot change the state and whose outcome was never seen (a read
        # that timed out) constrains nothing: leave it out of the search.
        indices = [i for i in indices if not (ops[i].unknown and the_model.read_only(ops[i]))]
        searched = [ops[i] for i in indices]
        if isinstance(the_model, KVModel):
            searched = the_model.anonymize(searched)
        verdict, used, best = _search(the_model, searched, max_steps)
        steps += used
        if verdict is None:
            unknown_keys.append(key)
        elif not verdict:
            cx = _counterexample(the_model, key, ops, indices, best)
            return attrs.evolve(verdict_base, ok=False, key=key, counterexample=cx, steps=steps)
    if unknown_keys:
        first, unknown = unknown_keys[0], tuple(unknown_keys)
        return attrs.evolve(verdict_base, ok=None, key=first, unknown_keys=unknown, steps=steps)
    return attrs.evolve(verdict_base, steps=steps)


def _search(
    model: Model[Any], ops: list[Operation], max_steps: int | None
) -> tuple[bool | None, int, list[int]]:
    """Verdict, steps used and longest prefix found, from a portfolio of two searches.

    Both are complete, so the first verdict stands. Without unknown outcomes they are the same
    and one is enough. Otherwise the eager one (quick on valid histories) runs alone for a while,
    then it alternates with the lazy one (quick to refute), both sharing the step budget.
    """
    searches = [Search(model, ops, lazy=False)]
    if any(op.unknown for op in ops):
        searches.append(Search(model, ops, lazy=True))
    pause_every = _SLICE if max_steps is None else min(_SLICE, max_steps)
    runs = [search.run(pause_every) for search in searches]
    solo_until = _SOLO_STEPS_PER_OP * len(ops)
    while True:
        for search, run in zip(searches, runs, strict=True):
            if search.lazy and searches[0].steps < solo_until:
                continue
            try:
                next(run)
            except StopIteration as finished:
                verdict: bool = finished.value
                return verdict, sum(s.steps for s in searches), search.best
            used = sum(s.steps for s in searches)
            if max_steps is not None and used >= max_steps:
                return None, used, []


def _partition(ops: Sequence[Operation]) -> list[tuple[Key | None, list[int]]]:
    groups: dict[tuple[bool, Key], list[int]] = {}
    for i, op in enumerate(ops):
        groups.setdefault((isinstance(op.key, bytes), op.key), []).append(i)
    return [(sort_key[1], groups[sort_key]) for sort_key in sorted(groups)]


def _counterexample(
    model: Model[S],
    key: Key | None,
    ops: Sequence[Operation],
    indices: Sequence[int],
    best: Sequence[int],
) -> Counterexample:
    """Replay the longest prefix, then explain why nothing can follow it."""
    state = model.init()
    prefix: list[LinearizedOp] = []
    for local in best:
        op = ops[indices[local]]
        _, state = model.step(state, op)
        prefix.append(LinearizedOp(indices[local], op, model.describe_state(state)))
    done = set(best)
    pending = [local for local in range(len(indices)) if local not in done]
    # The pending operation with a known outcome whose return event comes first...
    deadline = min(
        (local for local in pending if not ops[indices[local]].unknown),
        key=lambda local: (ops[indices[local]].response_time, local),
    )
    limit = ops[indices[deadline]].response_time
    # ...and everything whose call event comes before that return event.
    candidates = sorted(
        (local for local in pending if ops[indices[local]].invoke_time <= limit),
        key=lambda local: (ops[indices[local]].invoke_time, local),
    )
    blocked: list[BlockedOp] = []
    for local in candidates:
        op = ops[indices[local]]
        ok, _ = model.step(state, op)
        if ok:
            reason = "no linearization of the remaining operations exists after it"
        else:
            reason = model.explain(state, op)
        blocked.append(BlockedOp(indices[local], op, reason))
    deadline_op = next(b for b in blocked if b.index == indices[deadline])
    return Counterexample(
        key=key,
        operations=len(indices),
        prefix=tuple(prefix),
        state=model.describe_state(state),
        deadline=deadline_op,
        blocked=tuple(blocked),
    )
