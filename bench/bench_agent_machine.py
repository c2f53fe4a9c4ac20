"""Figures for the agent server state machine (tests/hypothesis/agent_machine.py).

    .venv/bin/python bench/bench_agent_machine.py                 # ci profile, both drivers
    .venv/bin/python bench/bench_agent_machine.py --extended      # 250 examples each
    .venv/bin/python bench/bench_agent_machine.py --planted       # find and shrink the bugs

Prints, per machine: examples, steps and checks run, wall time, examples/s, how requests
ended (ok / rejected / unknown, per request kind) and whether Hypothesis raised ``Flaky``.
With ``--planted``: for each planted bug, the examples run until it was found, the size of
the first failing example and of the shrunk one, and the wall time. Run it from the
repository root (it imports ``tests.hypothesis``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from hypothesis.errors import Flaky

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kelpie_dst.hypothesis import profile_settings, run_machine
from tests.hypothesis.agent_machine import (
    AgentServerMachine,
    HttpAgentServerMachine,
    HttpQueuedEditMachine,
    OtidDroppingMachine,
    QueuedEditMachine,
)


class Tally:
    def __init__(self) -> None:
        self.steps: list[int] = []
        self.checks = 0
        self.outcomes: Counter[str] = Counter()
        self.first_failure: int | None = None  # steps of the first failing example
        self.found_after = 0  # examples run until then, that one included


def counted(base: type[AgentServerMachine], tally: Tally) -> type[AgentServerMachine]:
    class Counted(base):  # type: ignore[misc, valid-type]
        def teardown(self) -> None:
            tally.steps.append(self.rule_steps)
            tally.checks += self.checks
            tally.outcomes.update(self.tally)
            super().teardown()

        def _run_step(self, kind: str, fn: object, args: object, kwargs: object) -> object:
            try:
                return super()._run_step(kind, fn, args, kwargs)
            except AssertionError:
                self._failed()
                raise

        def step(self, fn: object, *args: object) -> object:  # the invariant's check
            try:
                return super().step(fn, *args)
            except AssertionError:
                self._failed()
                raise

        def _failed(self) -> None:
            if tally.first_failure is None:
                tally.first_failure = self.rule_steps
                tally.found_after = len(tally.steps) + 1

    Counted.__name__ = Counted.__qualname__ = base.__name__
    return Counted


def throughput(base: type[AgentServerMachine], profile: str) -> None:
    tally = Tally()
    start = time.perf_counter()
    flaky = 0
    try:
        run_machine(counted(base, tally), settings=profile_settings(profile, database=None))
    except Flaky:
        flaky = 1
    wall = time.perf_counter() - start
    examples, steps = len(tally.steps), sum(tally.steps)
    print(
        f"{base.__name__}, {profile}: {examples} examples, {steps} steps, {tally.checks} "
        f"checks in {wall:.1f}s: {examples / wall:.1f} examples/s, {steps / wall:.0f} "
        f"steps/s; Flaky: {flaky}"
    )
    kinds = sorted({key.split(".")[0] for key in tally.outcomes})
    for kind in kinds:
        ended = ", ".join(
            f"{outcome} {tally.outcomes[f'{kind}.{outcome}']}"
            for outcome in ("ok", "rejected", "unknown")
        )
        print(f"  {kind}: {ended}")


def planted(base: type[AgentServerMachine]) -> None:
    tally = Tally()
    start = time.perf_counter()
    try:
        run_machine(counted(base, tally), settings=profile_settings("ci"))
    except AssertionError as error:
        wall = time.perf_counter() - start
        notes = getattr(error, "__notes__", [])
        shrunk = [line for line in notes if line.startswith(("state.", "agents_"))]
        shrunk = [line for line in shrunk if "agrees_with_model" not in line]
        print(
            f"{base.__name__}: found after {tally.found_after} examples, in {wall:.1f}s with "
            f"shrinking ({len(tally.steps)} examples in all); the first failing example had "
            f"{tally.first_failure} steps, the shrunk one {len(shrunk) - 1}"
        )
        print("  " + str(error).splitlines()[0])
        for line in shrunk:
            print("    " + line)
        return
    print(f"{base.__name__}: NOT found in {len(tally.steps)} examples")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extended", action="store_true", help="the extended profile")
    parser.add_argument("--planted", action="store_true", help="find the planted bugs")
    parser.add_argument("--service-only", action="store_true", help="skip the HTTP driver")
    options = parser.parse_args()
    machines = [AgentServerMachine] + ([] if options.service_only else [HttpAgentServerMachine])
    if options.planted:
        bugs = [QueuedEditMachine, OtidDroppingMachine]
        for bug in bugs + ([] if options.service_only else [HttpQueuedEditMachine]):
            planted(bug)
        return
    for machine in machines:
        throughput(machine, "extended" if options.extended else "ci")


if __name__ == "__main__":
    main()
