"""Agent scenario throughput: seeds per minute, virtual/wall, and agent turns per wall second,
with the workload's own figures summed over the sweep (retries, handoffs, tool calls, ...).

    .venv/bin/python bench/bench_agent_chaos.py [SCENARIO] [SEEDS] [JOBS...]

Defaults: agent_chaos, 40 seeds, jobs 1 and 2. The rates are over elapsed wall time, worker
start-up included (each worker imports kelpie_agent and the MCP SDK once, about 2 s). Run it on
an idle machine: other load changes the figures a lot.
"""

from __future__ import annotations

import os
import sys
from collections import Counter

from kelpie_dst.scenario._sweep import plan, run_items, totals

SHOWN = (
    "messages.acked",
    "requests.retries",
    "requests.timeouts",
    "actor.acquired",
    "actor.handoff",
    "actor.lease_lost",
    "stop.llm_api_error",
    "tools.failed",
)


def main() -> None:
    os.environ.setdefault("PYTHONHASHSEED", "0")
    scenario = sys.argv[1] if len(sys.argv) > 1 else "agent_chaos"
    seeds = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    jobs_list = [int(j) for j in sys.argv[3:]] or [1, 2]
    items = plan([(scenario, (), range(seeds))])
    print(f"{scenario}: {seeds} seeds on {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    for jobs in jobs_list:
        outcome = run_items(items, jobs=jobs)
        t = totals(outcome.results)
        sums: Counter[str] = Counter()
        for result in outcome.results:
            sums.update(dict(result.metrics))
        elapsed = outcome.elapsed
        print(
            f"jobs={jobs}: {elapsed:6.1f}s  {len(outcome.results) * 60 / elapsed:6.0f} seeds/min  "
            f"{sums['messages.acked'] / elapsed:6.1f} turns/s  "
            f"{t['events'] / elapsed:7,.0f} events/s  "
            f"virtual/wall {t['virtual_seconds'] / elapsed:4.0f}x  failures {t['failures']}"
        )
        tools = sorted((k, v) for k, v in sums.items() if k.startswith("tools."))
        print("  totals: " + ", ".join(f"{k}={sums[k]:g}" for k in SHOWN))
        print("  tools:  " + ", ".join(f"{k[6:]}={v:g}" for k, v in tools))


if __name__ == "__main__":
    main()
