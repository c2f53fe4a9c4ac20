"""Requests that cross nodes, judged by what the client was answered (``handover``).

With ``handover`` on, alongside the agents' clients (while the faults go on: after the
clients they have healed), one more client sends its requests to random nodes, hopping after
failures, so its agent's lease moves from node to node between (and during) requests, and the
service's own retries across nodes (after a lost lease, storage giving up, a node going down)
decide what the client is told. It logs what it was answered for
:func:`._agent_handover_checks.check_handover` (``handover_contract``):

1. **Agents of its own**: a memgpt agent ``handover-agent`` (its base tools, a ``notes`` block,
   the marker ``mark-a902`` so the LLM oracle attributes its prompts), a custom tool and a
   standalone block that it never attaches, and a bare letta_v1 agent whose agent file is the
   envelope of the document in step 6.
2. **Missing things**: detaching the tool and the block it never attached, and deleting a
   passage that does not exist, and detaching the tool a second time after a detach that was
   answered: each must be a 404, except where the server logged a retry of its own meanwhile
   (after an unknown outcome a detach or delete takes "not found" as its earlier success).
3. **Tool runs**: ``core_memory_append`` run directly (``agents.tools.run``) with a tag of its
   own, several times. A retry first reads the block and stops if the tag is there. At the end
   the ``notes`` block holds each tag at most as many times as the client sent its run, and
   once at least if a run was answered with success.
4. **Retried sends**: three sends with an ``otid`` each, then the first one sent again with
   its ``otid`` (to another node): the answer must be the first answer (the same run, the same
   messages in order), however many runs came in between.
5. **A background run**: ``create_async``, then ``runs.retrieve`` of the run it answered on
   another node at once (a run the client was given must exist), then until it ends.
6. **Agent file steps**: the client writes an agent file whose history has a step with
   reasoning, text and two tool calls, one result a success and one an error, and imports
   it; the import's history must keep every result's status, and its export must give back
   the document's messages (roles, parts, calls grouped in their step's message, each result
   under its call's id with its status).
7. **Sandbox files that move**: ``run_code`` through the API writes a file larger than one
   sandbox image chunk; then, each time on another node (the agent moves, and its sandbox
   comes back from its stored image), ``run_code`` reads it: every read that succeeds shows
   the whole file, and none fails to restore the image (the world has no sandbox faults).

Every create is retry-safe (looked up by name before a retry); sends carry an ``otid``.
"""

from __future__ import annotations

import json
from typing import Any

import letta_client
import trio

from kelpie_agent.agent import builtin_id, default_tool_names

from ._agent_handover_checks import (
    FileRoundTrip,
    HandoverLog,
    Missing,
    Replay,
    TagRun,
    message_shape,
)
from ._agent_walker import SdkWalker, sdk_method

__all__ = ["MARK", "HandoverWalker"]

