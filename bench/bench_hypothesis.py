"""Figures for kelpie_dst.hypothesis on the toy service (kelpie_dst/examples/toy_kv_service.py).

Run with ``.venv/bin/python bench/bench_hypothesis.py`` (add ``--extended`` for the extended
profile's throughput). Prints:

* examples/s and steps/s of the ``ci`` profile on the fixed service (all examples pass);
* finding and shrinking the planted bug: wall time, examples run, the size of the first
  failing example and of the shrunk one, with the white-box invariant and without it;
* whether the shrunk example replays with the same trace hash from the example database and
  from the printed ``KELPIE_HYPOTHESIS_REPRODUCE`` value.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time

from hypothesis import Phase
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.reporting import with_reporter

from kelpie_dst.examples.toy_kv_service import FixedToyKVMachine, ToyKVMachine
from kelpie_dst.hypothesis import REPRODUCE_ENV, invariant, profile_settings, run_machine


class Tally:
    def __init__(self) -> None:
        self.examples: list[int] = []
        self.first_failure: int | None = None


def counted(base: type[ToyKVMachine], tally: Tally, *, black_box: bool = False) -> type:
    class Counted(base):  # type: ignore[misc, valid-type]
        def teardown(self) -> None:
            super().teardown()
            tally.examples.append(self.rule_steps)

        def _run_step(self, kind: str, fn: object, args: object, kwargs: object) -> object:
            try:
                return super()._run_step(kind, fn, args, kwargs)
            except AssertionError:
                if tally.first_failure is None:
                    tally.first_failure = self.rule_steps
                raise

        if black_box:

            def cache_agrees_with_disk(self) -> None:  # no longer an invariant
                pass

        else:

            @invariant()
            def cache_agrees_with_disk(self) -> None:
                try:
                    super().cache_agrees_with_disk()
                except AssertionError:
                    if tally.first_failure is None:
                        tally.first_failure = self.rule_steps
                    raise

    Counted.__name__ = Counted.__qualname__ = base.__name__ + ("BlackBox" if black_box else "")
    return Counted


def throughput(profile: str) -> None:
    tally = Tally()
    machine = counted(FixedToyKVMachine, tally)
    start = time.perf_counter()
    run_machine(machine, settings=profile_settings(profile, database=None))
    wall = time.perf_counter() - start
    steps = sum(tally.examples)
    print(
        f"{profile} profile, fixed service: {len(tally.examples)} examples, {steps} steps in "
        f"{wall:.2f}s: {len(tally.examples) / wall:.1f} examples/s, {steps / wall:.0f} steps/s"
    )


def find_and_shrink(black_box: bool) -> str | None:
    tally = Tally()
    machine = counted(ToyKVMachine, tally, black_box=black_box)
    start = time.perf_counter()
    try:
        run_machine(machine, settings=profile_settings("ci", max_examples=200))
    except AssertionError as error:
        wall = time.perf_counter() - start
        text = "\n".join(error.__notes__)
        shrunk = re.search(r"rule_steps=(\d+)", text)
        label = "black-box checks only" if black_box else "with the white-box invariant"
        print(
            f"planted bug, {label}: found and shrunk in {wall:.2f}s over {len(tally.examples)} "
            f"examples; first failing example {tally.first_failure} steps, shrunk to "
            f"{shrunk[1] if shrunk else '?'} steps"
        )
        return text
    print("planted bug NOT found")
    return None


def trace_hash(text: str) -> str:
    found = re.search(r"trace_hash=([0-9a-f]{32})", text)
    return found[1] if found else "?"


def failure_notes(**overrides: object) -> str | None:
    """What Hypothesis printed about the failure (in notes, or reported when replaying)."""
    reported: list[str] = []
    try:
        with with_reporter(reported.append):
            run_machine(ToyKVMachine, settings=profile_settings("ci", **overrides))
    except AssertionError as error:
        return "\n".join([*getattr(error, "__notes__", []), *map(str, reported)])
    return None


def replays() -> None:
    with tempfile.TemporaryDirectory() as directory:
        database = DirectoryBasedExampleDatabase(directory)
        options = {"derandomize": False, "database": database, "max_examples": 300}
        first = failure_notes(**options, phases=[Phase.generate, Phase.shrink])
        again = failure_notes(**options, phases=[Phase.reuse])
    if first is None or again is None:
        print("database replay: the bug was not found, or not replayed")
        return
    print(f"database replay: trace hashes equal: {trace_hash(first) == trace_hash(again)}")
    blob = re.search(rf"{REPRODUCE_ENV}='([^']+)'", first)
    assert blob is not None
    os.environ[REPRODUCE_ENV] = blob[1]
    try:
        pinned = failure_notes()
    finally:
        del os.environ[REPRODUCE_ENV]
    same = pinned is not None and trace_hash(pinned) == trace_hash(first)
    print(f"{REPRODUCE_ENV} replay: trace hashes equal: {same} ({trace_hash(first)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extended", action="store_true", help="also time the extended profile")
    args = parser.parse_args()
    throughput("ci")
    if args.extended:
        throughput("extended")
    find_and_shrink(black_box=False)
    find_and_shrink(black_box=True)
    replays()


if __name__ == "__main__":
    main()
