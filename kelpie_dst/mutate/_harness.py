"""Running mutants: each against the scenario set until a seed catches it, then verified.

For one mutant: build its overlay, start a child that sweeps the items (seed 0 of every
scenario, then seed 1 of every scenario, ...) with ``fail_fast``, and take the first failing
item in that order as the catch. Then verify it twice, each in a fresh process: the seed
again with the mutant (its trace hash must be the same, bit for bit, and the same thing must
fire), and the seed without the mutant (it must pass, so the catch is due to the mutant).
``check`` replays recorded catches instead of sweeping. Mutants run in parallel, up to
``jobs`` children at once; when there are fewer mutants than jobs, each child's sweep gets
the spare jobs as sweep workers.
"""

from __future__ import annotations

import concurrent.futures
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..scenario._sweep import plan
from ._launch import ChildRun, Launcher
from ._overlay import overlay
from ._records import Catch, fired_label
from ._spec import Mutant, MutantSpec, MutantStale

__all__ = ["Harness", "MutantOutcome", "Summary", "Verification", "summarise"]

Event = Callable[[str, Mapping[str, Any]], None]


@attrs.frozen
class Verification:
    """The two fresh-process runs of a catch's seed."""

    replay_hash: str | None  # the trace hash of the seed re-run with the mutant
    replay_fired: str | None
    clean_fired: str | None  # what the unmutated code did with the seed ("passed")
    reproduced: bool  # same hash and same failure
    clean_passes: bool

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class MutantOutcome:
    """What happened to one mutant.

    ``status``: ``caught`` (and verified), ``survived``, ``unverified`` (the catch did not
    reproduce, or the seed fails without the mutant too), ``stale`` (no longer applies),
    ``error`` (the harness could not run it); in ``--check`` mode ``holds``, ``lost``
    (the recorded seed no longer fails that way) or ``unrecorded``.
    """

    mutant: Mutant
    status: str
    runs: int = 0  # seed-runs executed
    planned: int = 0
    wall_seconds: float = 0.0  # until the catch, or for every run
    catch: Catch | None = None
    verification: Verification | None = None
    detail: str = ""

    @property
    def good(self) -> bool:
        return self.status in ("caught", "holds")

    @property
    def runs_to_catch(self) -> int | None:
        return self.catch.runs if self.catch is not None and self.status == "caught" else None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.mutant.name,
            "category": self.mutant.category,
            "breaks": self.mutant.breaks,
            "files": list(self.mutant.files),
            "status": self.status,
            "caught": self.good,
            "runs_to_catch": self.runs_to_catch,
            "runs": self.runs,
            "planned": self.planned,
            "wall_seconds": round(self.wall_seconds, 3),
            "catch": self.catch.to_json() if self.catch is not None else None,
            "verification": self.verification.to_json() if self.verification else None,
            "detail": self.detail,
        }


@attrs.frozen
class Summary:
    mutants: int
    good: int
    runs_median: float | None
    runs_max: int | None
    runs_total: int

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def summarise(outcomes: Sequence[MutantOutcome]) -> Summary:
    runs = [o.runs_to_catch for o in outcomes if o.runs_to_catch is not None]
    return Summary(
        mutants=len(outcomes),
        good=sum(o.good for o in outcomes),
        runs_median=statistics.median(runs) if runs else None,
        runs_max=max(runs) if runs else None,
        runs_total=sum(o.runs for o in outcomes),
    )


def _modules(mutant: Mutant) -> dict[str, str]:
    return {e.module: e.file for e in mutant.edits if e.module is not None}


def interleave(
    refs: Sequence[str], overrides: Sequence[str], seeds: Iterable[int]
) -> list[list[Any]]:
    """Seed 0 of each scenario, then seed 1 of each, ... as ``[ref, overrides, seed]``."""
    work = [(ref, tuple(overrides), [seed]) for seed in seeds for ref in refs]
    return [[i.ref, list(i.overrides), i.seed] for i in plan(work)]


