"""Where a run stops, judged from its stored steps (pure checks of the final read-back).

Two rules a Letta user relies on, whatever the model does within a step:

* **A reply ends the run.** Once a step's ``send_message`` succeeded, the run is over: the
  model is not called again in that run, whatever other calls the step made, before or after
  the reply (the workload gives no agent a ``required_before_exit`` rule, the one exception).
* **``invalid_tool_call`` is earned, and not late.** A run stops with it only after
  ``max_invalid_steps`` consecutive steps whose calls were *all* refused: a step with one call
  that ran is not an invalid step. Refusals are failed results, so each of those last steps
  must have results and every one of them failed. And the step that makes
  ``max_invalid_steps`` refused steps in a row (refusals told apart from tools that failed by
  Letta's texts: ``invalid_tool_call: ...``, ``[ToolConstraintError] ...``) is the run's last,
  and the run says ``invalid_tool_call``.

And a third, of what the client is told: **the stop reason an acknowledged send reports is the
one its run ended with** (its last terminal run record in the journal), for a retried send
answered from its earlier run too.

All three read only what was recorded (``Msg``: type, tool, status, step_id, run_id; the
journal's run records), so they add no request and move no seed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ._agent_checks import Ack, Msg
from ._agent_recovery import TERMINAL, RunWrite

__all__ = [
    "MODEL_TYPES",
    "check_invalid_stops",
    "check_reply_ends_run",
    "check_results_once",
    "check_told_stop_reasons",
]

MODEL_TYPES = frozenset(
    ("assistant_message", "reasoning_message", "tool_call_message", "approval_request_message")
)
"""Stored messages the model wrote (each names the step, one LLM call, it came from)."""


def check_reply_ends_run(histories: Mapping[str, Sequence[Msg]]) -> list[str]:
    """No run has a model step after the step whose ``send_message`` succeeded."""
    problems = []
    for agent, messages in sorted(histories.items()):
        replied: dict[str, str] = {}  # run -> the step whose reply succeeded
        flagged: set[str] = set()
        for m in messages:  # in history order (over HTTP, seq is a page position)
            if not m.run_id or not m.step_id:
                continue
            if m.type == "tool_return_message" and m.tool == "send_message":
                if m.status == "success":
                    replied.setdefault(m.run_id, m.step_id)
            elif (
                m.type in MODEL_TYPES
                and replied.get(m.run_id, m.step_id) != m.step_id
                and m.run_id not in flagged
            ):
                flagged.add(m.run_id)
                problems.append(
                    f"{agent} run {m.run_id}: step {m.step_id} called the model again after "
                    f"step {replied[m.run_id]}'s send_message had replied and ended the run "
                    f"({m.type} {m.id})"
                )
    return problems


def _steps(messages: Iterable[Msg], run_id: str) -> list[tuple[str, list[Msg]]]:
    """The run's steps in order, each with the tool results it stored."""
    order: list[str] = []
    results: dict[str, list[Msg]] = {}
    for m in messages:  # in history order (over HTTP, seq is a page position)
        if m.run_id != run_id or not m.step_id:
            continue
        if m.step_id not in results:
            order.append(m.step_id)
            results[m.step_id] = []
        if m.type == "tool_return_message":
            results[m.step_id].append(m)
    return [(step, results[step]) for step in order]


def check_invalid_stops(
    acks: Iterable[Ack], histories: Mapping[str, Sequence[Msg]], max_invalid_steps: int
) -> list[str]:
    """Every acknowledged run that stopped with ``invalid_tool_call`` ends with
    ``max_invalid_steps`` steps whose every call failed (was refused)."""
    problems = []
    for ack in acks:
        if ack.stop_reason != "invalid_tool_call" or not ack.run_id:
            continue
        where = f"{ack.agent} message #{ack.index} ({ack.otid}) run {ack.run_id}"
        steps = _steps(histories.get(ack.agent, ()), ack.run_id)
        last = steps[-max_invalid_steps:]
        if len(last) < max_invalid_steps:
            problems.append(
                f"{where}: stopped with invalid_tool_call after {len(steps)} step(s), fewer "
                f"than max_invalid_steps={max_invalid_steps}"
            )
            continue
        for step, results in last:
            ran = [r.tool or "?" for r in results if r.status != "error"]
            if not results or ran:
                what = f"{', '.join(ran)} ran" if ran else "it stored no tool result"
                problems.append(
                    f"{where}: stopped with invalid_tool_call, but step {step} among its last "
                    f"{max_invalid_steps} was not all refused ({what})"
                )
                break
    for ack in acks:  # and not later: the m-th refused step in a row is the run's last
        if not ack.run_id:
            continue
        steps = _steps(histories.get(ack.agent, ()), ack.run_id)
        streak = 0
        for i, (step, results) in enumerate(steps):
            streak = streak + 1 if results and all(map(_refusal, results)) else 0
            if streak < max_invalid_steps:
                continue
            if i != len(steps) - 1 or ack.stop_reason != "invalid_tool_call":
                went_on = f"{len(steps) - 1 - i} more step(s) ran" if i < len(steps) - 1 else ""
                problems.append(
                    f"{ack.agent} message #{ack.index} ({ack.otid}) run {ack.run_id}: step "
                    f"{step} made {max_invalid_steps} steps in a row whose calls were all "
                    f"refused, but {went_on or 'the run ended ' + repr(ack.stop_reason)}"
                )
            break
    return problems


