"""agent_split_brain (Dlead19-2): deposed activations under clock jumps, and the workload
parameters it uses (``exempt_deposed``, ``lease_duration``, ``renew_every``)."""

from __future__ import annotations

import attrs
import msgpack
import pytest

from kelpie_agent.actors import ActorId
from kelpie_agent.actors._lease import OWNER, actor_key
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.shims._storage import SimKVStore
from kelpie_dst.workloads._agent_fresh import holder


def test_the_scenario_has_deposed_steps_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_split_brain")
    first, again = run_scenario(scenario, 41), run_scenario(scenario, 41)
    assert first.ok, first.result.failure and first.result.failure.describe()
    # the case the scenario is for: a deposed activation called the model (and was not judged)
    assert first.metrics["oracle.deposed_steps"] >= 1
    # ...and only those: the owner's steps are judged (an exemption that took in every step,
    # e.g. comparing the wrong node, would leave this scenario's prompts unjudged)
    assert first.metrics["oracle.steps"] >= 5 * first.metrics["oracle.deposed_steps"]
    assert first.metrics["actor.lease_lost"] >= 1
    assert first.result.trace_hash == again.result.trace_hash


def test_holder_reads_the_owner_record_as_stored() -> None:
    store = SimKVStore()
    assert holder(store, "agent-1") is None
    key = actor_key(OWNER, ActorId("agent", "agent-1"))
    fields = {"node": "server-2", "session": "s", "epoch": 3, "token": "t"}
    store._apply([(key, msgpack.packb(fields))])
    assert holder(store, "agent-1") == "server-2"
    store._apply([(key, b"\xc1 not msgpack")])
    assert holder(store, "agent-1") is None


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"detaches": True}, "workload.params.detaches: needs deletes = true"),
        ({"lease_duration": 3.0}, "workload.params.lease_duration/renew_every: "),
    ],
)
def test_bad_parameters_get_one_line(params: dict[str, object], message: str) -> None:
    base = load_scenario("agent_split_brain")
    workload = attrs.evolve(base.workload, params={**base.workload.params, **params})
    run = run_scenario(attrs.evolve(base, workload=workload), 0)
    assert run.result.failure is not None
    assert message in run.result.failure.describe()
