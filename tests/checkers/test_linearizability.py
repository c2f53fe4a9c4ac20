"""Tests of the linearizability checker on hand-written and simulated histories."""

from __future__ import annotations

import random
from collections.abc import Sequence

import attrs

from kelpie_dst.checkers import (
    HistoryRecorder,
    KVModel,
    LinearizabilityResult,
    Operation,
    OpKind,
    check_linearizability,
)

from .histories import cas, mutate_read, op, plant_stale_read, r, simulate, w


def check(history: Sequence[Operation]) -> LinearizabilityResult:
    result = check_linearizability(history)
    # Splitting by key must never change the verdict (P-compositionality).
    if len(history) <= 12 and result.ok is not None:
        assert check_linearizability(history, by_key=False).ok == result.ok
    return result


# --- accepted histories --------------------------------------------------------------------------


def test_empty_history_is_linearizable() -> None:
    result = check([])
    assert result.ok is True
    assert result.keys == 0


def test_sequential_history_is_linearizable() -> None:
    history = [
        r(1, "x", None, 0, 1),
        w(1, "x", "a", 2, 3),
        r(2, "x", "a", 4, 5),
        cas(2, "x", "a", "b", True, 6, 7),
        cas(1, "x", "a", "c", False, 8, 9),
        r(1, "x", "b", 10, 11),
        op(2, "delete", "x", 12, 13),
        r(1, "x", None, 14, 15),
    ]
    result = check(history)
    assert result.ok is True
    assert result.counterexample is None
    assert str(result).startswith("Linearizable: 8 operations on 1 key")


def test_concurrent_writes_may_take_effect_in_either_order() -> None:
    # Two overlapping writes; readers see b then a, which needs b to be linearized first.
    history = [
        w(1, "x", "a", 0, 10),
        w(2, "x", "b", 0, 10),
        r(3, "x", "b", 1, 2),
        r(3, "x", "a", 3, 4),
        r(4, "x", "a", 11, 12),
    ]
    assert check(history).ok is True


def test_read_concurrent_with_write_may_see_old_or_new_value() -> None:
    history = [
        w(1, "x", "a", 0, 1),
        w(1, "x", "b", 2, 6),
        r(2, "x", "a", 3, 4),
        r(3, "x", "b", 3, 5),
        r(2, "x", "b", 7, 8),
    ]
    assert check(history).ok is True


def test_intervals_that_touch_are_concurrent() -> None:
    # The read returns when the write is invoked, so it may still be ordered first.
    assert check([r(1, "x", None, 0, 1), w(2, "x", "a", 1, 2), r(1, "x", "a", 1, 3)]).ok is True


def test_unknown_write_that_took_effect() -> None:
    history = [w(1, "x", "a", 0, 1), w(2, "x", "b", 2, None), r(3, "x", "b", 5, 6)]
    assert check(history).ok is True


def test_unknown_write_that_never_took_effect() -> None:
    history = [w(1, "x", "a", 0, 1), w(2, "x", "b", 2, None), r(3, "x", "a", 5, 6)]
    assert check(history).ok is True


def test_unknown_write_may_take_effect_long_after_its_invocation() -> None:
    history = [
        w(1, "x", "a", 0, 1),
        w(2, "x", "b", 2, None),
        r(3, "x", "a", 3, 4),
        r(3, "x", "a", 5, 6),
        r(3, "x", "b", 100, 101),
    ]
    assert check(history).ok is True


def test_unknown_cas_and_unknown_read() -> None:
    history = [
        w(1, "x", 1, 0, 1),
        op(2, "cas", "x", 2, None, expected=1, value=2),
        op(3, "read", "x", 2, None),
        r(4, "x", 2, 3, 4),
    ]
    assert check(history).ok is True


def test_unknown_operation_that_cannot_change_the_state_is_ignored() -> None:
    # A cas of 1 to 1 with an unknown outcome changes nothing wherever it goes.
    history = [w(1, "x", 1, 4, 8), op(2, "cas", "x", 4, None, expected=1, value=1)]
    assert check(history).ok is True


def test_delete_of_an_absent_key_is_not_a_no_op_later() -> None:
    # The delete may not be linearized first just because it changes nothing there.
    history = [
        r(1, "x", 0, 0.4, 2.0),
        op(0, "delete", "x", 0.5, 2.5),
        w(2, "x", 0, 0.6, 0.9),
        r(2, "x", None, 1.4, 1.5),
    ]
    assert check(history).ok is True


