"""AgentService on three nodes sharing one database, under process crashes, partitions from
the database, every storage fault and clock skew within the lease margin (strict guards; 3
seeds by default, ``--dst-seeds 200`` for more).

Agents are created and messages sent (whole or streamed) through random nodes, retrying on
another node with the same otid after a retryable error. Invariants, after faults heal:

* no acknowledged message is lost: its input and every response message are in the agent's
  history, exactly once, under the run the client was told; no input ever ran twice;
* single activation: an agent's activations (from the dispatchers' observer events) never
  overlap;
* no mixing: an agent's history holds only its own inputs, runs and replies;
* liveness: every request completes within a bound after ``Simulation.heal()``;
* the agent index lists exactly the agents that exist (``repair`` finds nothing to fix).

A canary runs the same workload with the service's otid deduplication switched off: the
checkers find messages that ran twice.
"""

from __future__ import annotations

from typing import Any

import pytest

import kelpie_agent.agent._session
import kelpie_dst

from ..agent.harness import check_history
from . import chaos


def _run(seed: int) -> tuple[kelpie_dst.RunResult, dict[str, Any]]:
    out: dict[str, Any] = {}

    async def main(sim: kelpie_dst.Simulation) -> None:
        out.update(await chaos.service_chaos(sim))
        kv = kelpie_dst.open_kv(sim.current_node(), host=out["clients"].cluster.db)  # type: ignore[arg-type]
        for agent_id in out["histories"]:
            await check_history(kv, agent_id)  # well-formed: seqs, tool calls answered once

    result = kelpie_dst.run(main, seed=seed, faults=chaos.chaos_faults(), guards="strict")
    replay = f"seed={seed}; replay: DST_SEED={seed} pytest {__file__}"
    assert result.ok, f"{replay}\n{result.failure and result.failure.describe()}"
    return result, out


@pytest.mark.dst(seeds=3)
def test_no_acknowledged_message_lost_single_activation_no_mixing_and_liveness_under_chaos(
    dst_seed: int,
) -> None:
    result, out = _run(dst_seed)
    clients = out["clients"]
    assert not out["problems"], f"seed={dst_seed}:\n" + "\n".join(out["problems"])
    assert not clients.fatal, clients.fatal
    assert len(clients.acks) == 4 * 8  # liveness: every message acknowledged after the heal
    # The index lists exactly the agents that exist (a create retried after its outcome was
    # lost may have made an extra one), newest first, each once.
    assert set(clients.agents) <= set(out["listed"]) == set(out["stored"])
    assert out["listed_created"] == sorted(out["listed_created"], reverse=True)
    report = out["repair"]
    assert (report.entries_added, report.entries_removed, report.orphans_swept) == (0, 0, 0)
    assert report.agents == len(out["listed"]) == len(set(out["listed"]))
    assert sum(result.faults_fired.values()) > 0


def test_the_checkers_catch_messages_run_twice_without_otid_deduplication(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Canary: without the agent core's otid records, retries whose first attempt's outcome
    was lost start a second run."""

    async def no_replay(rt: Any, otid: str | None) -> None:
        return None

    monkeypatch.setattr(kelpie_agent.agent._session, "find_retried_run", no_replay)
    caught = []
    for seed in range(10):
        _, out = _run(seed)
        if any("ran 2 times" in p for p in out["problems"]):
            caught.append(seed)
    assert len(caught) >= 2, caught
