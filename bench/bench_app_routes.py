"""The cost of FastAPI's included routers against flat routes, side by side in one process.

    .venv/bin/python bench/bench_app_routes.py [--seeds 4] [--rounds 3] [--scenario agent_chaos]

``kelpie_agent.api`` adds its routes flat (``_routing.routes``, Dspeed-9). This bench builds
the app the old way too (every router ``include_router``-ed, as FastAPI documents), and runs
the same seeds over HTTP with each app in turn, alternating, so that the load on a shared
machine hits both alike. Per seed it keeps the minimum CPU over the rounds; it prints the sums
and their ratio, and checks that both apps give the same trace hashes.
"""

from __future__ import annotations

import argparse
import gc
import os
import time

from fastapi import FastAPI

from kelpie_agent.api import _app
from kelpie_dst.scenario import load_scenario, run_scenario


def _included(version: str, auth: bool) -> FastAPI:
    """``_app._build`` as it was: each router included, not flattened."""
    original = _app.routes

    def include(app: FastAPI, routers: list, dependencies: list) -> None:  # type: ignore[type-arg]
        for router in routers:
            app.include_router(router, dependencies=dependencies)

    _app.routes = include  # type: ignore[assignment]
    try:
        return _app._build(version, auth)
    finally:
        _app.routes = original


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", default="agent_chaos")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("PYTHONHASHSEED", "0")
    scenario = load_scenario(args.scenario, ())
    key = (_app.__version__, False)
    apps = {"flat": _app.shared_app(), "included": _included(*key)}
    cpu: dict[tuple[str, int], float] = {}
    hashes: dict[tuple[str, int], str] = {}
    for app in apps.values():  # warm-up: FastAPI's first-request set-up, per app
        _app._SHARED[key] = app
        run_scenario(scenario, args.seeds)
    load = os.getloadavg()[0]
    for _ in range(args.rounds):
        for seed in range(args.seeds):
            for name, app in apps.items():
                _app._SHARED[key] = app
                gc.collect()
                start = time.process_time()
                run = run_scenario(scenario, seed)
                spent = time.process_time() - start
                cpu[name, seed] = min(cpu.get((name, seed), spent), spent)
                hashes[name, seed] = run.result.trace_hash
    _app._SHARED[key] = apps["flat"]
    total = {name: sum(cpu[name, s] for s in range(args.seeds)) for name in apps}
    print(
        f"{args.scenario} over HTTP, seeds 0-{args.seeds - 1}, min of {args.rounds} rounds; "
        f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    for name in apps:
        print(f"  {name:<9} {total[name] / args.seeds * 1000:7.1f} ms CPU per seed")
    print(f"  flat / included: {total['flat'] / total['included']:.3f}")
    same = all(hashes["flat", s] == hashes["included", s] for s in range(args.seeds))
    print(f"  trace hashes equal: {same}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