_REFUSALS = ('"message": "invalid_tool_call: ', '"message": "[ToolConstraintError]')


def _refusal(result: Msg) -> bool:
    """A result the loop refused before running the tool (Letta's refusal texts), not a
    tool that ran and failed."""
    return result.status == "error" and any(r in result.text for r in _REFUSALS)


def check_told_stop_reasons(acks: Iterable[Ack], runs: Sequence[RunWrite]) -> list[str]:
    """Every acknowledged send was told the stop reason its run ended with (the run's last
    terminal record), a retried send answered from its earlier run too."""
    final: dict[str, RunWrite] = {}
    for w in runs:
        if w.status in TERMINAL:
            final[w.run] = w
    problems = []
    for ack in acks:
        ended = final.get(ack.run_id) if ack.run_id else None
        if ended is None or ended.stop_reason is None or ended.stop_reason == ack.stop_reason:
            continue
        problems.append(
            f"{ack.agent} message #{ack.index} ({ack.otid}): the client was told stop reason "
            f"{ack.stop_reason!r}, but run {ack.run_id} ended {ended.stop_reason!r} "
            f"(t={ended.time:.3f} on {ended.node})"
        )
    return problems


def check_results_once(
    histories: Mapping[str, Sequence[Msg]], siblings: Mapping[str, Sequence[str]]
) -> list[str]:
    """Every tool call the model made gets exactly one stored result.

    * no call is answered twice (a recovered step that ran a call again stores a second
      result under the same call id);
    * every result answers a call stored before it, in the same agent's history;
    * every call of a step that the run went past (a later step of the same run exists) was
      answered: the loop only calls the model again once every call of the step has a result.
      Approval requests are waits, not calls, and are left out of this last rule;
    * a step keeps the model's whole answer: when one call of a complete answer was stored,
      every call of that answer was (``siblings``: the model's answers, call id -> the ids of
      all the calls it made in that answer, as the prompt auditor saw them).
    """
    problems = []
    for agent, messages in sorted(histories.items()):
        calls: dict[str, Msg] = {}
        answered: dict[str, Msg] = {}
        step_runs: dict[str, str] = {}  # step -> its run
        later: set[str] = set()  # steps of a run that another step of that run follows
        last: dict[str, str] = {}  # run -> its latest step so far
        for m in messages:  # in history order
            if m.run_id and m.step_id and m.step_id not in step_runs:
                step_runs[m.step_id] = m.run_id
                if m.run_id in last:
                    later.add(last[m.run_id])
                last[m.run_id] = m.step_id
            if m.call_id is None:
                continue
            if m.type in ("tool_call_message", "approval_request_message"):
                calls.setdefault(m.call_id, m)
            elif m.type == "tool_return_message":
                first = answered.get(m.call_id)
                if first is not None:
                    problems.append(
                        f"{agent}: tool call {m.call_id} ({m.tool}) has two stored results, "
                        f"{first.id} and {m.id}"
                    )
                elif m.call_id not in calls:
                    problems.append(
                        f"{agent}: result {m.id} answers tool call {m.call_id} ({m.tool}), "
                        "which no stored message before it made"
                    )
                answered.setdefault(m.call_id, m)
        problems += _whole_answers(agent, calls, siblings)
        for call_id, call in calls.items():
            if call.type != "tool_call_message" or call_id in answered:
                continue
            if call.step_id in later:
                problems.append(
                    f"{agent} run {call.run_id}: step {call.step_id}'s call {call_id} "
                    f"({call.tool}) has no stored result, but the run went on to another step"
                )
    return problems


def _whole_answers(
    agent: str, calls: Mapping[str, Msg], siblings: Mapping[str, Sequence[str]]
) -> list[str]:
    """Each step stored as many calls as the model's answer made (counted per step: the loop
    renames a call id the model repeated within one answer)."""
    per_step: dict[str, list[Msg]] = {}
    for call in calls.values():
        if call.step_id:
            per_step.setdefault(call.step_id, []).append(call)
    problems = []
    for step, stored in per_step.items():
        answer = next(
            (siblings[c.call_id] for c in stored if c.call_id and c.call_id in siblings), ()
        )
        if len(answer) > len(stored):
            problems.append(
                f"{agent} run {stored[0].run_id}: step {step} stored {len(stored)} of the "
                f"{len(answer)} calls of the model's answer ({', '.join(answer)})"
            )
    return problems
