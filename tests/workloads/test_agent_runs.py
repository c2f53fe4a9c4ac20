"""Background runs in the agent workload: the oracle on followed runs, and a planted bug it
catches in a real run (a resumed stream that repeats the last message the client had)."""

from __future__ import annotations

from typing import Any

import pytest

from kelpie_agent.service import AgentService
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_runs import BackgroundRuns, Followed, check_followed

SMALL = ("workload.params.agents=3", "workload.params.messages=3", "workload.params.clients=2")


def _followed(frames: list[tuple[int, str, str]], stored: list[tuple[str, str]]) -> Followed:
    return Followed("otid-x", "run-1", frames, stored)


def test_the_oracle_accepts_a_faithful_follow_and_names_each_kind_of_fault() -> None:
    runs = BackgroundRuns(1.0)
    stored = [("m1", "user_message"), ("m2", "assistant_message")]
    runs.followed["a"] = _followed(
        [(1, "m1", "user_message"), (2, "m2", "assistant_message")], stored
    )
    assert check_followed(runs) == []
    runs.followed["b"] = _followed([(1, "m1", "user_message")], stored)  # one missed
    runs.followed["c"] = _followed([(2, "m2", "assistant_message")] * 2, stored[1:])  # repeated
    problems = check_followed(runs)
    assert len(problems) == 2 and all("streamed" in p for p in problems)
    runs.followed["d"] = Followed("otid-d", problems=["otid-d: seq_id 3 after 1 frames"])
    assert "otid-d: seq_id 3 after 1 frames" in check_followed(runs)


def test_the_share_of_background_sends_is_fixed_by_the_otid() -> None:
    runs = BackgroundRuns(0.25)
    otids = [f"otid-a{a}-m{m}" for a in range(1, 41) for m in range(1, 6)]
    chosen = [o for o in otids if runs.chosen(o)]
    assert chosen == [o for o in otids if BackgroundRuns(0.25).chosen(o)]
    assert 20 <= len(chosen) <= 80  # about a quarter of 200
    assert not BackgroundRuns(0.0).chosen("otid-a1-m1") and not runs.chosen(None)


@pytest.mark.slow  # one agent_chaos seed, ~6 s
def test_a_resumed_stream_that_repeats_a_message_is_caught(monkeypatch: Any) -> None:
    """Seed 2 (small agent_chaos; it passes in test_agent_workload.py) follows two background
    runs and resumes both after node crashes; with a planted follow_run that starts one
    message early on resume, the client is shown a message twice and
    background_runs_followed fails."""
    original = AgentService.follow_run

    async def repeats(self: AgentService, run_id: str, channel: Any, **kw: Any) -> None:
        kw["starting_after"] = max(0, kw.get("starting_after", 0) - 1)
        await original(self, run_id, channel, **kw)

    monkeypatch.setattr(AgentService, "follow_run", repeats)
    run = run_scenario(load_scenario("agent_chaos", list(SMALL)), 2)
    assert not run.ok
    assert "background_runs_followed" in run.result.failure.message


def test_the_client_drops_a_share_of_its_follows_after_one_to_four_frames() -> None:
    keys = [
        (f"otid-a{a}-m{m}", attempt)
        for a in range(1, 41)
        for m in range(1, 6)
        for attempt in (1, 2)
    ]
    none = BackgroundRuns(0.25)
    assert all(none._cuts(otid, attempt) == [] for otid, attempt in keys)
    half = BackgroundRuns(0.25, breaks=0.5)
    cuts = [half._cuts(otid, attempt) for otid, attempt in keys]
    assert cuts == [BackgroundRuns(0.25, 0.5)._cuts(o, a) for o, a in keys]  # by hash alone
    dropped = [c for c in cuts if c]
    assert 0.35 < len(dropped) / len(keys) < 0.65
    assert {len(c) for c in dropped} == {1, 2}
    assert {n for c in dropped for n in c} == {1, 2, 3, 4}