def test_keys_are_checked_independently_and_bytes_differ_from_str() -> None:
    history = [
        w(1, "x", "a", 0, 1),
        op(1, "write", b"x", 0, 1, value="b"),
        r(2, "x", "a", 2, 3),
        op(2, "read", b"x", 2, 3, output="b"),
    ]
    result = check(history)
    assert result.ok is True
    assert result.keys == 2


# --- rejected histories --------------------------------------------------------------------------


def test_stale_read_after_completed_write_is_rejected() -> None:
    history = [
        w(1, "y", "other", 0, 1),
        w(1, "x", "a", 0, 1),
        w(1, "x", "b", 2, 3),
        r(2, "x", "a", 4, 5),
    ]
    result = check(history)
    assert result.ok is False
    assert result.key == "x"
    cx = result.counterexample
    assert cx is not None
    assert [step.index for step in cx.prefix] == [1, 2]
    assert cx.state == "'x' = 'b'"
    assert cx.deadline.index == 3
    assert [(b.index, b.reason) for b in cx.blocked] == [(3, "the model value of 'x' is 'b'")]
    assert result.describe() == "\n".join(
        [
            "NOT linearizable: key 'x' (history of 4 operations on 2 keys).",
            "No linearization exists for the 3 operations on key 'x'.",
            "Longest linearizable prefix found: 2 of 3 operations, in linearization order:",
            "  #1  p1 write 'x' := 'a' at [0.0, 1.0]  => 'x' = 'a'",
            "  #2  p1 write 'x' := 'b' at [2.0, 3.0]  => 'x' = 'b'",
            "Model state after the prefix: 'x' = 'b'",
            "Stuck: #3 returned at 5.0, so the next operation must be one invoked by then,",
            "and the model rejects each of them:",
            "  #3  p2 read 'x' -> 'a' at [4.0, 5.0] but the model value of 'x' is 'b'",
        ]
    )
    assert str(result) == result.describe()


def test_clients_seeing_writes_in_contradicting_orders_is_rejected() -> None:
    history = [
        w(1, "x", "a", 0, 10),
        w(2, "x", "b", 0, 10),
        r(3, "x", "a", 1, 2),
        r(3, "x", "b", 3, 4),
        r(4, "x", "b", 1, 2),
        r(4, "x", "a", 3, 4),
    ]
    result = check(history)
    assert result.ok is False
    assert result.key == "x"
    cx = result.counterexample
    assert cx is not None
    assert [step.index for step in cx.prefix] == [0, 2, 1, 4, 3]
    assert [(b.index, b.reason) for b in cx.blocked] == [(5, "the model value of 'x' is 'b'")]


def test_cas_succeeding_against_a_value_never_current_is_rejected() -> None:
    history = [
        w(1, "k", 1, 0, 1),
        cas(2, "k", 7, 8, True, 2, 3),
        r(1, "k", 8, 4, 5),
    ]
    result = check(history)
    assert result.ok is False
    cx = result.counterexample
    assert cx is not None
    assert cx.deadline.index == 1
    assert cx.blocked[0].reason == "the model value of 'k' is 1, not the expected 7"


def test_failed_cas_when_the_value_matched_is_rejected() -> None:
    result = check([w(1, "k", 1, 0, 1), cas(2, "k", 1, 2, False, 2, 3)])
    assert result.ok is False
    cx = result.counterexample
    assert cx is not None
    assert "so the cas would have succeeded" in cx.blocked[0].reason


def test_unknown_write_cannot_be_seen_before_it_was_invoked() -> None:
    history = [w(1, "x", "a", 0, 1), r(2, "x", "b", 2, 3), w(3, "x", "b", 4, None)]
    result = check(history)
    assert result.ok is False
    cx = result.counterexample
    assert cx is not None
    assert cx.deadline.index == 1
    assert "'x' -> 'b'" in cx.describe()


def test_read_after_delete_must_not_see_the_old_value() -> None:
    history = [w(1, "x", "a", 0, 1), op(1, "delete", "x", 2, 3), r(2, "x", "a", 4, 5)]
    result = check(history)
    assert result.ok is False
    cx = result.counterexample
    assert cx is not None
    assert cx.blocked[0].reason == "'x' is absent in the model (reads as None)"


