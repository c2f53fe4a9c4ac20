"""Recovery: a reactivated agent finishes every run a crash interrupted, before it serves.

A run is ``running`` in storage from its first checkpoint until it ends (``completed``,
``failed`` or ``cancelled``). When the node running it crashes, loses its lease or hands the
agent over mid-run, the record stays ``running``: nobody is executing it any more. The
property a user states is that such a run does not stay ``running`` forever, nor until
somebody happens to send to its thread again: *whoever activates the agent next finishes
it*, for the agent's own history and for each of its conversations alike. Kelpie resumes
them while activating (``AgentActor.activate``), so the property is sharp:

* when an activation of agent X **acquires** X's lease, every run of X whose last recorded
  status is ``running`` was left by an earlier activation (one lease holder at a time);
* by the time that activation reports **activated**, each such run has a terminal status
  recorded. An activation that cannot finish them (storage gave up) must fail, not serve.

The facts come from the workload's journal, in commit order: each write of a run record
(its status, agent and thread), the dispatchers' ``actor.acquired``/``actor.activated``
events, and node crashes (an activation that died before ``activated`` is exempt: the next
one inherits the duty). No request is made and nothing is drawn, so enabling the invariant
shifts no seed. :func:`check_recovery` is the pure checker
(``tests/workloads/test_agent_recovery.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from ._agent_checks import Observed
from ._run_record_checks import expected_status

__all__ = [
    "TERMINAL",
    "RunWrite",
    "check_clean_ends",
    "check_recovery",
    "check_run_statuses",
    "run_write",
]

TERMINAL = frozenset(["completed", "failed", "cancelled"])
_ACQUIRED = frozenset(["actor.acquired", "actor.acquired_unreadable"])
_ENDED = frozenset(["actor.activate_failed", "actor.crashed", "actor.lease_lost", "actor.released"])


@attrs.frozen
class RunWrite:
    """A commit wrote run ``run``'s record: at journal position ``at``, ``status``."""

    at: int
    time: float
    node: str
    run: str
    agent: str
    thread: str | None
    status: str
    stop_reason: str | None = None
    error: str | None = None


def run_write(
    at: int, time: float, node: str, key: bytes, record: dict[str, object]
) -> RunWrite | None:
    """The :class:`RunWrite` of a write of ``key`` whose value decoded to ``record``."""
    if not key.startswith(b"run/") or record.get("_t") is None:
        return None
    status, agent = record.get("status"), record.get("agent_id")
    if not isinstance(status, str) or not isinstance(agent, str):
        return None
    thread, stop, error = record.get("thread_id"), record.get("stop_reason"), record.get("error")
    run = key[len(b"run/") :].decode("utf-8", "replace")
    return RunWrite(
        at,
        time,
        node,
        run,
        agent,
        thread if isinstance(thread, str) else None,
        status,
        stop if isinstance(stop, str) else None,
        error if isinstance(error, str) else None,
    )


def check_recovery(
    writes: Sequence[RunWrite],
    entries: Sequence[object],
    crashes: Iterable[tuple[int, str]],
) -> list[str]:
    """``writes``: the run records written, in commit order; ``entries``: the journal (only
    its :class:`Observed` dispatcher events are read, by position); ``crashes``: ``(position,
    node)``, a node crashed just before that journal position."""
    crashed: dict[str, list[int]] = {}
    for at, node in crashes:
        crashed.setdefault(node, []).append(at)
    events = [(at, e) for at, e in enumerate(entries) if isinstance(e, Observed)]
    problems: list[str] = []
    for n, (q, acquired) in enumerate(events):
        if acquired.kind not in _ACQUIRED or not acquired.actor.startswith("agent/"):
            continue
        activated = _activated(events[n + 1 :], acquired, crashed.get(acquired.node, []), q)
        if activated is None:
            continue
        a, done = activated
        agent = acquired.actor[len("agent/") :]
        for run in _open_before(writes, agent, q):
            if not any(w.run == run.run and q < w.at < a and w.status in TERMINAL for w in writes):
                where = f"conversation {run.thread}" if run.thread else "its own history"
                problems.append(
                    f"agent {agent}: run {run.run} ({where}) was left running at "
                    f"t={run.time:.3f} on {run.node}; {acquired.node} reactivated the agent at "
                    f"t={done.time:.3f} without finishing it"
                )
    return problems


def check_clean_ends(writes: Iterable[RunWrite]) -> list[str]:
    """No run ends with stop reason ``error``: the agent loop's catch-all for an exception
    it did not expect (a bug: an extractor that trips on a cut escape, a codec that cannot
    store a value). Every fault the world injects has a stop reason of its own
    (``llm_api_error``, ``invalid_tool_call``, ``max_steps``, ``cancelled``) or is retried."""
    return [
        f"agent {w.agent}: run {w.run} ended with stop reason error at t={w.time:.3f} on "
        f"{w.node}: {(w.error or '')[:160]}"
        for w in writes
        if w.stop_reason == "error"
    ]


# Letta's stop reasons (StopReasonType): a run record with any other is unreadable to a client.
LETTA_STOP_REASONS = frozenset(
    [
        "end_turn",
        "error",
        "llm_api_error",
        "invalid_llm_response",
        "invalid_tool_call",
        "max_steps",
        "max_tokens_exceeded",
        "no_tool_call",
        "tool_rule",
        "cancelled",
        "insufficient_credits",
        "requires_approval",
        "context_window_overflow_in_system_prompt",
    ]
)


def check_run_statuses(writes: Iterable[RunWrite]) -> list[str]:
    """Every stored run record's status is the one its stop reason means in Letta: a run still
    going has none; a finished one has one of Letta's stop reasons, and ``failed``,
    ``cancelled`` or ``completed`` as :func:`expected_status` maps it (a run that stopped on
    an invalid tool call reported ``completed`` sends a client's retry logic the wrong way)."""
    problems = []
    for w in writes:
        where = f"agent {w.agent}: run {w.run} written at t={w.time:.3f} on {w.node}"
        if w.status == "running":
            if w.stop_reason is not None:
                problems.append(f"{where}: status running with stop reason {w.stop_reason}")
            continue
        if w.stop_reason not in LETTA_STOP_REASONS:
            problems.append(f"{where}: status {w.status} with stop reason {w.stop_reason!r}")
            continue
        want = expected_status(w.stop_reason)
        if want is not None and w.status != want:
            problems.append(
                f"{where}: stop reason {w.stop_reason} but status {w.status} (want {want})"
            )
    return problems


def _activated(
    later: Sequence[tuple[int, Observed]], acquired: Observed, crashes: Sequence[int], q: int
) -> tuple[int, Observed] | None:
    """The ``actor.activated`` that follows ``acquired`` on its node, if the activation got
    that far (no crash of the node, no failure or loss of the lease in between)."""
    for at, e in later:
        if e.node != acquired.node or e.actor != acquired.actor:
            continue
        if any(q < c <= at for c in crashes):
            return None
        if e.kind == "actor.activated":
            return at, e
        if e.kind in _ENDED or e.kind in _ACQUIRED:
            return None
    return None


def _open_before(writes: Sequence[RunWrite], agent: str, q: int) -> list[RunWrite]:
    """The agent's runs whose last record before position ``q`` says ``running``."""
    last: dict[str, RunWrite] = {}
    for w in writes:
        if w.at >= q:
            break
        if w.agent == agent:
            last[w.run] = w
    return [w for w in last.values() if w.status == "running"]
