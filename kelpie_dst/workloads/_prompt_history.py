"""The model is shown its own calls as it made them (session 17, llmL).

A step's prompt carries the thread's recent history turned back into provider turns
(``kelpie_agent.agent._prompt``): the model's earlier tool calls come back as ``tool_use``
blocks, rebuilt from the stored call messages. Whatever the storage, the codec and the prompt
builder did in between, **a call shown to the model under an id the model gave is the call the
model made under that id**: the same tool name and the same arguments (compared as JSON, since
the Anthropic transport re-encodes them). A call whose arguments were rebuilt wrong (a field
lost on a round trip through storage, the arguments of another call, a name taken from the
wrong record) misleads the model about what it did, and the tool results paired with it read
as answers to another question.

Judged at every step of every agents-workload scenario with ``fresh_prompts``, as a step hook
of the prompt auditor, against the auditor's record of the model's *complete* answers by call
id (:attr:`PromptAuditor.call_args`): pure, it awaits and draws nothing, so it moves no seed.
Calls the model never made under that id (the boot call, an id the agent replaced because the
model repeated it, an imported history) are not judged, and neither are arguments the model
wrote that are not a JSON object (a malformed call is sent back as ``{}``, as the API wants an
object).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Set
from typing import Any

from kelpie_agent.llm import LlmRequest, ToolCall

__all__ = ["ShownCalls", "check_shown_calls"]

_MAX_PROBLEMS = 20


def _object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def check_shown_calls(
    request: LlmRequest, made: Mapping[str, Set[tuple[str, str]]], who: str
) -> tuple[int, list[str]]:
    """(calls judged, problems): each ``tool_use`` block of ``request`` whose id the model gave
    a call (``made[id]``: the (name, arguments) it gave under that id) against that call."""
    judged, problems = 0, []
    for message in request.messages:
        if message.role != "assistant":
            continue
        for block in message.content:
            if not isinstance(block, ToolCall):
                continue
            calls = made.get(block.id)
            if not calls:
                continue
            wanted = [(name, args) for name, args in calls if _object(args) is not None]
            if not wanted:
                continue  # the model's arguments were not an object: sent back as {}
            judged += 1
            shown = _object(block.arguments)
            if any(block.name == name and shown == _object(args) for name, args in wanted):
                continue
            name, args = sorted(wanted)[0]
            problems.append(
                f"{who}: the prompt shows call {block.id} as {block.name}({block.arguments[:80]})"
                f", the model made it as {name}({args[:80]})"
            )
    return judged, problems


class ShownCalls:
    """A step hook of the prompt auditor: the calls each prompt shows against the model's."""

    def __init__(self, made: Mapping[str, Set[tuple[str, str]]]) -> None:
        self.made = made
        self.judged = 0
        self.problems: list[str] = []

    def step(self, request: LlmRequest, agent: int, where: str) -> None:
        judged, problems = check_shown_calls(request, self.made, f"{where} a{agent}")
        self.judged += judged
        for problem in problems:
            if len(self.problems) < _MAX_PROBLEMS:
                self.problems.append(problem)
