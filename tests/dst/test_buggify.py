"""buggify: off in production; per-seed site enablement and traced firings in simulation."""

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
