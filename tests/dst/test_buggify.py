"""buggify: off in production; per-seed site enablement and traced firings in simulation."""

import pytest

import kelpie_dst
from kelpie_dst import buggify


def test_outside_a_simulation_buggify_is_false() -> None:
    assert not any(buggify("site", 1.0) for _ in range(100))


def test_sites_are_enabled_per_seed_with_probability_one_quarter() -> None:
    async def main() -> list[bool]:
        return [buggify(f"site{i}", 1.0) for i in range(400)]

    fired = kelpie_dst.run(main, seed=1).value
    assert isinstance(fired, list)
    assert 60 < sum(fired) < 140  # ~25% of 400 sites enabled, each firing with p=1
    assert kelpie_dst.run(main, seed=1).value == fired
    assert kelpie_dst.run(main, seed=2).value != fired


def test_enabled_site_fires_with_its_probability_and_is_traced() -> None:
    async def main(sim: kelpie_dst.Simulation) -> tuple[str, int]:
        site = next(f"s{i}" for i in range(100) if sim.buggify.site_enabled(f"s{i}"))
        return site, sum(buggify(site, 0.5) for _ in range(1000))

    result = kelpie_dst.run(main, seed=3)
    _site, fired = result.value  # type: ignore[misc]
    assert 420 < fired < 580
    assert result.events > fired


def test_buggify_can_be_switched_off() -> None:
    async def main() -> int:
        return sum(buggify(f"site{i}", 1.0) for i in range(100))

    assert kelpie_dst.run(main, buggify=False).value == 0


DORMANT = "agent:service.answer_lost"


def test_a_dormant_site_is_silent_unless_armed() -> None:
    """Unarmed, a dormant site never fires and leaves nothing in the trace (no event, no draw),
    so adding one to code every scenario runs moves no trace; armed, it is enabled for every
    seed and fires with its probability."""

    async def with_site() -> list[bool]:
        return [buggify(DORMANT, 0.5) for _ in range(200)] + [buggify("other", 0.5)]

    async def without_site() -> list[bool]:
        return [buggify("other", 0.5)]

    for seed in range(5):
        quiet = kelpie_dst.run(with_site, seed=seed, record=True)
        bare = kelpie_dst.run(without_site, seed=seed)
        assert quiet.value == [False] * 200 + bare.value  # type: ignore[operator]
        assert (quiet.trace_hash, quiet.events) == (bare.trace_hash, bare.events)
        armed = kelpie_dst.run(with_site, seed=seed, hazards=[DORMANT])
        assert isinstance(armed.value, list)
        assert 60 < sum(armed.value[:200]) < 140  # enabled whatever the seed, p=0.5 a call
        assert armed.buggify_fired[DORMANT] == sum(armed.value[:200])
        assert armed.trace_hash != bare.trace_hash


def test_only_dormant_sites_can_be_armed() -> None:
    async def main() -> None:
        return None

    with pytest.raises(kelpie_dst.UsageError, match="unknown dormant hazard site 'agent:x'"):
        kelpie_dst.run(main, hazards=["agent:x"])
