"""The pytest plugin: seeds as parameters, DST_SEED, --dst-seeds, and replay lines."""

import pytest

pytest_plugins = ["pytester"]

SAMPLE = """
import pytest, trio

@pytest.mark.dst(seeds=4)
async def test_sleeps(dst):
    await trio.sleep(5)
    assert trio.current_time() == 5
    dst.log("slept")

@pytest.mark.dst(seeds=3)
async def test_fails_on_seed_two(dst):
    await trio.sleep(1)
    assert dst.seed != 2, "seed two is unlucky"

@pytest.mark.dst(seeds=2)
def test_stepping(dst_sim, dst_seed):
    dst_sim.advance(2)
    assert dst_sim.time == 2
    assert dst_sim.sim.seed == dst_seed
    assert dst_seed != 1
"""


def test_seeds_parametrize_and_failures_end_with_replay(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sample=SAMPLE)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=7, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_fails_on_seed_two*seed=2*",
            "*seed two is unlucky*",
            "replay: DST_SEED=2 pytest 'test_sample.py::test_fails_on_seed_two'",
        ]
    )
    result.stdout.fnmatch_lines(["*replay: DST_SEED=1 pytest 'test_sample.py::test_stepping'*"])


def test_dst_seeds_option_and_dst_seed_env(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_sample=SAMPLE)
    result = pytester.runpytest("-p", "no:cacheprovider", "--dst-seeds", "6", "-k", "sleeps")
    result.assert_outcomes(passed=6)
    monkeypatch.setenv("DST_SEED", "2")
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "fails_on_seed_two")
    result.assert_outcomes(failed=1)
    monkeypatch.setenv("DST_SEED", "7")
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "fails_on_seed_two")
    result.assert_outcomes(passed=1)


def test_unknown_marker_option_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bad="""
import pytest
@pytest.mark.dst(sedes=3)
async def test_x(dst):
    pass
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*unknown options: sedes*"])
    assert result.parseoutcomes().get("passed", 0) == 0