MARK = "mark-a902"
"""The handover agent's marker (``_agent_prompt.AGENT_MARK``); no planned agent has number 902."""
AGENT = "handover-agent"
DOC_AGENT = "handover-doc"
COPY = "handover-copy"
LOOSE_BLOCK = "handover-loose"
TOOL_SOURCE = '''def handover_probe(note: str) -> str:
    """Probe a handover.

    Args:
        note: what to note

    Returns:
        str: the note
    """
    return note
'''
TAG_RUNS = 6
BIG = 300_001  # bytes: more than one sandbox image chunk (256 KiB), and not a multiple of it
WRITE_BIG = f"with open('big.txt', 'w') as f:\n    f.write('k' * {BIG})\nprint('wrote')"
READ_BIG = "print('size', len(open('big.txt').read()))"
SANDBOX_READS = 3
SENDS = 3
# The history the client writes into its agent file: a step with reasoning, text and two
# calls, one result a success and one an error, then a reply.
DOC_HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": [{"type": "text", "text": "check both tide tables"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "reasoning", "reasoning": "two tables to read"},
            {"type": "text", "text": "reading them now"},
        ],
        "tool_calls": [
            {
                "id": "call-tide-1",
                "type": "function",
                "function": {"name": "handover_probe", "arguments": '{"note": "north"}'},
            },
            {
                "id": "call-tide-2",
                "type": "function",
                "function": {"name": "handover_probe", "arguments": '{"note": "south"}'},
            },
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call-tide-1",
        "content": [{"type": "text", "text": "north: high at six"}],
        "tool_returns": [
            {
                "tool_call_id": "call-tide-1",
                "status": "success",
                "func_response": "north: high at six",
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call-tide-2",
        "content": [{"type": "text", "text": "Error: no south table"}],
        "tool_returns": [
            {
                "tool_call_id": "call-tide-2",
                "status": "error",
                "func_response": "Error: no south table",
            }
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "the south table is missing"}]},
    {"role": "user", "content": [{"type": "text", "text": "drop the old tables"}]},
    {  # a call that waited for approval, and the client's denial
        "role": "approval",
        "content": [],
        "tool_calls": [
            {
                "id": "call-tide-3",
                "type": "function",
                "function": {"name": "handover_probe", "arguments": '{"note": "drop"}'},
            }
        ],
    },
    {
        "role": "approval",
        "content": [],
        "approval_request_id": "message-7",
        "approvals": [
            {
                "type": "approval",
                "tool_call_id": "call-tide-3",
                "approve": False,
                "reason": "keep them",
            }
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "the old tables stay"}]},
]


