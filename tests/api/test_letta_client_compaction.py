"""letta-client's ``agents.messages.compact`` against the app, with strict response
validation, and automatic compaction when the context fills up: the summary message is stored
and in the next prompt, no message is lost or duplicated, evicted messages stay searchable."""

from __future__ import annotations

import json
import random

import httpx
import letta_client
import pytest
from letta_client import AsyncLetta

import kelpie_dst
from kelpie_agent.agent import LoopConfig
from kelpie_agent.llm import SUMMARIZER_SYSTEM, LlmRequest
from kelpie_dst.shims import LlmTiming, ScriptedPolicy
from kelpie_dst.shims.llm import Call

from .harness import BASE, api
from .test_letta_client import GUARDS

letta_client._base_client.get_platform()
ECHO = ScriptedPolicy.from_dict(
    {
        "mode": "scripted",
        "rules": [
            {
                "when": {"user_regex": "^search (?P<q>.+)"},
                "tool_calls": [{"name": "conversation_search", "input": {"query": "{q}"}}],
            },
            {"when": {"tool": "conversation_search"}, "text": "found: {text}"},
            {"text": "echo: {text}"},
        ],
    }
)


class Recording:
    """ECHO, keeping the step requests it answers (summary requests never reach a policy)."""

    def __init__(self) -> None:
        self.requests: list[LlmRequest] = []

    def respond(self, request: LlmRequest, rng: random.Random) -> tuple[str | Call, ...]:
        self.requests.append(request)
        return ECHO.respond(request, rng)


WINDOW = LoopConfig(history_window=8)  # compaction once more than 6 messages are in context


def _summaries(messages: list[letta_client.types.agents.Message]) -> list[str]:
    out = []
    for m in messages:
        if m.message_type == "user_message" and isinstance(m.content, str):
            data = json.loads(m.content) if m.content.startswith("{") else {}
            if "hidden from view" in str(data.get("message", "")):
                out.append(data["message"])
    return out


async def scenario() -> list[str]:
    seen: list[str] = []
    policy = Recording()
    requests = policy.requests
    async with api(policy=policy, timing=LlmTiming(), config=WINDOW) as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(
            base_url=BASE, http_client=http, max_retries=0, _strict_response_validation=True
        )
        agent = await client.agents.create(name="otto", agent_type="letta_v1_agent")
        # on demand, with nothing to evict: the context stays as it is
        empty = await client.agents.messages.compact(agent.id)
        assert (empty.summary, empty.num_messages_before, empty.num_messages_after) == ("", 0, 0)

        for n in range(1, 7):
            await client.agents.messages.create(agent.id, input=f"note-{n} kelp")
        stored = [m async for m in client.agents.messages.list(agent.id, order="asc")]
        summaries = _summaries(stored)
        assert summaries, "six turns in a window of eight messages never compacted"
        assert "note-1" in summaries[0]  # the sim summarizer quotes what the user said
        inputs = [m.content for m in stored if m.message_type == "user_message"]
        for n in range(1, 7):  # every message still stored, exactly once
            assert inputs.count(f"note-{n} kelp") == 1
        assert len({m.id for m in stored}) == len(stored)
        # the summary is in the prompt of the steps after it
        steps = requests
        assert not any(r.system.startswith(SUMMARIZER_SYSTEM) for r in steps)
        assert any("hidden from view" in r.messages[0].text for r in steps)
        # the last prompt opens with the summary (which may quote note-1); note-1 itself is gone
        last = [m.text for m in steps[-1].messages]
        assert "hidden from view" in last[0] and "note-1 kelp" not in last[1:], last
        # evicted messages stay searchable
        found = await client.agents.messages.create(agent.id, input="search note-1")
        said = [m.content for m in found.messages if m.message_type == "assistant_message"]
        assert len(said) == 1 and "note-1 kelp" in str(said[0])

        # on demand: everything but nothing in flight goes into the summary
        done = await client.agents.messages.compact(
            agent.id, compaction_settings={"mode": "all", "clip_chars": 40}
        )
        assert done.num_messages_after == 1 < done.num_messages_before
        assert done.summary.endswith("... [truncated]") and len(done.summary) == 40 + 15
        seen.append(done.summary)
        again = await client.agents.messages.create(agent.id, input="after")
        assert [m.message_type for m in again.messages] == ["assistant_message"]

        # what Kelpie does not implement is refused, naming the field
        for settings in ({"mode": "self_compact_all"}, {"model": "openai/gpt-4o"}):
            with pytest.raises(letta_client.UnprocessableEntityError) as caught:
                await client.agents.messages.compact(agent.id, compaction_settings=settings)
            assert next(iter(settings)) in str(caught.value)
        with pytest.raises(letta_client.NotFoundError):
            await client.agents.messages.compact("agent-00000000-0000-4000-8000-000000000000")
        stored = [m async for m in client.agents.messages.list(agent.id, order="asc")]
        seen += [f"{m.message_type}:{m.id}" for m in stored]
        # a reset forgets the summary and the context window with the history
        await client.agents.messages.reset(agent.id)
        empty = await client.agents.messages.compact(agent.id)
        assert (empty.summary, empty.num_messages_before, empty.num_messages_after) == ("", 0, 0)
        await http.aclose()
    for item in seen:
        kelpie_dst.log("api.answer", body=item)
    return seen


def test_compaction_through_letta_client_deterministically() -> None:
    kelpie_dst.assert_deterministic(scenario, seeds=(1,), runs=2, **GUARDS)


def test_the_schema_allows_no_separate_summarizer_model() -> None:
    """The API's schema is exact (the fuzzer's rule): ``model`` and ``model_settings`` are
    refused with a 422 unless null, so the schema allows only null. It allowed any object for
    ``model_settings`` and any string for ``model``, and the fuzzer's schema-valid request with
    ``{"model_settings": {...}}`` got a 422."""
    from kelpie_agent.api._models_compaction import CompactionSettingsModel

    schema = CompactionSettingsModel.model_json_schema()["properties"]
    for field in ("model", "model_settings"):
        assert schema[field]["type"] == "null", schema[field]
        with pytest.raises(ValueError, match="separate summarizer model is not supported"):
            CompactionSettingsModel.model_validate(
                {field: {} if field == "model_settings" else "m"}
            )
    assert CompactionSettingsModel.model_validate({"model": None}).model is None
