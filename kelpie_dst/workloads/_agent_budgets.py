"""The loop's budgets and its model retries, judged at the boundaries (coreJ, session 14).

A blind test of the core ([mutation.md](../../docs/mutation.md)) planted a budget counted one
past its limit (``max_tool_calls``, ``max_invalid_steps``) and a retry count one short
(``llm_retries`` taken as the number of tries): nothing judged a budget's *other* side (a run
that goes on past it), and nothing counted how often the loop asked the model before it gave
up. Three pure properties, each stated as a user of the loop would state it (docs/agent.md,
the loop's stop reasons and ``LoopConfig``), never computed the way Kelpie computes them:

* **A run never runs more tool calls than ``max_tool_calls``** (:func:`check_tool_budget`):
  only a call that ran can succeed, so a run's stored results with status ``success`` are at
  most the budget (a refused call's result is a failure). Certain in any world without
  client-side tool results (approvals), which count as successes without running.
* **``invalid_tool_call`` comes at ``max_invalid_steps``, not later, not earlier**
  (:func:`check_invalid_streaks`): once ``max_invalid_steps`` steps in a row made calls that
  were all refused, the run has no later step; and a run told ``invalid_tool_call`` ends with
  that many (judged only where every step made calls, each with its stored result). A
  refusal is a failed result that says ``invalid_tool_call`` or ``[ToolConstraintError]``
  (the loop's documented refusal texts, the ones ``check_valid_calls_run`` reads); a step with
  any other result breaks the streak, and so does a step without calls (conservative: Kelpie
  lets a callless step keep the streak).
* **A model call is tried ``llm_retries + 1`` times before the run gives up**
  (:func:`check_llm_attempts`): one request object is one call of the loop, so its attempts,
  as the simulated model saw them, are at most ``llm_retries + 1``; and a run that stopped
  with ``llm_api_error`` after its last call's attempts all failed retryably (429, 529, 5xx, a
  timeout, a cut stream) made exactly ``llm_retries + 1`` of them. A request the model refused
  (``bad_request``) is not retried, so it ends a run after one attempt. Excused: a run whose
  last call succeeded (then a summary call ended it), and one after whose last call a summary
  request was seen before the answer (it may be the one that failed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from ._agent_loop_checks import Send, Stored

__all__ = [
    "REFUSALS",
    "Attempts",
    "check_invalid_streaks",
    "check_llm_attempts",
    "check_tool_budget",
]

REFUSALS = ("invalid_tool_call", "[ToolConstraintError]")
"""What the loop's refusals say (docs/agent.md): a call that never ran."""

NOT_RETRYABLE = frozenset({"bad_request"})


@attrs.define
class Attempts:
    """The attempts of one model request (one LLM call of the loop, retried with the same
    request object): their outcomes in order (``ok``, ``cut`` or a ``Failure`` kind), the
    run's tag it carried (None if no probe was in view), whether it was a summary request, and
    the position of its last attempt among every attempt observed."""

    tag: str | None
    summary: bool
    outcomes: list[str] = attrs.Factory(list)
    last: int = -1


def check_tool_budget(stored: Mapping[str, Stored], *, max_tool_calls: int) -> list[str]:
    ran: dict[str, int] = {}
    for m in stored.values():
        if m.kind == "tool_return_message" and m.status == "success" and m.run is not None:
            ran[m.run] = ran.get(m.run, 0) + 1
    return [
        f"run {run} ran {count} tool calls (successful results); max_tool_calls is {max_tool_calls}"
        for run, count in ran.items()
        if count > max_tool_calls
    ]


def _refused(result: Stored | None) -> bool:
    return (
        result is not None
        and result.status == "error"
        and any(text in result.text for text in REFUSALS)
    )


def check_invalid_streaks(
    stored: Mapping[str, Stored], *, max_invalid_steps: int, sends: Iterable[Send] = ()
) -> list[str]:
    steps: dict[str, list[str]] = {}  # run -> its steps in history order
    calls: dict[str, list[str]] = {}  # step -> its calls' ids
    results: dict[str, Stored] = {}  # call id -> its result
    for m in stored.values():
        if m.run is None or m.step is None:
            continue
        if m.kind in ("tool_call_message", "assistant_message", "reasoning_message"):
            order = steps.setdefault(m.run, [])
            if m.step not in order:
                order.append(m.step)
        if m.kind == "tool_call_message" and m.call_id is not None:
            calls.setdefault(m.step, []).append(m.call_id)
        elif m.kind == "tool_return_message" and m.call_id is not None:
            results[m.call_id] = m
    problems: list[str] = []
    streaks: dict[str, int] = {}  # run -> its streak at its last step
    for run, order in steps.items():
        streak = 0
        for i, step in enumerate(order):
            ids = calls.get(step, [])
            streak = streak + 1 if ids and all(_refused(results.get(c)) for c in ids) else 0
            if streak == max_invalid_steps and i < len(order) - 1:
                problems.append(
                    f"run {run} went on after {streak} steps in a row whose calls were all "
                    f"refused (step {step}; max_invalid_steps {max_invalid_steps} ends it "
                    f"invalid_tool_call): {len(order) - 1 - i} more step(s)"
                )
                break
        # judged only where every step made calls, each with its result: then the streak is
        # exactly the loop's (Kelpie keeps it across a step without calls)
        if all(calls.get(s) and all(c in results for c in calls[s]) for s in order):
            streaks[run] = streak
    for s in sends:  # and the other side: invalid_tool_call is earned
        if not s.acked or s.stop_reason != "invalid_tool_call" or s.run not in streaks:
            continue
        if streaks[s.run] < max_invalid_steps:
            problems.append(
                f"{s.agent} {s.shape} {s.tag}: stopped with invalid_tool_call after "
                f"{streaks[s.run]} step(s) in a row whose calls were all refused; "
                f"max_invalid_steps is {max_invalid_steps}"
            )
    return problems


def check_llm_attempts(
    sends: Iterable[Send],
    calls: Sequence[Attempts],
    summaries: Sequence[int],
    *,
    llm_retries: int,
) -> list[str]:
    allowed = llm_retries + 1
    problems: list[str] = []
    last: dict[str, Attempts] = {}
    for call in calls:
        if len(call.outcomes) > allowed:
            problems.append(
                f"a model request{f' of {call.tag}' if call.tag else ''} was tried "
                f"{len(call.outcomes)} times ({', '.join(call.outcomes)}); llm_retries "
                f"{llm_retries} allows {allowed}"
            )
        if call.tag is not None and not call.summary:
            last[call.tag] = call
    for s in sends:
        if not s.acked or s.stop_reason != "llm_api_error" or s.seen < 0:
            continue
        final = last.get(s.tag)
        if final is None or "ok" in final.outcomes or final.outcomes[-1] in NOT_RETRYABLE:
            continue
        if any(final.last < at < s.seen for at in summaries):
            continue  # a summary request after it may be the call that failed
        if len(final.outcomes) != allowed:
            problems.append(
                f"{s.agent} {s.shape} {s.tag}: stopped with llm_api_error after its last model "
                f"call was tried {len(final.outcomes)} time(s) ({', '.join(final.outcomes)}), "
                f"all retryable; llm_retries {llm_retries} asks for {allowed}"
            )
    return problems
