"""The LLM port's contract (`llm_port_faithful`, _agent_llm_checks) on fabricated calls, each
property passing what a correct adapter does and catching a planted violation; and the
scenario that runs the real adapter, agent_anthropic_api, run twice on one seed."""

from __future__ import annotations

import attrs

from kelpie_agent.llm import (
    LlmRequest,
    LlmResponse,
    Message,
    TextBlock,
    Tool,
    ToolCall,
    ToolResult,
    Usage,
)
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.shims.llm import Failure, Plan
from kelpie_dst.workloads._agent_llm_checks import (
    ModelAnswers,
    PortCall,
    check_port,
    check_requests,
)

REQUEST = LlmRequest("m", (Message.user("hi"),), "system", (), 100)
ANSWER = LlmResponse(
    "msg_1",
    "m",
    (TextBlock("thinking"), ToolCall("toolu_1", "send_message", '{"message": "hi"}')),
    "tool_use",
    Usage(10, 5),
)


class _Inner:
    def __init__(self) -> None:
        self.seen = 0

    def observe(self, request: LlmRequest, outcome: Plan | Failure, node: str | None) -> None:
        self.seen += 1


def _model(*plans: Plan | Failure) -> ModelAnswers:
    inner = _Inner()
    model = ModelAnswers(inner)
    for plan in plans:
        model.observe(REQUEST, plan, "api.anthropic.com")
    assert inner.seen == len(plans)  # the auditor still sees every request
    return model


def _got(response: LlmResponse | None, *, ends: int = 1) -> PortCall:
    return PortCall("server-1", True, response, None, True, ends)


def test_the_models_answer_passes_reformatted_arguments_included() -> None:
    same = attrs.evolve(
        ANSWER,
        content=(ANSWER.content[0], ToolCall("toolu_1", "send_message", '{"message":"hi"}')),
    )
    assert check_port([_got(same), _got(ANSWER)], _model(Plan(ANSWER, ()))) == []


def test_the_model_is_asked_what_the_agent_asked() -> None:
    """check_requests: the request the host parsed for an answer against the port's request."""
    tool = Tool("note", "Keep a note.", {"type": "object", "properties": {"t": {"type": "string"}}})
    asked = LlmRequest(
        "m",
        (
            Message.user("hi"),
            Message("assistant", (ToolCall("toolu_0", "note", '{"t": "kelp"}'),)),
            Message("user", (ToolResult("toolu_0", "failed", is_error=True),)),
        ),
        "system",
        (tool,),
        100,
    )
    model = ModelAnswers(_Inner())
    # the host sees the arguments re-encoded: the same request
    wire = attrs.evolve(
        asked,
        messages=(
            asked.messages[0],
            Message("assistant", (ToolCall("toolu_0", "note", '{"t":"kelp"}'),)),
            asked.messages[2],
        ),
    )
    model.observe(wire, Plan(ANSWER, ()), "api.anthropic.com")
    call = PortCall("server-1", True, ANSWER, None, True, 1, request=asked)
    assert check_requests([call], model) == []
    for changed, field in (
        (attrs.evolve(wire, tools=(Tool("note", "", tool.input_schema),)), "tools"),
        (attrs.evolve(wire, max_tokens=4096), "max_tokens"),
        (attrs.evolve(wire, system=""), "system"),
        (
            attrs.evolve(
                wire,
                messages=(*wire.messages[:2], Message("user", (ToolResult("toolu_0", "failed"),))),
            ),
            "messages",
        ),
    ):
        model.observe(changed, Plan(ANSWER, ()), "api.anthropic.com")
        [problem] = check_requests([call], model)
        assert f"whose {field} differ" in problem


def test_an_answer_that_differs_from_the_models_is_caught() -> None:
    model = _model(Plan(ANSWER, ()))
    first_call_only = attrs.evolve(ANSWER, content=ANSWER.content[1:])
    other_args = attrs.evolve(
        ANSWER, content=(ANSWER.content[0], ToolCall("toolu_1", "send_message", "{}"))
    )
    other_text = attrs.evolve(ANSWER, content=(TextBlock("thinkin"), ANSWER.content[1]))
    for wrong, expect in [
        (first_call_only, "1 content blocks, the model sent 2"),
        (other_args, "arguments"),
        (other_text, "text differs"),
        (attrs.evolve(ANSWER, stop_reason="end_turn"), "stop reason"),
        (attrs.evolve(ANSWER, usage=Usage(10, 6)), "usage"),
        (attrs.evolve(ANSWER, id="msg_2"), "not one the model sent"),
    ]:
        [problem] = check_port([_got(wrong)], model)
        assert expect in problem


def test_a_cut_stream_must_never_become_an_answer() -> None:
    model = _model(Plan(ANSWER, (), cut_after=1))
    [problem] = check_port([_got(ANSWER)], model)
    assert "cut answer msg_1 off" in problem
    assert check_port([PortCall("server-1", True, None, "LlmStreamCutError", True)], model) == []


def test_a_stream_must_end_with_exactly_one_end_chunk() -> None:
    model = _model(Plan(ANSWER, ()))
    [problem] = check_port([_got(None, ends=0)], model)
    assert "0 end chunks" in problem
    [problem] = check_port([_got(ANSWER, ends=2)], model)
    assert "2 end chunks" in problem


def test_the_agent_gives_up_only_on_requests_the_model_refused() -> None:
    refused = Failure("bad_request", "no", 400, "invalid_request_error")
    overloaded = Failure("overloaded", "busy", 529, "overloaded_error")
    given_up = PortCall("server-1", False, None, "LlmBadRequestError", False)
    retried = PortCall("server-1", False, None, "LlmOverloadedError", True)
    assert check_port([given_up, retried], _model(refused, overloaded)) == []
    [problem] = check_port([given_up, retried], _model(overloaded, overloaded))
    assert "1 LLM error(s) reached the agent as not retryable (LlmBadRequestError)" in problem
    assert "refused only 0" in problem


def test_a_rate_limit_reaches_the_agent_with_the_wait_the_api_asked_for() -> None:
    limited = Failure("rate_limited", "slow down", 429, "rate_limit_error", 4.0)

    def port(wait: float | None) -> PortCall:
        return PortCall("server-1", False, None, "LlmRateLimitedError", True, 0, wait)

    assert check_port([port(4.0)], _model(limited)) == []
    [problem] = check_port([port(4000.0)], _model(limited))  # seconds read as milliseconds
    assert problem == (
        "server-1: a rate-limited call asks the agent to wait 4000 s; the API asked for 4 s"
    )
    [problem] = check_port([port(None)], _model(limited))
    assert problem == "server-1: a rate-limited call lost the retry-after the API sent"
    bare = Failure("rate_limited", "slow down", 429, "rate_limit_error", None)
    assert check_port([port(None)], _model(limited, bare)) == []  # this one may be the bare one


def test_agent_anthropic_api_runs_the_real_adapter_and_repeats_itself() -> None:
    """Every answer the model sent reached an agent through AnthropicLlm and was checked; the
    same seed is the same run."""
    scenario = load_scenario(
        "agent_anthropic_api",
        ["workload.params.agents=3", "workload.params.messages=2", "duration=15s"],
    )
    first, second = run_scenario(scenario, 2), run_scenario(scenario, 2)
    assert first.ok, f"{first.result.failure and first.result.failure.describe()}"
    assert first.metrics["llm.port_answers"] >= 6
    assert first.metrics["llm.port_answers"] <= first.metrics["llm.http.200"]
    assert first.result.trace_hash == second.result.trace_hash
