"""Property tests: generated histories, and a cross-check against brute force."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kelpie_dst.checkers import KVModel, Operation, OpKind, check_linearizability
from kelpie_dst.checkers._wgl import Search

from .histories import FATES, Spec, arbitrary_op, brute_force, known_read, run_specs

spec_strategy = st.builds(
    Spec,
    client=st.integers(0, 4),
    kind=st.sampled_from(list(OpKind)),
    key=st.sampled_from(["a", "b"]),
    value=st.integers(0, 2),
    expected=st.none() | st.integers(0, 2),
    gap=st.integers(0, 2).map(float),
    duration=st.integers(0, 4).map(float),
    point=st.sampled_from([0.0, 0.25, 0.5, 1.0]),
    fate=st.sampled_from(FATES),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=st.lists(spec_strategy, max_size=40), clients=st.integers(1, 5))
def test_histories_of_a_real_dict_are_linearizable(specs: list[Spec], clients: int) -> None:
    history = run_specs(specs, clients)
    result = check_linearizability(history)
    assert result.ok is True, result.describe()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(spec_strategy, min_size=1, max_size=40),
    clients=st.integers(1, 5),
    which=st.integers(0, 1000),
)
def test_a_read_of_a_value_never_written_is_rejected(
    specs: list[Spec], clients: int, which: int
) -> None:
    history = run_specs(specs, clients)
    reads = [i for i, o in enumerate(history) if known_read(o)]
    if not reads:
        return
    i = reads[which % len(reads)]
    history[i] = attrs.evolve(history[i], output="never written")
    result = check_linearizability(history)
    assert result.ok is False
    assert result.key == history[i].key
    assert result.counterexample is not None
    assert "'never written'" in result.describe(max_prefix=1000)


# --- cross-check against brute force on arbitrary small histories ----------------------------


arbitrary_ops = st.builds(
    arbitrary_op,
    p=st.integers(0, 3),
    kind=st.sampled_from(["read", "write", "cas", "delete"]),
    key=st.sampled_from(["a", "b"]),
    start=st.integers(0, 6),
    length=st.integers(0, 4),
    value=st.integers(0, 1),
    expected=st.none() | st.integers(0, 1),
    out=st.none() | st.integers(0, 1),
    lost=st.sampled_from([False, False, False, True]),
)


@settings(max_examples=300, deadline=None)
@given(history=st.lists(arbitrary_ops, max_size=6))
def test_verdict_matches_brute_force(history: list[Operation]) -> None:
    expected = brute_force(history)
    assert check_linearizability(history).ok is expected
    assert check_linearizability(history, by_key=False).ok is expected
    # The checker runs two search orders and takes the first verdict: each must be right alone.
    for lazy in (False, True):
        run = Search(KVModel(), history, lazy=lazy).run(pause_every=10**9)
        with pytest.raises(StopIteration) as finished:
            next(run)
        assert finished.value.value is expected