class HandoverWalker(SdkWalker):
    """Drives requests across nodes and logs what it was answered (module docstring)."""

    PREFIX = "handover"

    def __init__(self, clients: Any, rng: Any) -> None:
        super().__init__(clients, rng)
        self.log = HandoverLog()
        self.problems = self.log.problems
        self.agent: str | None = None
        self.doc_agent: str | None = None
        self.tool: str | None = None
        self.block: str | None = None

    async def run(self) -> None:
        await self._phases(
            (
                self._setup,
                self._missing,
                self._tool_runs,
                self._replays,
                self._background,
                self._agent_file,
                self._sandbox_image,
            ),
            lambda phase: phase == self._setup or self.agent is not None,
        )

    def _hop(self) -> None:
        """Send the next request to another node, so the agent's lease moves."""
        nodes = self.clients.world.node_names
        if len(nodes) > 1:
            self.state["node"] = self.rng.choice([n for n in nodes if n != self.state["node"]])

    # -- 1. agents, a tool and a block it never attaches --------------------------------------
    async def _named_agent(self, name: str, **fields: Any) -> str:
        async def find(sdk: Any) -> Any:
            page = await sdk.agents.list(name=name, limit=1, order="asc")
            return page.items[0] if page.items else None

        async def make(sdk: Any) -> Any:
            return await sdk.agents.create(name=name, include_base_tools=False, **fields)

        made = await self._create(f"agent {name}", find, make)
        return str(made.id)

    async def _setup(self) -> None:
        tool = await self._sdk("tools.upsert", source_code=TOOL_SOURCE, tags=["handover"])
        self.tool = str(tool.id)

        async def find(sdk: Any) -> Any:
            page = await sdk.blocks.list(label=LOOSE_BLOCK, limit=1, order="asc")
            return page.items[0] if page.items else None

        block = await self._create(
            f"block {LOOSE_BLOCK}",
            find,
            lambda sdk: sdk.blocks.create(label=LOOSE_BLOCK, value="never attached"),
        )
        self.block = str(block.id)
        self.doc_agent = await self._named_agent(DOC_AGENT, agent_type="letta_v1_agent")
        self.agent = await self._named_agent(
            AGENT,
            agent_type="memgpt_agent",
            memory_blocks=[
                {"label": "human", "value": f"The handover walker ({MARK}).", "limit": 4000},
                {"label": "persona", "value": "A terse helper.", "read_only": True},
                {"label": "notes", "value": "notes:", "limit": 4000},
            ],
            tool_ids=[
                *(builtin_id(n) for n in default_tool_names("memgpt_agent")),
                builtin_id("run_code"),
            ],
        )

    # -- 2. missing things are 404s -----------------------------------------------------------
    async def _status(self, what: str, path: str, *args: Any, **kwargs: Any) -> Missing:
        """``sdk.<path>(...)`` on a node other than the last one's; its answer's status."""
        self._hop()
        started = trio.current_time()

        async def attempt(sdk: Any, _: int) -> int:
            try:
                await sdk_method(sdk, path)(*args, **kwargs)
            except letta_client.NotFoundError:
                return 404
            return 200

        status = await self._call(what, attempt)
        return Missing(what, status, started, trio.current_time())

    async def _missing(self) -> None:
        assert self.agent is not None and self.tool is not None and self.block is not None
        agent = self.agent
        self.log.missing.append(
            await self._status(
                "detach a tool never attached", "agents.tools.detach", self.tool, agent_id=agent
            )
        )
        self.log.missing.append(
            await self._status(
                "detach a block never attached", "agents.blocks.detach", self.block, agent_id=agent
            )
        )
        self.log.missing.append(
            await self._status(
                "delete a passage that does not exist",
                "agents.passages.delete",
                "passage-00000000-0000-4000-8000-000000000902",
                agent_id=agent,
            )
        )
        await self._sdk("agents.tools.attach", self.tool, agent_id=agent)

        async def detach(sdk: Any, number: int) -> None:
            try:
                await sdk.agents.tools.detach(self.tool, agent_id=agent)
            except letta_client.NotFoundError:
                if number == 1:  # a retry's 404: the attempt whose answer was lost landed
                    raise

        await self._call("agents.tools.detach", detach)
        self.log.missing.append(
            await self._status(
                "detach a tool again after its detach was answered",
                "agents.tools.detach",
                self.tool,
                agent_id=agent,
            )
        )

    # -- 3. tool runs: each at most once per attempt ------------------------------------------
    async def _notes(self, sdk: Any) -> str:
        block = await sdk.agents.blocks.retrieve("notes", agent_id=self.agent)
        return str(block.value)

    async def _tool_runs(self) -> None:
        for k in range(TAG_RUNS):
            tag = f"[hv-{k}]"
            record = TagRun(tag)
            self._hop()

            async def attempt(
                sdk: Any, number: int, tag: str = tag, record: TagRun = record
            ) -> str:
                if number > 1 and tag in await self._notes(sdk):
                    return "found"
                record.sent += 1
                got = await sdk.agents.tools.run(
                    "core_memory_append",
                    agent_id=self.agent,
                    args={"label": "notes", "content": tag},
                )
                return str(got.status)

            record.answer = await self._call(f"run core_memory_append {tag}", attempt)
            self.log.tag_runs.append(record)
        self.log.notes = await self._sdk("agents.blocks.retrieve", "notes", agent_id=self.agent)
        self.log.notes = str(self.log.notes.value)

    # -- 4. a send retried after other runs is answered by its own run ------------------------
    async def _send(self, n: int) -> tuple[tuple[str, str], ...]:
        otid = f"handover-send-{n}"
        text = f"remember handover note {n} ({MARK})"
        self._hop()
        got = await self._sdk(
            "agents.messages.create",
            self.agent,
            messages=[{"role": "user", "content": text, "otid": otid}],
        )
        return tuple((str(m.id), str(m.message_type)) for m in got.messages)

    async def _replays(self) -> None:
        first = [await self._send(n) for n in range(SENDS)]
        again = await self._send(0)
        self.log.replays.append(Replay("send 0 again after sends 1-2", first[0], again))

    # -- 5. a background run exists as soon as it is answered ---------------------------------
    async def _background(self) -> None:
        otid = "handover-async-0"
        text = f"remember handover background note ({MARK})"
        self._hop()
        run = await self._sdk(
            "agents.messages.create_async",
            self.agent,
            messages=[{"role": "user", "content": text, "otid": otid}],
        )
        run_id = str(run.id)
        self._hop()

        async def attempt(sdk: Any, _: int) -> Any:
            try:
                return await sdk.runs.retrieve(run_id)
            except letta_client.NotFoundError:
                return None

        seen = await self._call(f"runs.retrieve {run_id} at once", attempt)
        self.log.runs_seen.append((run_id, "at once", None if seen is None else str(seen.status)))
        for _ in range(90):
            if seen is not None and str(seen.status) not in ("created", "running"):
                break
            await trio.sleep(1)
            seen = await self._call(f"runs.retrieve {run_id}", attempt)
        self.log.runs_seen.append(
            (run_id, "at the end", None if seen is None else str(seen.status))
        )

    # -- 6. an agent file's steps and statuses survive import and export ---------------------
    async def _agent_file(self) -> None:
        assert self.doc_agent is not None
        exported = await self._sdk("agents.export_file", self.doc_agent)
        document = json.loads(exported) if isinstance(exported, str) else dict(exported)
        source = document["agents"][0]
        system = [m for m in source.get("messages") or () if m.get("role") == "system"][:1]
        history = [{**_blank(len(system) + i), **m} for i, m in enumerate(DOC_HISTORY)]
        source["messages"] = [*system, *history]
        source["in_context_message_ids"] = [m["id"] for m in source["messages"]]
        raw = json.dumps(document).encode()

        async def find(sdk: Any) -> Any:
            page = await sdk.agents.list(name=COPY, limit=1, order="asc")
            return page.items[0].id if page.items else None

        async def make(sdk: Any) -> Any:
            got = await sdk.agents.import_file(file=("handover.af", raw), name=COPY)
            return got.agent_ids[0] if got.agent_ids else None

        copy = await self._create("agents.import_file", find, make)
        if copy is None:
            self.log.problems.append("agents.import_file answered no agent id")
            return
        copied = await self._sdk("agents.export_file", str(copy))
        again = json.loads(copied) if isinstance(copied, str) else dict(copied)
        listed = await self._sdk("agents.messages.list", str(copy), limit=1000, order="asc")
        statuses = tuple(
            (str(m.tool_call_id), str(m.status))
            for m in listed.items
            if m.message_type == "tool_return_message"
        )
        self.log.files.append(
            FileRoundTrip(
                "import then export",
                tuple(message_shape(m) for m in history),
                tuple(
                    message_shape(m)
                    for m in again["agents"][0].get("messages") or ()
                    if m.get("role") != "system"
                ),
                statuses,
            )
        )

    # -- 7. a sandbox's files follow the agent to other nodes ---------------------------------
    async def _run_code(self, what: str, code: str) -> tuple[str, str]:
        """``run_code`` through the API on another node than the last: (status, output)."""
        self._hop()
        got = await self._sdk(
            "agents.tools.run",
            "run_code",
            agent_id=self.agent,
            args={"code": code, "language": "python"},
        )
        text = "".join(got.stdout or ()) + (str(got.func_return) if got.func_return else "")
        return str(got.status), text

    async def _sandbox_image(self) -> None:
        """A file larger than one image chunk (256 KiB), written by an answered run, then read
        on other nodes (the agent moves there, and its sandbox comes back from its image)."""
        status, text = await self._run_code("write a big file", WRITE_BIG)
        self.log.sandbox.append(("write", status, text))
        if status != "success":
            return
        for n in range(SANDBOX_READS):
            status, text = await self._run_code(f"read it back ({n})", READ_BIG)
            self.log.sandbox.append(("read", status, text))


def _blank(n: int) -> dict[str, Any]:
    """The fields every message of an agent file carries, for the n-th message."""
    return {
        "type": "message",
        "id": f"message-{n}",
        "agent_id": "agent-0",
        "name": None,
        "otid": None,
        "tool_calls": None,
        "tool_call_id": None,
        "tool_returns": [],
        "created_at": f"2026-01-01T00:00:{n:02d}+00:00",
    }
