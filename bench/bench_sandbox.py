"""What isolation costs per command: ProcessSandbox in namespaces against the plain subprocess
path (``isolation="none"``, the baseline), side by side.

Rows, each the median and the 90th percentile of ``--runs`` commands on one booted sandbox:

* ``exec("true")``: bubblewrap, the supervisor and ``/bin/sh``, against the rlimit wrapper
  and ``/bin/sh``;
* ``exec_python("pass")``: the same with a Python interpreter as the command;
* ``boot()``: a new sandbox, its directory and its probe command;
* ``exec("true")`` with a network allow-list (the filtering proxy and the forwarder start too).

The two paths run interleaved, command by command, so machine load hits both alike.
Usage: ``python bench/bench_sandbox.py [--runs 30]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable

import trio

from kelpie_agent.sandbox import ProcessSandbox, SandboxNetwork

Step = Callable[[ProcessSandbox], Awaitable[object]]


def _row(name: str, isolated: list[float], plain: list[float]) -> None:
    def fmt(values: list[float]) -> str:
        ordered = sorted(values)
        p90 = ordered[int(0.9 * (len(ordered) - 1))]
        return f"{statistics.median(values) * 1000:7.1f} ms (p90 {p90 * 1000:6.1f})"

    ratio = statistics.median(isolated) / statistics.median(plain)
    print(f"{name:<34} {fmt(isolated)}   {fmt(plain)}   {ratio:4.1f}x")


async def _time(sandbox: ProcessSandbox, step: Step) -> float:
    start = time.perf_counter()
    await step(sandbox)
    return time.perf_counter() - start


async def main(runs: int) -> None:
    parent = tempfile.mkdtemp(prefix="bench-sandbox-")
    jailed = ProcessSandbox(parent_dir=parent)
    plain = ProcessSandbox(parent_dir=parent, isolation="none")
    networked = ProcessSandbox(parent_dir=parent, network=SandboxNetwork(["example.com"]))
    for sandbox in (jailed, plain, networked):
        await sandbox.boot()
    print(f"{'':<34} {'namespaces':<26}   {'isolation=none':<26}   ratio")
    steps: list[tuple[str, Step]] = [
        ('exec("true")', lambda sb: sb.exec("true")),
        ('exec_python("pass")', lambda sb: sb.exec_python("pass")),
    ]
    for name, step in steps:
        a, b = [], []
        for _ in range(runs):
            a.append(await _time(jailed, step))
            b.append(await _time(plain, step))
        _row(name, a, b)
    boots_a, boots_b = [], []
    for _ in range(max(5, runs // 3)):
        for isolation, into in (("namespaces", boots_a), ("none", boots_b)):
            fresh = ProcessSandbox(parent_dir=parent, isolation=isolation)
            start = time.perf_counter()
            await fresh.boot()
            into.append(time.perf_counter() - start)
            await fresh.stop()
    _row("boot()", boots_a, boots_b)
    a, b = [], []
    for _ in range(runs):
        a.append(await _time(networked, lambda sb: sb.exec("true")))
        b.append(await _time(plain, lambda sb: sb.exec("true")))
    _row('exec("true"), with an allow-list', a, b)
    for sandbox in (jailed, plain, networked):
        await sandbox.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    trio.run(main, parser.parse_args().runs)
