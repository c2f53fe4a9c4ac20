"""letta-client's runs, top-level messages, passages.search, tags, models and tools.search against
the app, with strict response validation (``_strict_response_validation=True``: every answer
must match the SDK's models).

Runs are read from storage (their records and the agent's run index), so a run started with
``create_async`` can be followed as it goes (``runs.messages.stream``, resumed after a
``seq_id``), polled by id, listed with Letta's filters and cursors in both orders, and its
messages and usage read back.
"""

from __future__ import annotations

import httpx
import letta_client
import pytest
import trio
from letta_client import AsyncLetta

import kelpie_dst
from kelpie_dst.shims import LlmTiming, ScriptedPolicy

from .harness import BASE, api
from .test_letta_client import GUARDS, SOURCE

# The SDK finds the platform once per process (platform.uname runs a subprocess): do it now,
# so the first simulated run does not differ from the repeat.
letta_client._base_client.get_platform()
ECHO = ScriptedPolicy.from_dict({"mode": "scripted", "rules": [{"text": "echo: {text}"}]})


async def _poll(client: AsyncLetta, run_id: str) -> letta_client.types.Run:
    for _ in range(100):
        run = await client.runs.retrieve(run_id)
        if run.status not in ("created", "running"):
            return run
        await trio.sleep(0.5)
    raise AssertionError(f"run {run_id} never finished")


