"""The agent server machine is deterministic: each example of a derandomized run gets the same
(seed, steps, checks, trace hash) again in this process and in a fresh one (with another
PYTHONHASHSEED), through ``AgentService`` and through the SDK over the simulated network."""

from __future__ import annotations

import json

from kelpie_dst.hypothesis import profile_settings, run_machine

from .agent_machine import AgentServerMachine, HttpAgentServerMachine
from .failures import fresh_python

_FRESH = """
import json, sys
from tests.hypothesis.test_agent_determinism import examples
print(json.dumps([examples(False, 6), examples(True, 2)]))
"""


def examples(http: bool, count: int) -> list[list[object]]:
    """(seed, rule steps, checks, trace hash) of each example of a CI-profile run."""
    seen: list[list[object]] = []
    base = HttpAgentServerMachine if http else AgentServerMachine

    class Recorded(base):  # type: ignore[misc, valid-type]
        def teardown(self) -> None:
            super().teardown()
            seen.append([self.sim_seed, self.rule_steps, self.checks, self.final_trace_hash])

    Recorded.__name__ = Recorded.__qualname__ = base.__name__
    run_machine(Recorded, settings=profile_settings("ci", max_examples=count))
    return seen


def test_examples_repeat_exactly_in_process_and_in_a_fresh_process() -> None:
    first = [examples(False, 6), examples(True, 2)]
    assert len(first[0]) >= 6 and len(first[1]) >= 2
    assert len({row[3] for row in first[0]}) >= 5  # the examples really differ
    assert sum(int(str(row[2])) for row in first[1]) >= 2  # and were checked
    assert [examples(False, 6), examples(True, 2)] == first
    assert json.loads(fresh_python(_FRESH)) == first