def test_recorder_fail_drops_the_operation() -> None:
    rec = HistoryRecorder()
    h = rec.invoke(1, "write", "x", value="lost", time=0)
    rec.fail(h)
    h = rec.invoke(2, "read", "x", time=1)
    rec.ok(h, "lost", time=2)
    history = rec.history()
    assert [o.kind for o in history] == [OpKind.READ]
    assert check(history).ok is False


def test_counterexample_elides_long_prefixes() -> None:
    history = [w(1, "x", i, 2 * i, 2 * i + 1) for i in range(30)]
    history.append(r(2, "x", 3, 100, 101))
    result = check_linearizability(history)
    assert result.ok is False
    text = result.describe(max_prefix=5)
    assert "... 25 earlier operations not shown ..." in text
    assert text.count(" write 'x' := ") == 5
    assert len(check_linearizability(history).describe().splitlines()) > 20


# --- models --------------------------------------------------------------------------------------


@attrs.frozen
class RisingRegister:
    """A custom model: one register whose writes must increase; a read returns the value."""

    def init(self) -> int:
        return 0

    def step(self, state: int, op: Operation) -> tuple[bool, int]:
        if op.kind is OpKind.READ:
            return op.unknown or op.output == state, state
        assert isinstance(op.value, int)
        return op.value > state, max(state, op.value)

    def read_only(self, op: Operation) -> bool:
        return op.kind is OpKind.READ

    def describe_state(self, state: int) -> str:
        return f"register = {state}"

    def explain(self, state: int, op: Operation) -> str:
        return f"the register is {state}"


def test_a_custom_model_is_used_for_every_step_and_explanation() -> None:
    history = [w(1, "x", 2, 0, 1), w(1, "x", 1, 2, 3), r(2, "x", 2, 4, 5)]
    assert check(history).ok is False  # the read must see 1 in a plain key-value store
    assert check_linearizability(history[:1] + history[2:], RisingRegister()).ok is True
    result = check_linearizability(history, RisingRegister(), by_key=False)
    assert result.ok is False
    assert result.key is None
    cx = result.counterexample
    assert cx is not None
    assert cx.state == "register = 2"
    assert [(b.index, b.reason) for b in cx.blocked] == [(1, "the register is 2")]
    assert "on the whole history" in result.describe()


def test_kv_model_anonymizes_values_nobody_observes() -> None:
    history = [
        w(1, "x", "seen", 0, 1),
        w(1, "x", "unseen", 2, 3),
        cas(2, "x", "seen", "also unseen", False, 4, 5),
        r(3, "x", "seen", 6, 7),
    ]
    values = [o.value for o in KVModel().anonymize(history)]
    assert values[0] == "seen"
    assert values[1] is values[2]
    assert values[1] not in ("unseen", "also unseen", None)
    assert check(history).ok is False


# --- budget, determinism, scale ------------------------------------------------------------------


def test_budget_exhaustion_gives_an_unknown_verdict() -> None:
    history = simulate(random.Random(7), n_ops=200, clients=8, keys=1)
    result = check_linearizability(history, max_steps=50)
    assert result.ok is None
    assert result.key == "k0"
    assert result.unknown_keys == ("k0",)
    assert result.describe().startswith("Unknown: the budget of 50 search steps per key ran out")
    assert check_linearizability(history).ok is True


def test_a_violation_on_one_key_beats_an_unknown_verdict_on_another() -> None:
    history = simulate(random.Random(3), n_ops=200, clients=8, keys=1)
    history += [w(9, "z", "a", 0, 1), r(9, "z", "b", 2, 3)]
    result = check_linearizability(history, max_steps=50)
    assert result.ok is False
    assert result.key == "z"


def test_checking_is_deterministic() -> None:
    history = simulate(random.Random(11), n_ops=300, clients=6, keys=3)
    mutate_read(history, 150)
    first, second = check_linearizability(history), check_linearizability(history)
    assert first.ok is False
    assert first == second
    assert first.describe() == second.describe()


def test_two_thousand_operations_on_several_keys() -> None:
    for unique in (False, True):
        history = simulate(random.Random(2000), n_ops=2000, clients=8, keys=4, unique=unique)
        assert len(history) > 1900  # a few operations failed and were dropped
        result = check_linearizability(history)
        assert result.ok is True, result.describe()
        assert result.keys == 4
    i = plant_stale_read(history)
    bad = check_linearizability(history)
    assert bad.ok is False
    assert bad.key == history[i].key
    assert bad.counterexample is not None
    assert i in {b.index for b in bad.counterexample.blocked}