async def scenario() -> list[str]:
    seen: list[str] = []
    async with api(policy=ECHO, timing=LlmTiming()) as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(
            base_url=BASE, http_client=http, max_retries=0, _strict_response_validation=True
        )
        otto = await client.agents.create(
            name="otto", tags=["blue", "Team-A"], model="anthropic/claude-haiku-4-5"
        )
        ada = await client.agents.create(name="ada", tags=["red", "team-b"])

        # runs: a foreground one per agent, then a background one polled until it ends
        for agent, text in ((otto, "one"), (ada, "two"), (otto, "three")):
            await client.agents.messages.create(agent.id, input=text)
        started = await client.agents.messages.create_async(otto.id, input="later")
        # background mode: follow the run while it goes on, then resume after a seq_id
        assert (await client.runs.retrieve(started.id)).status == "running"
        stream = await client.runs.messages.stream(started.id, include_pings=False)
        chunks = [c async for c in stream]
        assert [c.message_type for c in chunks] == [
            "user_message",
            "assistant_message",
            "stop_reason",
            "usage_statistics",
        ]
        assert [getattr(c, "seq_id", None) for c in chunks] == [1, 2, None, None]
        resumed = await client.runs.messages.stream(started.id, starting_after=1)
        again = [c async for c in resumed]
        assert [(c.message_type, c.id) for c in again[:1]] == [
            ("assistant_message", chunks[1].id)  # type: ignore[union-attr]
        ]
        assert [c.message_type for c in again[1:]] == ["stop_reason", "usage_statistics"]
        done = await _poll(client, started.id)
        assert done.status == "completed" and done.background is True
        assert done.stop_reason == "end_turn" and done.agent_id == otto.id

        every = [r.id async for r in client.runs.list(order="asc")]
        assert len(every) == 4 and every[-1] == started.id
        newest = [r.id async for r in client.runs.list()]  # newest first by default
        assert newest == every[::-1]
        mine = [r.id async for r in client.runs.list(agent_id=otto.id, order="asc")]
        assert len(mine) == 3 and mine[-1] == started.id
        assert [r.id async for r in client.runs.list(agent_ids=[ada.id])] == [every[1]]
        assert [r.id async for r in client.runs.list(background=True)] == [started.id]
        assert len([r async for r in client.runs.list(statuses=["completed"])]) == 4
        assert [r async for r in client.runs.list(statuses=["failed"])] == []
        assert [r async for r in client.runs.list(active=True)] == []
        # cursors count in the listing order, as the SDK's pager needs (it sends
        # after=<last id> for the next page whatever the order); both orders, both cursors
        page = await client.runs.list(order="asc", after=every[0], limit=2)
        assert [r.id for r in page.items] == every[1:3]
        page = await client.runs.list(order="desc", after=every[3], limit=2)
        assert [r.id for r in page.items] == [every[2], every[1]]
        page = await client.runs.list(order="desc", before=every[0], limit=2)
        assert [r.id for r in page.items] == [every[2], every[1]]
        page = await client.runs.list(order="asc", before=every[3], limit=1)
        assert [r.id for r in page.items] == [every[2]]
        paged = [r.id async for r in client.runs.list(order="desc", limit=1)]
        assert paged == every[::-1]
        page = await client.runs.list(order="asc", after=every[0], before=every[3])
        assert [r.id for r in page.items] == every[1:3]

        usage = await client.runs.usage.retrieve(started.id)
        assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens > 0
        messages = [m async for m in client.runs.messages.list(started.id)]
        assert [m.message_type for m in messages] == ["user_message", "assistant_message"]
        assert messages[1].content == "echo: later"  # type: ignore[union-attr]
        last = await client.runs.messages.list(started.id, order="desc", limit=1)
        assert [m.id for m in last.items] == [messages[1].id]

        # every agent's messages, by date; one by id
        everything = await client.messages.list(order="asc")  # a plain list: not paged
        assert len(everything) == 10 and len({m.id for m in everything}) == 10
        types = [m.message_type for m in everything]
        assert types.count("system_message") == 2  # each agent's message 0, as in Letta
        asked = [m.content for m in everything if m.message_type == "user_message"]
        assert asked == ["one", "two", "three", "later"]
        newest = await client.messages.list(limit=2)
        assert [m.id for m in newest] == [everything[-1].id, everything[-2].id]
        page = await client.messages.list(order="asc", after=everything[1].id, limit=2)
        assert [m.id for m in page] == [everything[2].id, everything[3].id]
        said = await client.messages.list(include_return_message_types=["assistant_message"])
        assert [m.content for m in said][::-1] == [f"echo: {t}" for t in asked]
        echo = next(m for m in everything if m.message_type == "assistant_message")
        (one,) = await client.messages.retrieve(echo.id)
        assert one.id == echo.id and one.content == "echo: one"  # type: ignore[union-attr]

        # passages.search: one agent's archival memory or every agent's, best first
        await client.agents.passages.create(otto.id, text="otters hold hands while asleep")
        await client.agents.passages.create(ada.id, text="ada wrote the first program")
        await client.agents.passages.create(ada.id, text="otters eat sea urchins", tags=["sea"])
        found = await client.passages.search(query="otters asleep")
        assert [f.passage.text for f in found][:2] == [
            "otters hold hands while asleep",
            "otters eat sea urchins",
        ]
        assert found[0].metadata == {"agent_id": otto.id} and len(found) == 3
        assert found[0].score >= found[1].score >= found[2].score
        only = await client.passages.search(query="otters", agent_id=ada.id, tags=["sea"])
        assert [f.passage.text for f in only] == ["otters eat sea urchins"]
        # refusals the schema cannot state are 400s (searching one archive; no query)
        with pytest.raises(letta_client.BadRequestError, match="archive_id"):
            await client.passages.search(query="x", archive_id="archive-1")
        with pytest.raises(letta_client.BadRequestError, match=r"body\.query"):
            await client.passages.search(agent_id=ada.id)

        # tags: every agent tag once, alphabetical; name filters; cursors are tags
        assert await client.tags.list() == ["Team-A", "blue", "red", "team-b"]
        assert await client.tags.list(name="team") == ["Team-A", "team-b"]
        assert await client.tags.list(order="desc", after="red", limit=1) == ["blue"]
        assert await client.tags.list(after="blue", before="team-b") == ["red"]
        # a page asked only `before` a tag holds the tags nearest it (paging backwards)
        assert await client.tags.list(before="team-b", limit=2) == ["blue", "red"]
        assert await client.tags.list(order="desc", before="Team-A", limit=1) == ["blue"]

        # models: the default and every model an agent has
        models = await client.models.list()
        assert [m.handle for m in models] == [
            "anthropic/claude-haiku-4-5",
            "anthropic/claude-sonnet-5-5",
        ]
        assert all(m.provider_type == "anthropic" for m in models)
        assert await client.models.list(provider_type="openai") == []
        assert len(await client.models.list(provider_category=["base"])) == 2
        # models.embeddings: the node's embedder, the one folders report
        (embedding,) = await client.models.embeddings.list()
        assert (embedding.name, embedding.embedding_dim) == ("kelpie-hashing-v1-512", 512)
        assert embedding.handle == "kelpie/kelpie-hashing-v1-512"
        assert embedding.provider_type == embedding.embedding_endpoint_type == "hugging-face"
        folder = await client.folders.create(name="docs")
        assert folder.embedding_config.embedding_model == embedding.embedding_model
        assert folder.embedding_config.embedding_dim == embedding.embedding_dim

        # tools.search: vector, full-text and hybrid ranking, filters
        shout = await client.tools.create(source_code=SOURCE, tags=["loud"])
        hits = await client.tools.search(query="shout loud", search_mode="hybrid")
        assert hits[0].tool.id == shout.id and hits[0].fts_rank == 1
        assert hits[0].vector_rank == 1 and hits[0].combined_score == pytest.approx(2 / 61)
        fts = await client.tools.search(query="shout", search_mode="fts")
        assert [h.tool.name for h in fts] == ["shout"]
        assert await client.tools.search(query="zebra crossing", search_mode="fts") == []
        custom = await client.tools.search(query="memory", tool_types=["custom"])
        assert [h.tool.name for h in custom] == ["shout"]
        tagged = await client.tools.search(tags=["loud"])
        assert [(h.tool.name, h.combined_score) for h in tagged] == [("shout", 0.0)]
        builtin = await client.tools.search(query="archival memory search", limit=2)
        assert len(builtin) == 2 and builtin[0].tool.tool_type != "custom"
        with pytest.raises(letta_client.UnprocessableEntityError):
            await client.tools.search(query="x", search_mode="regex")  # type: ignore[arg-type]

        with pytest.raises(letta_client.NotFoundError):
            await client.runs.retrieve("run-00000000-0000-4000-8000-000000000000")
        with pytest.raises(letta_client.NotFoundError):
            await client.runs.list(after="run-00000000-0000-4000-8000-000000000000")
        with pytest.raises(letta_client.UnprocessableEntityError):
            await client.runs.list(statuses=["sleeping"])
        with pytest.raises(letta_client.NotFoundError):
            await client.messages.retrieve("message-00000000-0000-4000-8000-000000000000")
        with pytest.raises(letta_client.NotFoundError):
            await client.messages.list(conversation_id="conv-00000000-0000-4000-8000-000000000000")
        with pytest.raises(letta_client.NotFoundError):
            await client.runs.messages.stream(started.id, agent_id=ada.id)
        with pytest.raises(letta_client.BadRequestError, match="otid"):
            await client.runs.messages.stream(started.id, otid="some-otid")
        seen += [*every, *(m.id for m in messages), *(await client.tags.list())]
        await http.aclose()
    for item in seen:
        kelpie_dst.log("api.answer", body=item)
    return seen


def test_runs_tags_and_models_through_letta_client_deterministically() -> None:
    kelpie_dst.assert_deterministic(scenario, seeds=(1,), runs=2, **GUARDS)
