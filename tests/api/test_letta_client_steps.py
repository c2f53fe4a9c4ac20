"""letta-client's steps (list with Letta's filters, retrieve, feedback, messages, metrics,
trace) and a run's steps and trace, against the app with strict response validation.

Each answered LLM call of a run is a step, stored with the step's messages: a run that called
a tool and then answered has two steps, in order, whose messages are the run's model output.
"""

from __future__ import annotations

import httpx
import letta_client
import pytest
from letta_client import AsyncLetta

import kelpie_dst
from kelpie_dst.shims import LlmTiming, ScriptedPolicy

from .harness import BASE, api
from .test_letta_client import GUARDS

letta_client._base_client.get_platform()
POLICY = ScriptedPolicy.from_dict(
    {
        "mode": "scripted",
        "rules": [
            {
                "when": {"user": "remember"},
                "text": "Noting it.",
                "tool_calls": [
                    {
                        "name": "core_memory_append",
                        "input": {"label": "human", "content": "likes tea"},
                    }
                ],
            },
            {"when": {"tool": "core_memory_append"}, "text": "Saved."},
            {"text": "echo: {text}"},
        ],
    }
)
MISSING = "step-00000000-0000-4000-8000-000000000000"


async def scenario() -> list[str]:
    seen: list[str] = []
    async with api(policy=POLICY, timing=LlmTiming()) as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(
            base_url=BASE, http_client=http, max_retries=0, _strict_response_validation=True
        )
        otto = await client.agents.create(
            name="otto", agent_type="memgpt_agent", model="anthropic/claude-haiku-4-5"
        )
        ada = await client.agents.create(name="ada")
        first = await client.agents.messages.create(otto.id, input="please remember this")
        second = await client.agents.messages.create(ada.id, input="hello")
        run_a = first.messages[0].run_id
        run_b = second.messages[0].run_id
        assert run_a and run_b
        usage_steps = first.usage.step_count

        # a run's steps: as many as its usage counts, in order, all its own
        steps_a = [s async for s in client.runs.steps.list(run_a)]
        assert len(steps_a) == usage_steps >= 2
        assert {s.run_id for s in steps_a} == {run_a} and {s.agent_id for s in steps_a} == {otto.id}
        assert [s.trace_id for s in steps_a] == [run_a] * len(steps_a)
        assert steps_a[0].model == "claude-haiku-4-5"
        assert steps_a[0].model_handle == "anthropic/claude-haiku-4-5"
        # a memgpt agent that answers without a tool is nudged once, then stops: only the last
        # step carries the run's stop reason
        reasons = [s.stop_reason for s in steps_a]
        assert reasons == [None] * (len(reasons) - 1) + ["no_tool_call"], reasons
        assert sum(s.total_tokens or 0 for s in steps_a) == first.usage.total_tokens
        desc = [s.id async for s in client.runs.steps.list(run_a, order="desc")]
        assert desc == [s.id for s in steps_a][::-1]

        # the step's messages are the run's model output for that call
        out = [m async for m in client.steps.messages.list(steps_a[0].id)]
        assert out and {getattr(m, "step_id", None) for m in out} == {steps_a[0].id}
        assert "tool_call_message" in {m.message_type for m in out}
        every = {
            getattr(m, "id", None) for s in steps_a async for m in client.steps.messages.list(s.id)
        }
        produced = {m.id for m in first.messages if m.message_type != "user_message"}
        assert produced <= every

        # listing: filters and cursors
        everything = [s.id async for s in client.steps.list(order="asc")]
        assert len(everything) == len(steps_a) + 1
        assert [s.id async for s in client.steps.list(agent_id=otto.id, order="asc")] == [
            s.id for s in steps_a
        ]
        assert [s.id async for s in client.steps.list(trace_ids=[run_b])] == [everything[-1]]
        assert [s.id async for s in client.steps.list(model="claude-haiku-4-5", order="asc")] == [
            s.id for s in steps_a
        ]
        page = await client.steps.list(order="asc", after=everything[0], limit=1)
        assert [s.id for s in page.items] == [everything[1]]
        # as in Letta, `before` is before the cursor in the listed order: newer, when descending
        page = await client.steps.list(order="desc", before=everything[0], limit=5)
        assert [s.id for s in page.items] == everything[1:][::-1]
        page = await client.steps.list(order="desc", before=everything[-1], limit=5)
        assert page.items == []

        # feedback: stored, filtered on, cleared
        liked = await client.steps.feedback.create(steps_a[0].id, feedback="positive", tags=["ok"])
        assert liked.feedback == "positive" and liked.tags == ["ok"]
        assert (await client.steps.retrieve(steps_a[0].id)).feedback == "positive"
        assert [s.id async for s in client.steps.list(has_feedback=True)] == [steps_a[0].id]
        assert [s.id async for s in client.steps.list(feedback="negative")] == []
        assert [s.id async for s in client.steps.list(tags=["ok"])] == [steps_a[0].id]
        assert len([s async for s in client.steps.list(has_feedback=False)]) == len(everything) - 1
        cleared = await client.steps.feedback.create(steps_a[0].id, feedback=None)
        assert cleared.feedback is None and cleared.tags == ["ok"]

        # metrics and traces
        metrics = await client.steps.metrics.retrieve(steps_a[0].id)
        assert metrics.run_id == run_a and (metrics.step_ns or 0) >= (metrics.llm_request_ns or 0)
        trace = await client.steps.trace.retrieve(steps_a[0].id)
        assert trace is not None and trace.step_id == steps_a[0].id
        assert "core_memory_append" in trace.request_json["tools"]  # type: ignore[operator]
        assert trace.response_json["content"] == ["text", "tool_call"]
        spans = await client.runs.trace.retrieve(run_a)
        assert [s["span_name"] for s in spans] == ["agent_run"] + ["agent_step"] * len(steps_a)
        assert [s["span_id"] for s in spans[1:]] == [s.id for s in steps_a]

        # bad input: one clear answer, nothing lost
        with pytest.raises(letta_client.NotFoundError):
            await client.steps.retrieve(MISSING)
        with pytest.raises(letta_client.NotFoundError):
            await client.steps.feedback.create(MISSING, feedback="positive")
        with pytest.raises(letta_client.NotFoundError):
            await client.steps.list(after=MISSING)
        with pytest.raises(letta_client.UnprocessableEntityError, match="project_id"):
            await client.steps.list(project_id="proj-1")
        with pytest.raises(letta_client.UnprocessableEntityError):
            await client.steps.list(start_date="yesterday")
        with pytest.raises(letta_client.UnprocessableEntityError):
            await client.steps.feedback.create(steps_a[0].id, feedback="meh")  # type: ignore[arg-type]
        seen += everything + [str(s["start_time_ns"]) for s in spans]
        await http.aclose()
    for item in seen:
        kelpie_dst.log("api.answer", body=item)
    return seen


def test_steps_through_letta_client_deterministically() -> None:
    kelpie_dst.assert_deterministic(scenario, seeds=(1,), runs=2, **GUARDS)
