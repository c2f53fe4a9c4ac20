"""The pytest plugin's replay line names the test relative to the rootdir, and says where to
run it from."""

from __future__ import annotations

import shlex

import pytest

pytest_plugins = ["pytester"]

TEST = """
import pytest, trio

@pytest.mark.dst(seeds=2)
async def test_unlucky(dst):
    await trio.sleep(1)
    assert dst.seed != 1, "seed one is unlucky"
"""


def test_replay_path_is_relative_to_the_rootdir(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\n")
    sub = pytester.mkpydir("sub")
    (sub / "test_deep.py").write_text(TEST)
    result = pytester.runpytest("-p", "no:cacheprovider", "sub/test_deep.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["replay: DST_SEED=1 pytest 'sub/test_deep.py::test_unlucky'"])
    monkeypatch.chdir(sub)  # started from a subdirectory: the line says where to run it
    result = pytester.runpytest("-p", "no:cacheprovider", "test_deep.py")
    result.assert_outcomes(passed=1, failed=1)
    root = shlex.quote(str(pytester.path))
    result.stdout.fnmatch_lines(
        [f"replay: cd {root} && DST_SEED=1 pytest 'sub/test_deep.py::test_unlucky'"]
    )


def test_a_pinned_hash_seed_is_part_of_the_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONHASHSEED", "7")
    pytester.makepyfile(test_x=TEST)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        ["replay: PYTHONHASHSEED=7 DST_SEED=1 pytest 'test_x.py::test_unlucky'"]
    )
