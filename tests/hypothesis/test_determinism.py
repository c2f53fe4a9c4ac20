"""Every example is a deterministic function of Hypothesis's choices: a derandomized run gives
the same (seed, steps, trace hash) for each example again in this process and in a fresh one."""

from __future__ import annotations

import json

from kelpie_dst.examples.toy_kv_service import FixedToyKVMachine
from kelpie_dst.hypothesis import profile_settings, run_machine

from .failures import fresh_python

_FRESH = """
import json
from tests.hypothesis.test_determinism import examples
print(json.dumps(examples()))
"""


def examples() -> list[list[object]]:
    """(seed, rule steps, trace hash) of each example of a CI-profile run of the fixed service."""
    seen: list[list[object]] = []

    class Recorded(FixedToyKVMachine):
        def teardown(self) -> None:
            super().teardown()
            seen.append([self.sim_seed, self.rule_steps, self.final_trace_hash])

    run_machine(Recorded, settings=profile_settings("ci", max_examples=20))
    return seen


def test_examples_repeat_exactly_in_process_and_in_a_fresh_process() -> None:
    first = examples()
    assert len(first) >= 20
    assert len({tuple(row) for row in first}) >= 15  # the examples really differ
    assert examples() == first
    assert json.loads(fresh_python(_FRESH)) == first
