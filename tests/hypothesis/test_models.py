"""Outcome, Register and ExactlyOnce: the honest model of requests with unknown outcomes."""

from __future__ import annotations

import pytest

from kelpie_dst.hypothesis import ExactlyOnce, Outcome, Register


def test_a_register_allows_the_acknowledged_value_and_every_unknown_write_for_good() -> None:
    block = Register.of("")
    block.write("a", Outcome.REJECTED)
    assert block.allowed() == {""}
    block.write("b", Outcome.UNKNOWN)
    block.write("c", Outcome.OK)
    assert block.allowed() == {"b", "c"}  # the unknown write may land after the acknowledged
    block.observe("b", "block")
    assert block.allowed() == {"b"}
    block.observe("b", "block")
    with pytest.raises(AssertionError, match=r"^block is 'c', expected one of \{'b'\}$"):
        block.observe("c", "block")  # "c" was overwritten by the unknown write that landed


def test_exactly_once_checks_duplicates_strays_and_losses() -> None:
    items = ExactlyOnce[str]()
    items.add("a", Outcome.OK)
    items.add("b", Outcome.UNKNOWN)
    items.add("c", Outcome.REJECTED)
    items.observe_all(["a"], "items")  # b may not have landed (yet)
    items.observe_some(["b"], "items")
    assert (items.acked, items.unknown) == ({"a", "b"}, set())  # b landed: for good
    items.add("b", Outcome.UNKNOWN)  # a retry with no answer does not make it unknown again
    assert items.unknown == set()
    with pytest.raises(AssertionError, match=r"^items: acknowledged \{'b'\} missing$"):
        items.observe_all(["a"], "items")
    with pytest.raises(AssertionError, match=r"^items: \{'a'\} present more than once$"):
        items.observe_some(["a", "a"], "items")
    with pytest.raises(AssertionError, match=r"^items: \{'c'\} present, but never sent$"):
        items.observe_some(["c"], "items")
