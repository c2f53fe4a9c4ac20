"""A call shown back to the model under an id it gave is the call it made (``_prompt_history``,
a step hook of the prompt auditor)."""

from __future__ import annotations

from kelpie_agent.llm import LlmRequest, Message, ToolCall, ToolResult
from kelpie_dst.workloads._prompt_history import ShownCalls, check_shown_calls

MADE = {
    "toolu-1": {("memory_append", '{"label":"notes","content":"kelp"}')},
    "toolu-2": {("send_message", "{broken")},  # malformed: sent back as {}
}


def _request(*calls: ToolCall) -> LlmRequest:
    results = [ToolResult(c.id, '{"status": "OK"}') for c in calls]
    return LlmRequest(
        "claude", (Message.user("hi"), Message("assistant", calls), Message("user", results))
    )


def test_the_calls_the_model_made_pass_whatever_their_json_spacing() -> None:
    shown = ToolCall("toolu-1", "memory_append", '{"content": "kelp", "label": "notes"}')
    assert check_shown_calls(_request(shown), MADE, "a0") == (1, [])
    # malformed arguments, ids the model never gave (the boot call): not judged
    others = (ToolCall("toolu-2", "send_message", "{}"), ToolCall("boot-1", "send_message", "{}"))
    assert check_shown_calls(_request(*others), MADE, "a0") == (0, [])


def test_a_call_shown_otherwise_than_made_is_named() -> None:
    for shown in (
        ToolCall("toolu-1", "memory_append", '{"label":"notes","content":"reef"}'),
        ToolCall("toolu-1", "memory_append", ""),  # arguments lost on the way
        ToolCall("toolu-1", "memory_replace", '{"label":"notes","content":"kelp"}'),
    ):
        judged, [problem] = check_shown_calls(_request(shown), MADE, "a0")
        assert judged == 1 and "the model made it as memory_append" in problem
    hook = ShownCalls(MADE)
    hook.step(_request(ToolCall("toolu-1", "memory_append", "{}")), 0, "t=1")
    assert hook.judged == 1 and len(hook.problems) == 1
