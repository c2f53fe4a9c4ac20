"""Scenario files: every field parsed with its default, dotted fault names, overrides, the
swarm profile, durations, and the shipped scenarios."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

from kelpie_dst import Fault, UsageError
from kelpie_dst._entry import format_duration, parse_duration
from kelpie_dst.scenario import (
    ScenarioError,
    Swarm,
    apply_overrides,
    load_scenario,
    parse_override,
    scenario_files,
)

KV = 'entry = "kelpie_dst.workloads.kv:kv_linearizability"'


def write(tmp_path: Path, body: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_minimal_file_gets_every_default(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, f"[workload]\n{KV}\n", "tiny.toml"))
    assert (s.name, s.description, s.seeds, s.duration) == ("tiny", "", 100, 60.0)
    assert s.workload.params == {
        "clients": 6,
        "ops": 20,
        "keys": 3,
        "think": 0.05,
        "cas_ratio": 0.3,
        "hold": 0.0,
    }
    assert s.workload.sizes == {"clients": 1, "ops": 1, "keys": 1}
    assert s.topology.nodes == () and s.topology.database == "" and not s.topology.sandbox
    assert s.topology.llm.mode == "none" and s.topology.mcp == ()
    assert (s.simulation.strategy, s.simulation.guards, s.simulation.buggify) == (
        "random",
        "redirect",
        True,
    )
    assert s.faults == () and not s.swarm.enabled and s.invariants == ()
    assert s.liveness is None and s.heal_at is None and s.deadline == 60.0


def test_every_field(tmp_path: Path) -> None:
    (tmp_path / "script.toml").write_text('rules = [{ when = { user = "hi" }, text = "hello" }]\n')
    path = write(
        tmp_path,
        f"""
        name = "full"
        description = "all of it"
        seeds = 7
        duration = "1h30m"
        invariants = ["linearizability", "all_operations_issued"]

        [workload]
        {KV}
        params = {{ clients = 2, think = 1 }}

        [topology]
        nodes = 3
        database = "db"
        sandbox = {{ enabled = true }}
        [topology.llm]
        mode = "scripted"
        transport = "anthropic_api"
        script = "script.toml"
        [[topology.mcp]]
        name = "weather"
        tools = ["forecast"]

        [simulation]
        strategy = "pct"
        pct_depth = 5
        guards = "strict"
        buggify = false

        [faults.network.partition]
        probability = 0.2
        window = ["10s", "1m"]
        targets = ["node-1"]
        params = {{ duration = 5 }}
        [faults."storage.latency"]
        probability = 0.5
        [faults.process]
        crash = 0.01

        [swarm]
        enabled = true
        include = ["network", "process.pause"]
        exclude = ["network.reset"]
        p_enabled = 0.75
        [swarm.ranges.network]
        delay = [0.1, 0.2]

        [liveness]
        heal_at = "1h"
        within = "10m"
        """,
    )
    s = load_scenario(path)
    assert (s.name, s.description, s.seeds, s.duration) == ("full", "all of it", 7, 5400.0)
    assert s.invariant_names == ("linearizability", "all_operations_issued")
    assert s.workload.params["clients"] == 2 and s.workload.params["think"] == 1.0
    assert s.topology.nodes == ("node-1", "node-2", "node-3") and s.topology.database == "db"
    assert s.topology.sandbox and s.topology.mcp[0].tools == ("forecast",)
    assert s.topology.llm.transport == "anthropic_api"
    assert s.topology.llm.policy["rules"][0]["text"] == "hello"
    assert (s.simulation.strategy, s.simulation.pct_depth, s.simulation.guards) == (
        "pct",
        5,
        "strict",
    )
    assert not s.simulation.buggify
    assert [f.type for f in s.faults] == ["network.partition", "process.crash", "storage.latency"]
    partition = s.faults[0].to_fault()
    assert partition == Fault(
        "network.partition", 0.2, 10.0, 60.0, ("node-1",), (("duration", 5.0),)
    )
    assert s.swarm.include == ("network", "process.pause") and s.swarm.p_enabled == 0.75
    assert s.swarm.ranges == (("network.delay", 0.1, 0.2),)
    assert s.heal_at == 3600.0 and s.deadline == 4200.0


def test_overrides_parse_toml_values_and_bare_strings() -> None:
    assert parse_override("a.b=0.2") == (["a", "b"], 0.2)
    assert parse_override("duration=90s") == (["duration"], "90s")
    assert parse_override('w=["0s", "1m"]') == (["w"], ["0s", "1m"])
    assert parse_override("x=true") == (["x"], True)
    with pytest.raises(UsageError, match="expected PATH=VALUE"):
        parse_override("novalue")


def test_overrides_promote_fault_shorthand_and_create_tables() -> None:
    doc = {"faults": {"storage": {"latency": 0.3}}}
    out, touched = apply_overrides(
        doc, ["faults.storage.latency.window=['0s', '5s']", "faults.network.delay=0.1"]
    )
    assert out["faults"]["storage"]["latency"] == {"probability": 0.3, "window": ["0s", "5s"]}
    assert out["faults"]["network"]["delay"] == 0.1
    assert doc == {"faults": {"storage": {"latency": 0.3}}}  # the input is not changed
    assert touched == {"faults.storage.latency.window", "faults.network.delay"}


def test_overrides_change_the_loaded_scenario() -> None:
    s = load_scenario(
        "kv_linearizability",
        [
            "workload.params.clients=2",
            "faults.storage.latency=0",
            "swarm.enabled=false",
            "duration=2m",
            "liveness.heal_at=1m",
        ],
    )
    assert s.workload.params["clients"] == 2 and s.duration == 120.0 and s.heal_at == 60.0
    assert "storage.latency" not in {f.type for f in s.faults_for(1)}
    assert s.overrides[0] == "workload.params.clients=2"


def test_an_override_error_names_the_field_and_says_so() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario("kv_linearizability", ["simulation.strategy=fifo"])
    assert info.value.field == "simulation.strategy"
    assert str(info.value).endswith("(set by --set) (allowed: random, pct)")


def test_hazards_arm_dormant_sites_and_name_the_known_ones() -> None:
    s = load_scenario("agent_lost_answers")
    assert s.simulation.hazards == ("agent:service.answer_lost",)
    assert load_scenario("agent_deletes").simulation.hazards == ()
    with pytest.raises(ScenarioError) as info:
        load_scenario("kv_linearizability", ['simulation.hazards=["agent:nope"]'])
    assert info.value.field == "simulation.hazards"
    assert "unknown dormant hazard site 'agent:nope'" in str(info.value)
    assert "agent:service.answer_lost" in str(info.value)


def test_swarm_profile_is_seeded_per_type_and_respects_selection() -> None:
    swarm = Swarm(enabled=True, include=("network", "storage.latency"), exclude=("network.reset",))
    first = swarm.profile(5)
    assert first == swarm.profile(5)
    assert {f.type for f in first} <= {
        "network.clog",
        "network.delay",
        "network.duplicate",
        "network.packet_loss",
        "network.partition",
        "network.reorder",
        "storage.latency",
    }
    profiles = {swarm.profile(seed) for seed in range(40)}
    assert len(profiles) > 30  # the seed really chooses
    # a type's draw does not depend on which other types are selected
    alone = Swarm(enabled=True, include=("storage.latency",))
    for seed in range(40):
        both = {f.type: f for f in swarm.profile(seed)}
        single = {f.type: f for f in alone.profile(seed)}
        assert single.get("storage.latency") == both.get("storage.latency")
    # explicit faults win over swarm ones; ranges bound the probability
    assert all(
        f.type != "storage.latency" for f in swarm.profile(3, frozenset({"storage.latency"}))
    )
    ranged = Swarm(
        enabled=True,
        include=("network.delay",),
        p_enabled=1.0,
        ranges=(("network.delay", 0.4, 0.5),),
    )
    assert all(0.4 <= f.probability <= 0.5 for s in range(20) for f in ranged.profile(s))
    assert Swarm().profile(1) == ()


def test_durations_parse_compound_units_and_round_trip_exactly() -> None:
    assert parse_duration("1h30m") == 5400.0
    assert parse_duration("1m30.5s") == 90.5
    assert parse_duration("250ms") == 0.25
    assert parse_duration(1e-7) == 1e-7
    for value in (5400.0, 0.1, 1e-7, 123456.789, 86400.0 * 3, 2.5e-5, 1 / 3, 7200.0 + 1e-9):
        text = format_duration(value)
        assert "e" not in text.lower()
        assert parse_duration(text) == value, (value, text)
    assert format_duration(5400.0) == "90m" and format_duration(1e-7) == "0.0000001s"
    for bad in ("1h30", "1m1m", "-1s", "0s", "1e3s", "inf"):
        with pytest.raises(UsageError):
            parse_duration(bad)


def test_window_accepts_an_open_end(tmp_path: Path) -> None:
    s = load_scenario(
        write(
            tmp_path,
            f"[workload]\n{KV}\n[faults.process.crash]\nprobability = 0.1\n"
            f'window = ["5s", "inf"]\n',
        )
    )
    assert (s.faults[0].start, s.faults[0].end) == (5.0, math.inf)


def test_shipped_scenarios_load() -> None:
    names = {p.stem for p in scenario_files()}
    assert {"kv_linearizability", "bank", "http_echo"} <= names
    for name in names:
        s = load_scenario(name)
        assert s.description and s.seeds >= 10
