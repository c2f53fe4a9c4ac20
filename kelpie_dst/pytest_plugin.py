"""The kelpie_dst pytest plugin (registered through the ``pytest11`` entry point).

* ``@pytest.mark.dst(seeds=N, **run_options)`` on an ``async def`` test runs its body inside the
  simulator once per seed (the ``dst`` fixture is the :class:`~kelpie_dst.Simulation`). On a
  sync test it only parametrizes the seeds, for use with ``dst_sim``.
* ``--dst-seeds N`` overrides the number of seeds; ``--dst-seed-start S`` the first one;
  ``DST_SEED=S`` pins a single seed.
* ``dst_sim`` is an open :class:`~kelpie_dst.SimulationHandle` (stepping), seeded with the
  test's seed, closed after the test.
* Every failure report ends with the exact line that replays its seed.
"""

from __future__ import annotations

import inspect
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from ._run import run
from ._stepping import SimulationHandle, open_simulation

DEFAULT_SEEDS = 5
_RUN_OPTIONS = frozenset(
    {
        *("strategy", "pct_depth", "guards", "guard_allow", "faults", "swarm", "max_time"),
        *("buggify", "hazards", "watchdog", "preemption"),
    }
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kelpie-dst", "deterministic simulation testing")
    group.addoption(
        "--dst-seeds",
        type=int,
        default=None,
        help=f"seeds per @pytest.mark.dst test (default: marker's seeds=, else {DEFAULT_SEEDS})",
    )
    group.addoption("--dst-seed-start", type=int, default=0, help="first seed of the range")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "dst(seeds=None, **run_options): run this test in the kelpie_dst simulator once per seed",
    )


def _seeds(config: pytest.Config, marker: pytest.Mark) -> list[int]:
    pinned = os.environ.get("DST_SEED")
    if pinned:
        try:
            return [int(pinned)]
        except ValueError:
            raise pytest.UsageError(f"DST_SEED must be an integer, got {pinned!r}") from None
    count = config.getoption("dst_seeds") or marker.kwargs.get("seeds") or DEFAULT_SEEDS
    start = config.getoption("dst_seed_start")
    return list(range(start, start + int(count)))


def _options(marker: pytest.Mark | None) -> dict[str, Any]:
    if marker is None:
        return {}
    unknown = set(marker.kwargs) - _RUN_OPTIONS - {"seeds"}
    if unknown:
        raise pytest.UsageError(
            f"@pytest.mark.dst got unknown options: {', '.join(sorted(unknown))}"
        )
    return {k: v for k, v in marker.kwargs.items() if k in _RUN_OPTIONS}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("dst")
    if marker is None:
        return
    _options(marker)  # reject unknown options at collection time
    if "dst_seed" not in metafunc.fixturenames:
        metafunc.fixturenames.append("dst_seed")
    seeds = _seeds(metafunc.config, marker)
    metafunc.parametrize("dst_seed", seeds, ids=[f"seed={s}" for s in seeds])


@pytest.fixture
def dst_seed(request: pytest.FixtureRequest) -> int:
    """The seed of this test run (``DST_SEED``, else 0, unless parametrized by ``dst``)."""
    param = getattr(request, "param", None)
    return int(param) if param is not None else int(os.environ.get("DST_SEED", "0"))


class _SimulationPlaceholder:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("the 'dst' fixture only works in async tests marked @pytest.mark.dst")


@pytest.fixture
def dst() -> Any:
    """The running Simulation, in an ``async def`` test marked ``@pytest.mark.dst``."""
    return _SimulationPlaceholder()


@pytest.fixture
def dst_sim(request: pytest.FixtureRequest, dst_seed: int) -> Iterator[SimulationHandle]:
    """An open simulation to drive step by step; closed after the test."""
    handle = open_simulation(seed=dst_seed, **_options(request.node.get_closest_marker("dst")))
    try:
        yield handle
    finally:
        handle.close()


def replay_line(item: pytest.Item, seed: int) -> str:
    """``replay: [cd ROOTDIR && ]DST_SEED=N pytest 'path::test'``: the path is relative to the
    rootdir, with a ``cd`` when pytest was started elsewhere, and the hash seed is named when
    it is pinned (with a note when it is random, since the replay may then differ)."""
    rootdir = item.config.rootpath
    try:
        path = item.path.relative_to(rootdir).as_posix()
    except ValueError:
        path = item.path.as_posix()
    parts = item.nodeid.split("::")[1:]
    if parts:
        parts[-1] = parts[-1].split("[", 1)[0]
    target = "::".join([path, *parts])
    cd = "" if Path.cwd() == rootdir else f"cd {shlex.quote(str(rootdir))} && "
    hashseed = os.environ.get("PYTHONHASHSEED", "")
    env = f"PYTHONHASHSEED={hashseed} " if hashseed not in ("", "random", "0") else ""
    line = f"replay: {cd}{env}DST_SEED={seed} pytest '{target}'"
    if hashseed in ("", "random") and sys.flags.hash_randomization:
        line += (
            "\nnote: pytest ran under a random PYTHONHASHSEED; if the replay differs, "
            "run pytest with PYTHONHASHSEED=0"
        )
    return line


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    marker = pyfuncitem.get_closest_marker("dst")
    if marker is None or not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    test = pyfuncitem.obj
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names if name != "dst_seed"}
    seed = cast(int, pyfuncitem.callspec.params["dst_seed"])

    async def main(sim: Any) -> None:
        if "dst" in kwargs:
            kwargs["dst"] = sim
        await test(**kwargs)

    result = run(main, seed=seed, **_options(marker))
    if result.failure is not None:
        report = [result.failure.describe(), result.summary_line(), replay_line(pyfuncitem, seed)]
        pytest.fail("\n".join(report), pytrace=False)
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed and isinstance(item, pytest.Function) and "dst_sim" in item.fixturenames:
        callspec = getattr(item, "callspec", None)
        seed = callspec.params.get("dst_seed") if callspec is not None else None
        if seed is None:
            seed = os.environ.get("DST_SEED", "0")
        report.sections.append(("kelpie-dst", replay_line(item, int(seed))))
    return report