class Harness:
    def __init__(
        self,
        spec: MutantSpec,
        *,
        jobs: int = 1,
        timeout: float = 900.0,
        on_event: Event | None = None,
    ) -> None:
        self.spec = spec
        self.jobs = max(1, jobs)
        self.launcher = Launcher(spec.root, timeout=timeout)
        self.on_event: Event = on_event or (lambda kind, data: None)

    # -- running in parallel ---------------------------------------------------------------------
    def _each(
        self,
        mutants: Sequence[Mutant],
        one: Callable[[Mutant, int], MutantOutcome],
        jobs: int | None = None,
    ) -> list[MutantOutcome]:
        jobs = self.jobs if jobs is None else jobs
        width = min(jobs, len(mutants)) or 1
        inner = max(1, jobs // width)
        done: dict[str, MutantOutcome] = {}
        pool = concurrent.futures.ThreadPoolExecutor(width, thread_name_prefix="kelpie-mutate")
        try:
            futures = {pool.submit(self._guarded, one, m, inner): m for m in mutants}
            for future in concurrent.futures.as_completed(futures):
                outcome = future.result()
                done[outcome.mutant.name] = outcome
                self.on_event("mutant", {"outcome": outcome})
        except BaseException:
            self.launcher.stop()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return [done[m.name] for m in mutants]

    def _guarded(
        self, one: Callable[[Mutant, int], MutantOutcome], mutant: Mutant, jobs: int
    ) -> MutantOutcome:
        try:
            return one(mutant, jobs)
        except MutantStale as stale:
            return MutantOutcome(mutant, "stale", detail=str(stale))
        except (OSError, ValueError) as error:  # the overlay or a child's report
            return MutantOutcome(mutant, "error", detail=f"{type(error).__name__}: {error}")

    # -- sweeping --------------------------------------------------------------------------------
    def run(self, mutants: Sequence[Mutant], items: Sequence[list[Any]]) -> list[MutantOutcome]:
        """Sweep ``items`` (see :func:`interleave`) against each mutant."""
        return self._each(mutants, lambda m, jobs: self._sweep(m, items, jobs))

    def _sweep(self, mutant: Mutant, items: Sequence[list[Any]], jobs: int) -> MutantOutcome:
        started = time.monotonic()
        modules = _modules(mutant)
        with overlay(self.spec.root, mutant) as where:
            self.on_event("start", {"mutant": mutant.name})

            def seen(result: Mapping[str, Any]) -> None:
                self.on_event("run", {"mutant": mutant.name, "ok": result["ok"]})

            job = {"overlay": str(where), "modules": modules, "items": list(items)}
            swept = self.launcher.run(
                {**job, "jobs": jobs, "fail_fast": True}, where, on_result=seen
            )
            if swept.error is not None:
                runs, planned = len(swept.results), len(items)
                return MutantOutcome(
                    mutant, "error", runs, planned, swept.elapsed, detail=swept.error
                )
            position = {(r, tuple(o), s): i for i, (r, o, s) in enumerate(items)}
            ranked = sorted(
                swept.results,
                key=lambda r: position[(r["ref"], tuple(r["overrides"]), r["seed"])],
            )
            failing = next((r for r in ranked if not r["ok"]), None)
            if failing is None:
                elapsed = time.monotonic() - started
                return MutantOutcome(mutant, "survived", len(ranked), len(items), elapsed)
            index = position[(failing["ref"], tuple(failing["overrides"]), failing["seed"])]
            catch = Catch.from_result(mutant.name, failing, index + 1)
            wall = float(failing["received"])
            self.on_event("verify", {"mutant": mutant.name})
            replay = self.launcher.run({**job, "items": [catch.item], "fail_fast": False}, where)
        clean = self.launcher.run({**job, "overlay": None, "items": [catch.item]}, None)
        verification, problem = _verify(catch, replay, clean)
        status = "caught" if problem is None else "unverified"
        return MutantOutcome(
            mutant, status, len(ranked), len(items), wall, catch, verification, problem or ""
        )

    # -- checking recorded catches ---------------------------------------------------------------
    def check(self, mutants: Sequence[Mutant], catches: Mapping[str, Catch]) -> list[MutantOutcome]:
        """Replay each mutant's recorded catch with the mutant, and every recorded seed
        without any mutant (in one child, beside the others when there are spare jobs)."""
        recorded = [m for m in mutants if m.name in catches]

        def one(mutant: Mutant, _: int) -> MutantOutcome:
            catch = catches.get(mutant.name)
            if catch is None:
                mutant.check(self.spec.root)  # stale before unrecorded
                detail = "no recorded catch: run `kelpie-dst mutate --record` to record one"
                return MutantOutcome(mutant, "unrecorded", detail=detail)
            return self._replay(mutant, catch)

        if not recorded:
            return self._each(mutants, one)
        if self.jobs == 1:
            outcomes = self._each(mutants, one)
            clean, error = self._clean_batch(recorded, catches)
        else:
            with concurrent.futures.ThreadPoolExecutor(1) as side:
                future = side.submit(self._clean_batch, recorded, catches)
                outcomes = self._each(mutants, one, self.jobs - 1)  # Ctrl-C: stops both
                clean, error = future.result()
        return [
            _with_clean(o, catches[o.mutant.name], clean.get(o.mutant.name), error)
            if o.status == "holds"
            else o
            for o in outcomes
        ]

    def _replay(self, mutant: Mutant, catch: Catch) -> MutantOutcome:
        started = time.monotonic()
        job = {"modules": _modules(mutant), "items": [catch.item], "fail_fast": False}
        with overlay(self.spec.root, mutant) as where:
            run = self.launcher.run({**job, "overlay": str(where)}, where)
        elapsed = time.monotonic() - started
        if run.error is not None or not run.results:
            detail = run.error or "the child reported no result"
            return MutantOutcome(mutant, "error", 0, 1, elapsed, catch, None, detail)
        result = run.results[0]
        fired = fired_label(result["failure_class"], str(result["message"]))
        found = Catch.from_result(mutant.name, result, catch.runs)
        if fired != catch.fired:
            what = "passes now" if fired == "passed" else f"fires {fired!r}"
            detail = f"{catch.scenario} seed {catch.seed} {what}; recorded: {catch.fired!r}"
            return MutantOutcome(mutant, "lost", 1, 1, elapsed, found, None, detail)
        return MutantOutcome(mutant, "holds", 1, 1, elapsed, found)

    def _clean_batch(
        self, mutants: Sequence[Mutant], catches: Mapping[str, Catch]
    ) -> tuple[dict[str, dict[str, Any]], str | None]:
        """Every recorded seed on the unmutated code, in one child (they must all pass)."""
        modules: dict[str, str] = {}
        for mutant in mutants:
            modules.update(_modules(mutant))
        items = [catches[m.name].item for m in mutants]
        job = {"overlay": None, "modules": modules, "items": items, "fail_fast": False}
        run = self.launcher.run(job, None)
        by_item = {(r["ref"], tuple(r["overrides"]), r["seed"]): r for r in run.results}
        found: dict[str, dict[str, Any]] = {}
        for mutant in mutants:
            ref, overrides, seed = catches[mutant.name].item
            result = by_item.get((ref, tuple(overrides), seed))
            if result is not None:
                found[mutant.name] = result
        return found, run.error


def _with_clean(
    outcome: MutantOutcome, catch: Catch, clean: Mapping[str, Any] | None, error: str | None
) -> MutantOutcome:
    if clean is None:
        why = error or "no result"
        return attrs.evolve(outcome, status="error", detail=f"the unmutated run failed: {why}")
    fired = fired_label(clean["failure_class"], str(clean["message"]))
    if fired != "passed":
        detail = (
            f"{catch.scenario} seed {catch.seed} fails without the mutant too ({fired}): "
            "the record proves nothing"
        )
        return attrs.evolve(outcome, status="lost", detail=detail)
    return outcome


def _verify(
    catch: Catch, replay: ChildRun, clean: ChildRun
) -> tuple[Verification | None, str | None]:
    if replay.error is not None or not replay.results:
        return None, f"re-running the catch failed: {replay.error or 'no result'}"
    if clean.error is not None or not clean.results:
        return None, f"running the seed without the mutant failed: {clean.error or 'no result'}"
    again, base = replay.results[0], clean.results[0]
    again_fired = fired_label(again["failure_class"], str(again["message"]))
    clean_fired = fired_label(base["failure_class"], str(base["message"]))
    reproduced = again["trace_hash"] == catch.trace_hash and again_fired == catch.fired
    verification = Verification(
        again["trace_hash"], again_fired, clean_fired, reproduced, clean_fired == "passed"
    )
    if not reproduced:
        return verification, (
            f"the catch did not reproduce in a fresh process: trace hash {again['trace_hash']} "
            f"({again_fired}) against {catch.trace_hash} ({catch.fired}); the failure may "
            "depend on seeds run before it in the same process"
        )
    if clean_fired != "passed":
        return verification, f"the seed fails without the mutant too ({clean_fired})"
    return verification, None


def scenario_set(spec: MutantSpec, chosen: Sequence[str]) -> list[str]:
    """The scenarios to sweep: ``chosen``, else the spec's, else every scenario on the search
    path whose workload is the spec's ``defaults.workload`` (by name, sorted)."""
    if chosen:
        return list(chosen)
    if spec.defaults.scenarios:
        return [_relative(spec, s) for s in spec.defaults.scenarios]
    import tomllib

    from ..scenario import scenario_files

    names = []
    for path in scenario_files():
        try:
            data = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError):
            continue
        workload = data.get("workload")
        if isinstance(workload, dict) and workload.get("entry") == spec.defaults.workload:
            names.append(path.stem)
    return names


def _relative(spec: MutantSpec, ref: str) -> str:
    """A scenario file named in the spec is relative to the spec's directory."""
    if ref.endswith(".toml") and not Path(ref).is_absolute():
        return str(spec.path.parent / ref)
    return ref
