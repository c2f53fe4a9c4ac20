"""Machine-readable sweep reports: JSON (``--json``) and JUnit XML (``--junit``)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from ._sweep import SweepOutcome, totals

__all__ = ["summary", "write_json", "write_junit"]

JSON_VERSION = 1


def summary(outcome: SweepOutcome) -> dict[str, Any]:
    """Totals plus rates: seeds per minute, events per second and virtual/wall, over the
    sweep's elapsed wall time (all jobs together)."""
    data = dict(totals(outcome.results))
    elapsed = max(outcome.elapsed, 1e-9)
    data.update(
        planned=outcome.planned,
        stopped=outcome.stopped,
        exit_code=outcome.exit_code,
        wall_seconds=outcome.elapsed,
        seeds_per_minute=data["seeds_run"] * 60.0 / elapsed,
        events_per_second=data["events"] / elapsed,
        virtual_to_wall=data["virtual_seconds"] / elapsed,
    )
    return data


def write_json(path: str | Path, outcome: SweepOutcome, meta: dict[str, Any]) -> None:
    document = {
        "version": JSON_VERSION,
        **meta,
        "summary": summary(outcome),
        "results": [r.to_json() for r in outcome.results],
    }
    Path(path).write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")


def write_junit(path: str | Path, outcome: SweepOutcome) -> None:
    """One ``<testsuite>`` per scenario, one ``<testcase>`` per seed; failures carry the
    class, the message, the details and the replay line."""
    suites = ET.Element("testsuites", name="kelpie-dst sweep")
    by_scenario: dict[str, list[Any]] = {}
    for result in outcome.results:
        by_scenario.setdefault(result.scenario, []).append(result)
    total_tests = total_failures = 0
    total_time = 0.0
    for name, results in by_scenario.items():
        failures = [r for r in results if not r.ok]
        time_sum = sum(r.wall_seconds for r in results)
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=name,
            tests=str(len(results)),
            failures=str(len(failures)),
            errors="0",
            skipped="0",
            time=f"{time_sum:.3f}",
        )
        for r in results:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=name,
                name=f"seed={r.seed}" + (f" [{' '.join(r.overrides)}]" if r.overrides else ""),
                time=f"{r.wall_seconds:.3f}",
            )
            if not r.ok:
                failure = ET.SubElement(
                    case, "failure", type=r.failure_class or "failure", message=r.message
                )
                failure.text = "\n".join(
                    part for part in (r.message, r.details, r.replay_line()) if part
                )
        total_tests += len(results)
        total_failures += len(failures)
        total_time += time_sum
    suites.set("tests", str(total_tests))
    suites.set("failures", str(total_failures))
    suites.set("time", f"{total_time:.3f}")
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
