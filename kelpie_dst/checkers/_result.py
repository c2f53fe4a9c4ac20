"""The verdict of a linearizability check and its human-readable counterexample."""

from __future__ import annotations

import attrs

from ._history import Key, Operation

__all__ = ["BlockedOp", "Counterexample", "LinearizabilityResult", "LinearizedOp"]

DEFAULT_PREFIX_LINES = 20


def _show_key(key: Key | None) -> str:
    return "the whole history" if key is None else f"key {key!r}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@attrs.frozen
class LinearizedOp:
    """One step of a linearization: the operation and the model state it leads to."""

    index: int
    """Position of the operation in the checked history."""
    op: Operation
    state_after: str


@attrs.frozen
class BlockedOp:
    """An operation that could have taken effect next in real time, but not in the model."""

    index: int
    """Position of the operation in the checked history."""
    op: Operation
    reason: str
    """Completes the sentence "<operation> but ...", e.g. "the model value of 'x' is 'a'"."""


@attrs.frozen
class Counterexample:
    """Why a partition of a history has no linearization.

    ``prefix`` is the longest linearizable prefix the search found (one of possibly several),
    in linearization order, ending in model state ``state``. ``deadline`` is the pending operation
    that returns first: it, or something invoked before it returned, has to take effect next, and
    ``blocked`` lists every such candidate with the reason the model rejects it.
    """

    key: Key | None
    operations: int
    """Operations searched (those with an unknown outcome that cannot change the state, like a
    read that timed out, constrain nothing and are left out)."""
    prefix: tuple[LinearizedOp, ...]
    state: str
    deadline: BlockedOp
    blocked: tuple[BlockedOp, ...]

    def describe(self, max_prefix: int = DEFAULT_PREFIX_LINES) -> str:
        """A multi-line explanation; only the last ``max_prefix`` prefix steps are listed."""
        shown = self.prefix[-max_prefix:] if max_prefix > 0 else ()
        digits = len(str(max([s.index for s in shown] + [b.index for b in self.blocked])))

        def line(index: int, op: Operation) -> str:
            return f"  #{index:<{digits}}  {op.describe()}"

        lines = [
            f"No linearization exists for the {_plural(self.operations, 'operation')} "
            f"on {_show_key(self.key)}.",
            f"Longest linearizable prefix found: {len(self.prefix)} of {self.operations} "
            "operations, in linearization order:",
        ]
        if len(shown) < len(self.prefix):
            lines.append(f"  ... {len(self.prefix) - len(shown)} earlier operations not shown ...")
        width = max((len(line(s.index, s.op)) for s in shown), default=0)
        lines.extend(f"{line(s.index, s.op):<{width}}  => {s.state_after}" for s in shown)
        if not self.prefix:
            lines.append("  (none: not even the first operation can be linearized)")
        d = self.deadline
        lines += [
            f"Model state after the prefix: {self.state}",
            f"Stuck: #{d.index} returned at {d.op.response_time!r}, so the next operation must be "
            "one invoked by then,",
            "and the model rejects each of them:",
        ]
        lines.extend(f"{line(b.index, b.op)} but {b.reason}" for b in self.blocked)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()


@attrs.frozen
class LinearizabilityResult:
    """Verdict: ``ok`` is True (linearizable), False (not) or None (step budget exhausted).

    On failure ``key`` names the failing partition (``None`` when the history was checked as a
    whole) and ``counterexample`` explains it. When the budget ran out, ``unknown_keys`` lists
    the partitions that could not be decided and ``key`` is the first of them.
    """

    ok: bool | None
    key: Key | None = None
    counterexample: Counterexample | None = None
    operations: int = 0
    keys: int = 0
    steps: int = 0
    unknown_keys: tuple[Key | None, ...] = ()
    max_steps: int | None = None

    def describe(self, max_prefix: int = DEFAULT_PREFIX_LINES) -> str:
        """A multi-line, deterministic explanation of the verdict."""
        scope = f"{_plural(self.operations, 'operation')} on {_plural(self.keys, 'key')}"
        if self.ok:
            return f"Linearizable: {scope}, {_plural(self.steps, 'search step')}."
        if self.ok is None:
            others = len(self.unknown_keys) - 1
            also = f" (and {_plural(others, 'other key')})" if others else ""
            return (
                f"Unknown: the budget of {self.max_steps} search steps per key ran out on "
                f"{_show_key(self.key)}{also}; no violation found in the history of {scope}."
            )
        head = f"NOT linearizable: {_show_key(self.key)} (history of {scope})."
        if self.counterexample is None:
            return head
        return head + "\n" + self.counterexample.describe(max_prefix)

    def __str__(self) -> str:
        return self.describe()
