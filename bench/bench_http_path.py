"""Each speed change since Dspeed-13 against the code without it, in one process.

    .venv/bin/python bench/bench_http_path.py [--seeds 4] [--rounds 3] [--scenario agent_chaos]
                                              [CHANGE ...]

For each change named (all by default), the same seeds of a scenario (agent_chaos, over HTTP,
by default) run with the change on and turned off (the code it replaced, restored in this
process), alternating seed by seed, so that the load of a shared machine hits both alike. Per
seed it keeps the minimum CPU over the rounds and prints the sums, their ratio and the load
average; both ways must give the same trace hashes (a speed change that moves a trace is not
one).
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import httpx

from kelpie_dst.scenario import load_scenario, run_scenario


@contextmanager
def _no_route_index() -> Iterator[None]:
    """Dspeed-13: the router tries every route in turn."""
    from kelpie_agent.api import _app
    from kelpie_agent.api._routing import IndexedRoutes

    routers = [app.router for app in _app._SHARED.values()]
    saved = [router.middleware_stack for router in routers]
    for router, stack in zip(routers, saved, strict=True):
        if isinstance(stack, IndexedRoutes):
            router.middleware_stack = stack.dispatch
    try:
        yield
    finally:
        for router, stack in zip(routers, saved, strict=True):
            router.middleware_stack = stack


@contextmanager
def _generator_deadlines() -> Iterator[None]:
    """Dspeed-14: trio's own generator-based deadline bookkeeping in every cancel scope."""
    from kelpie_dst import _trio_speed

    saved = _trio_speed._USABLE[:]
    _trio_speed._USABLE[:] = [False]
    try:
        yield
    finally:
        _trio_speed._USABLE[:] = saved


@contextmanager
def _parsing_cookies() -> Iterator[None]:
    """Dspeed-15: the workload's httpx client hands every response to ``http.cookiejar``."""
    from kelpie_dst.net import _cookies

    saved = _cookies.QuietCookies.extract_cookies
    _cookies.QuietCookies.extract_cookies = httpx.Cookies.extract_cookies  # type: ignore[method-assign]
    try:
        yield
    finally:
        _cookies.QuietCookies.extract_cookies = saved  # type: ignore[method-assign]


@contextmanager
def _every_poll() -> Iterator[None]:
    """Dspeed-16: every guest tick makes trio's zero-timeout ``epoll_wait`` system call."""
    from kelpie_dst import _trio_polls

    saved = _trio_polls._USABLE[:]
    _trio_polls._USABLE[:] = [False]
    try:
        yield
    finally:
        _trio_polls._USABLE[:] = saved


@contextmanager
def _every_crc() -> Iterator[None]:
    """Dspeed-18: every read of a simulated store verifies its frame's CRC again."""
    from kelpie_agent.storage._checksum import unframe
    from kelpie_dst.shims._storage import SimKVStore

    saved = SimKVStore._unframe

    def again(self: SimKVStore, key: bytes, framed: bytes) -> bytes:
        return unframe(key, framed)

    SimKVStore._unframe = again  # type: ignore[method-assign]
    try:
        yield
    finally:
        SimKVStore._unframe = saved  # type: ignore[method-assign]


@contextmanager
def _sqlite_on_disk() -> Iterator[None]:
    """Dspeed-17: a run's SQLite files in the temp directory, the view's copy with fsyncs."""
    from kelpie_dst.shims import _sqlite_disk

    saved = _sqlite_disk.RAM_DIRECTORY, _sqlite_disk.VIEW_SYNCHRONOUS
    _sqlite_disk.RAM_DIRECTORY, _sqlite_disk.VIEW_SYNCHRONOUS = "/nonexistent", None
    try:
        yield
    finally:
        _sqlite_disk.RAM_DIRECTORY, _sqlite_disk.VIEW_SYNCHRONOUS = saved


@contextmanager
def _before_session_13() -> Iterator[None]:
    """Dspeed-16 to 18 together, all turned off."""
    with _every_poll(), _sqlite_on_disk(), _every_crc():
        yield


CHANGES: dict[str, Callable[[], AbstractContextManager[None]]] = {
    "route-index": _no_route_index,
    "trio-deadlines": _generator_deadlines,
    "quiet-cookies": _parsing_cookies,
    "quiet-polls": _every_poll,
    "verified-frames": _every_crc,
    "sqlite-io": _sqlite_on_disk,
    "session-13": _before_session_13,
}


def _seed(scenario: object, seed: int) -> tuple[float, str]:
    gc.collect()
    start = time.process_time()
    run = run_scenario(scenario, seed)  # type: ignore[arg-type]
    return time.process_time() - start, run.result.trace_hash


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("changes", nargs="*", default=list(CHANGES))
    parser.add_argument("--scenario", default="agent_chaos")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("PYTHONHASHSEED", "0")
    scenario = load_scenario(args.scenario, ())
    run_scenario(scenario, args.seeds)  # warm-up: imports, the app, first-request set-up
    for name in args.changes:
        with CHANGES[name]():
            run_scenario(scenario, args.seeds)
        load = os.getloadavg()[0]
        cpu: dict[tuple[bool, int], float] = {}
        hashes: dict[tuple[bool, int], str] = {}
        for _ in range(args.rounds):
            for seed in range(args.seeds):
                for on in (True, False):
                    if on:
                        spent, hashes[on, seed] = _seed(scenario, seed)
                    else:
                        with CHANGES[name]():
                            spent, hashes[on, seed] = _seed(scenario, seed)
                    cpu[on, seed] = min(cpu.get((on, seed), spent), spent)
        with_it = sum(cpu[True, s] for s in range(args.seeds)) / args.seeds
        without = sum(cpu[False, s] for s in range(args.seeds)) / args.seeds
        same = all(hashes[True, s] == hashes[False, s] for s in range(args.seeds))
        print(
            f"{name}: {args.scenario}, seeds 0-{args.seeds - 1}, min of {args.rounds} "
            f"rounds, load average {load:.2f} before, {os.getloadavg()[0]:.2f} after\n"
            f"  with {with_it * 1000:7.1f} ms, without {without * 1000:7.1f} ms CPU per seed: "
            f"{with_it / without:.3f}x; trace hashes equal: {same}",
            flush=True,
        )
        if not same:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
