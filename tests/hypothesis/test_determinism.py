"""Every example is a deterministic function of Hypothesis's choices: a derandomized run gives
the same (seed, steps, trace hash) for each example again in this process and in a fresh one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from kelpie_dst.examples.toy_kv_service import FixedToyKVMachine
from kelpie_dst.hypothesis import profile_settings, run_machine

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
    env = dict(os.environ, PYTHONHASHSEED="4321")
    env.pop("KELPIE_HYPOTHESIS_PROFILE", None)
    proc = subprocess.run(
        [sys.executable, "-c", _FRESH],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert json.loads(proc.stdout) == first
