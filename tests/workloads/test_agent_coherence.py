"""The coherence oracle (an idle agent's memory is the database's): the pure comparison names
hand-made differences, and turning the audit on moves no seed."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest
from attrs import evolve as attrs_evolve

from kelpie_agent.agent import Keys
from kelpie_agent.agent._codec import pack
from kelpie_agent.agent._messages import UserMessage
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.shims._storage import SimKVStore
from kelpie_dst.workloads._agent_coherence import CoherenceAudit

AGENT = "agent-00000000-0000-4000-8000-000000000001"


def _message(seq: int) -> UserMessage:
    return UserMessage(id=f"message-{seq}", date=1.0, seq=seq, content=f"hi {seq}")


def _world(stored: list[int], memory: list[int], next_seq: int) -> tuple[Any, SimKVStore]:
    keys = Keys(AGENT)
    store = SimKVStore()
    record = {"id": AGENT, "name": "a"}
    writes = [(keys.agent, pack(record))]
    writes += [(keys.message(s), pack(_message(s))) for s in stored]
    store._apply(writes)
    thread = SimpleNamespace(
        keys=keys,
        history=deque(_message(s) for s in memory),
        next_seq=next_seq,
        session=None,
        context=None,
    )
    rt = SimpleNamespace(
        agent_id=AGENT,
        agent=record,
        default=thread,
        threads={},
        archive=None,
        config=SimpleNamespace(history_window=4),
    )
    return rt, store


def _problems(stored: list[int], memory: list[int], next_seq: int) -> list[str]:
    rt, store = _world(stored, memory, next_seq)
    audit = CoherenceAudit(lambda: store)
    audit._compare(rt, store, "node/agent")
    return audit.problems


def test_a_runtime_in_step_with_the_store_passes() -> None:
    assert _problems([1, 2, 3], [1, 2, 3], 4) == []
    assert _problems([1, 2, 3, 4, 5], [2, 3, 4, 5], 6) == []  # the window of 4
    assert _problems([1], [1], 6) == []  # a reset deleted 2-5: seqs go on


def test_a_commit_not_applied_in_memory_is_named() -> None:
    problems = _problems([1, 2, 3], [1, 2], 3)
    assert any("history window" in p for p in problems)
    assert any("next seq in memory is 3" in p for p in problems)


def test_a_message_applied_but_not_stored_is_named() -> None:
    assert any("history window" in p for p in _problems([1, 2], [1, 2, 3], 4))


def test_a_changed_agent_record_is_named() -> None:
    rt, store = _world([1], [1], 2)
    rt.agent = {"id": AGENT, "name": "renamed"}
    audit = CoherenceAudit(lambda: store)
    audit._compare(rt, store, "node/agent")
    assert audit.problems == ["node/agent: the agent record in memory is not the stored one"]


def test_a_conversation_deleted_but_still_loaded_is_named() -> None:
    rt, store = _world([1], [1], 2)
    rt.threads = {"conversation-1": rt.default}
    audit = CoherenceAudit(lambda: store)
    audit._compare(rt, store, "n/a")
    assert audit.problems == ["n/a conversation conversation-1: loaded in memory, but not stored"
                              " (deleted?)"]  # fmt: skip


def test_a_context_summary_that_is_not_the_threads_message_is_named() -> None:
    from kelpie_agent.agent._window import ContextWindow

    rt, store = _world([1, 2, 3], [1, 2, 3], 4)
    keys = Keys(AGENT)
    stored = _message(2)
    for summary, named in ((stored, False), (attrs_evolve(stored, id=""), True)):
        context = ContextWindow(start_seq=2, summary=summary, text="so far")
        store._apply([(keys.context, pack(context))])
        rt.default.context = context
        audit = CoherenceAudit(lambda: store)
        audit._compare(rt, store, "n/a")
        assert bool(audit.problems) is named, audit.problems


SMALL = ["workload.params.agents=3", "workload.params.messages=2", "duration=20s"]


@pytest.mark.slow  # four runs of a few seconds each
def test_the_audit_moves_no_seed_and_repeats_its_trace() -> None:
    off = load_scenario("agent_chaos", SMALL)
    on = load_scenario("agent_chaos", [*SMALL, "workload.params.coherence=true"])
    plain, audited, again = run_scenario(off, 1), run_scenario(on, 1), run_scenario(on, 1)
    assert audited.ok, audited.result.failure and audited.result.failure.describe()
    assert audited.result.trace_hash == plain.result.trace_hash == again.result.trace_hash
    assert audited.metrics["coherence.audits"] > 10  # over HTTP the audit runs, it is not skipped
    lifecycle = run_scenario(load_scenario("agent_lifecycle", []), 0)
    assert lifecycle.ok, lifecycle.result.failure and lifecycle.result.failure.describe()
    assert lifecycle.metrics["coherence.audits"] > 10
