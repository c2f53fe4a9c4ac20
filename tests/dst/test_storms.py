"""Fault intensity (kelpie_dst._storms): per seed each domain is off, mild or in storms; storms
are windows of harsh faults; the scenario's [swarm] intensity and keep_on fields; the
nemeses' per-fault intervals."""

from __future__ import annotations

from pathlib import Path

import pytest

import kelpie_dst
from kelpie_dst import Fault
from kelpie_dst._storms import StormSpec, SwarmIntensity, register_storm, storm_specs
from kelpie_dst.scenario import load_scenario

DOMAINS = ("clock", "llm", "mcp", "network", "process", "sandbox", "storage")


def test_every_fault_domain_has_a_storm() -> None:
    import kelpie_dst.shims._mcp  # noqa: F401  (registers the MCP faults and storm lazily)

    assert tuple(storm_specs()) == DOMAINS
    for spec in storm_specs().values():
        assert all(name.startswith(spec.domain + ".") for name, _, _ in spec.faults)


def test_a_seed_draws_the_same_profile_every_time_and_seeds_differ() -> None:
    profiles = {SwarmIntensity.draw(seed, DOMAINS, 40.0).describe() for seed in range(30)}
    assert len(profiles) > 20
    assert SwarmIntensity.draw(7, DOMAINS, 40.0) == SwarmIntensity.draw(7, DOMAINS, 40.0)
    modes = [m for seed in range(200) for _, m in SwarmIntensity.draw(seed, DOMAINS, 40.0).modes]
    assert {m: round(modes.count(m) / len(modes), 1) for m in ("off", "mild", "storm")} == {
        "off": 0.2,
        "mild": 0.5,
        "storm": 0.3,
    }


def test_adding_a_domain_moves_no_other_domains_draws() -> None:
    fewer = dict(SwarmIntensity.draw(3, ("llm", "storage"), 40.0).modes)
    more = dict(SwarmIntensity.draw(3, DOMAINS, 40.0).modes)
    assert fewer == {d: more[d] for d in fewer}


def test_storms_are_windows_of_their_domains_faults_inside_the_horizon() -> None:
    for seed in range(50):
        intensity = SwarmIntensity.draw(seed, DOMAINS, 30.0)
        for storm in intensity.storms:
            assert 0 <= storm.start < storm.end <= 30.0
            assert intensity.mode(storm.domain) == "storm"
        for fault in intensity.faults({"process": ("n1",)}):
            assert any(s.start == fault.start and s.end == fault.end for s in intensity.storms)
            assert fault.nodes == (("n1",) if fault.type.startswith("process.") else ())


def test_keep_on_never_switches_a_domain_off() -> None:
    for seed in range(100):
        assert SwarmIntensity.draw(seed, DOMAINS, 30.0, ("llm",)).mode("llm") != "off"


def test_a_storm_names_only_its_own_domains_faults() -> None:
    with pytest.raises(ValueError, match="is not a fault of the domain"):
        register_storm(StormSpec("llm", "bad", (("storage.write_fail", 0.5, ()),)))


def _scenario(tmp_path: Path, swarm: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(
        'name = "s"\nduration = "30s"\n[workload]\nentry = "kelpie_dst.examples.bank:main"\n'
        "[faults.storage]\nwrite_fail = 0.1\n[faults.llm]\nrate_limited = 0.1\n" + swarm
    )
    return path


def test_intensity_drops_an_off_domains_explicit_faults_and_adds_storms(tmp_path: Path) -> None:
    scenario = load_scenario(
        str(_scenario(tmp_path, "[swarm]\nenabled = true\nintensity = true\n"))
    )
    for seed in range(40):
        intensity = scenario.intensity(seed)
        assert intensity is not None
        explicit, swarm = scenario.resolve_faults(seed)
        kinds = {f.type for f in explicit}
        assert ("storage.write_fail" in kinds) == (intensity.mode("storage") != "off")
        assert ("llm.rate_limited" in kinds) == (intensity.mode("llm") != "off")
        windowed = [f for f in swarm if f.end != float("inf")]
        assert bool(windowed) == bool(intensity.storms)
    plain = load_scenario(str(_scenario(tmp_path, "[swarm]\nenabled = true\n")))
    assert plain.intensity(1) is None


def test_keep_on_must_name_a_domain_or_type(tmp_path: Path) -> None:
    bad = _scenario(tmp_path, '[swarm]\nenabled = true\nintensity = true\nkeep_on = ["weather"]\n')
    with pytest.raises(kelpie_dst.UsageError, match=r"swarm\.keep_on\[0\].*unknown fault domain"):
        load_scenario(str(bad))


def test_a_periodic_fault_draws_at_its_own_interval() -> None:
    """A storm's process.crash with interval 1 must not make the scenario's mild crash (interval
    3) draw every second: a nemesis ticks at the smallest interval, each fault draws at its
    own."""
    fired: list[float] = []

    async def main(sim: kelpie_dst.Simulation) -> None:
        import trio

        for _ in range(9):
            await trio.sleep(1)
            if sim.faults.fires("process.crash", node="n", periodic=True) is not None:
                fired.append(sim.now())

    slow = Fault("process.crash", 1.0, params=(("interval", 3.0),))
    result = kelpie_dst.run(main, seed=1, faults=[slow])
    assert result.ok, result.failure
    assert fired == [1.0, 4.0, 7.0]
