"""The REST surface no other scenario drives, through the real SDK (``surface``, via HTTP).

With ``surface`` on, once the agents' clients are done (the faults go on), one more client, on
random nodes, hopping after failures, drives the areas of the API that nothing else runs and
logs what it read for :func:`._agent_surface_checks.check_surface` (``api_surface_contract``):

1. **Standalone block updates and a delete**: a block ``Surf-0`` gets a run of ``PATCH``
   updates, each giving a random subset of its fields, falsy values included (``""``, false,
   ``{}``); the answer and a read after each are compared with the model. A block attached to
   the surface agent is deleted, then looked for everywhere.
2. **A surface agent** of its own (no tools; two tool rules, one ``parent_last_tool``), so the
   other agents' checks see nothing new: it is sent three messages streamed with
   ``include_return_message_types``, which makes its steps (three at least).
3. **Steps**: feedback on its steps (one rated twice, the second time without tags), each
   read back, and ``steps.list`` walked by ``has_feedback``, ``feedback``, ``tags`` and run
   (``trace_ids``), and each run's steps (``runs.steps.list``).
4. **Folders and files**: a folder is updated four times (random subsets of its fields),
   gets five uploads named in the reverse of their upload order, is attached to the surface
   agent, two of its files are closed, and its files and the agent's files are walked in
   pages (``after`` cursors; ``next_cursor`` while ``has_more``), by ``is_open`` too.
5. **Agent file**: the surface agent is exported and imported; the copy is compared with the
   source, and the copy's memory written.
6. **Deletes**: one of the folder's files, then the folder, each looked for everywhere.
7. **The HTTP layer**: a block created with a chunked request body; a percent-encoded path;
   a read right after each of two requests whose 4 KB bodies the app never reads.
8. **The error contract**: requests the schema refuses, the state refuses, or that name an
   unknown id or route or a method the path does not serve (through the SDK, and as raw
   bytes); the status, ``x-should-retry`` and ``Allow`` of each answer are kept.

A request that fails with an error the client must not retry is a problem
(``every_request_completed`` records it too), except in step 6, whose requests are meant to
fail.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import letta_client
import trio
from letta_client.types import Folder, Step
from letta_client.types.agent_import_file_response import AgentImportFileResponse
from letta_client.types.agents.file_list_response import FileListResponse as AgentFiles
from letta_client.types.folders.file_list_response import FileListResponse
from letta_client.types.folders.file_upload_response import FileUploadResponse

from ._agent_surface_checks import (
    BlockState,
    ErrorSeen,
    FileSeen,
    FolderState,
    PageWalk,
    StepSeen,
    StreamSeen,
    SurfaceLog,
)
from ._agent_walker import SdkWalker
from ._agent_world import PORT

__all__ = ["SurfaceWalker"]

AGENT = "surface-agent-0"
MARK = "mark-a900"
"""The surface agent's marker: the LLM oracle names each prompt's agent by the ``mark-aN`` it
shows (``_agent_prompt.AGENT_MARK``), and no planned agent has number 900."""
UPDATES = 6
FILES = 5
STREAMS = 3  # messages to the surface agent: three steps at least, two of them rated
ASKED = ("assistant_message",)
RULES: tuple[dict[str, Any], ...] = (
    {"type": "parent_last_tool", "tool_name": "surf_probe", "children": ["surf_after"]},
    {"type": "max_count_per_step", "tool_name": "surf_after", "max_count_limit": 2},
)
CHOICES: dict[str, tuple[Any, ...]] = {
    "value": ("", "kelp surface", "tide note 2"),
    "description": ("", "a surface block", "reef"),
    "read_only": (True, False),
    "metadata": ({}, {"kind": "surface"}, {"n": 2}),
    "limit": (200, 300),
}
HUMAN_CHOICES: dict[str, tuple[Any, ...]] = {
    "value": ("", f"kelp human ({MARK})", f"tide note ({MARK})"),
    "description": ("", "the human", "who talks"),
    "metadata": ({}, {"who": "walker"}),
    "limit": (400, 500),
}
FOLDER_CHOICES: dict[str, tuple[Any, ...]] = {
    "name": ("surface-docs", "Surface Docs 2"),
    "description": ("", "field notes", "tide log"),
    "instructions": ("", "cite them"),
    "metadata": ({}, {"shelf": 2}),
}
RAW_PROBES: tuple[tuple[str, str, str, bytes | None, int], ...] = (
    # (what, method, path, JSON body, the status the contract names)
    ("GET of an unknown route", "GET", "/v1/no-such-route", None, 404),
    ("DELETE /v1/blocks/ (no such method)", "DELETE", "/v1/blocks/", None, 405),
    ("POST /v1/blocks/ with a body that is not JSON", "POST", "/v1/blocks/", b'{"label": ', 422),
    (
        "POST /v1/blocks/ with a field it does not have",
        "POST",
        "/v1/blocks/",
        b'{"label": "Surf-x", "value": "v", "colour": "red"}',
        422,
    ),
    ("GET /v1/blocks/?order=sideways", "GET", "/v1/blocks/?order=sideways", None, 422),
    ("GET /v1/steps/?limit=1001 (over the page limit)", "GET", "/v1/steps/?limit=1001", None, 422),
)
STEP_WALKS: tuple[dict[str, Any], ...] = (
    {"has_feedback": True},
    {"has_feedback": False},
    {"feedback": "positive"},
    {"tags": ["surf-a"]},
)


def _warm() -> None:
    """Build the SDK's response models of these areas now, at import: they are built lazily on
    first use, and during a run the guards have swapped letta_client's ``datetime`` for the
    simulated one, which pydantic cannot make a schema of."""
    for model in (
        AgentFiles,
        AgentImportFileResponse,
        FileListResponse,
        FileUploadResponse,
        Folder,
        Step,
    ):
        model.model_rebuild()


_warm()


def _block(b: Any) -> BlockState:
    return BlockState.of(
        {
            "label": b.label,
            "value": b.value,
            "limit": b.limit,
            "description": b.description,
            "read_only": b.read_only,
            "metadata": b.metadata,
        }
    )


def _rule(r: Any) -> tuple[Any, ...]:
    """A tool rule as (type, tool, children, limit), from the SDK's object or a dict."""
    fields = r if isinstance(r, dict) else vars(r)
    children = tuple(fields.get("children") or ())
    return (fields.get("type"), fields.get("tool_name"), children, fields.get("max_count_limit"))


def _folder(f: Any) -> FolderState:
    return FolderState.of(
        {
            "name": f.name,
            "description": f.description,
            "instructions": f.instructions,
            "metadata": f.metadata,
        }
    )


def _ids(items: Any) -> set[str]:
    return {str(x.id) for x in items}


def _step(s: Any) -> StepSeen:
    return StepSeen(str(s.id), s.feedback, tuple(s.tags or ()), str(s.run_id or ""))


class SurfaceWalker(SdkWalker):
    """Drives the surface areas and logs what it read (see the module docstring)."""

    PREFIX = "surface"

    def __init__(self, clients: Any, rng: Any) -> None:
        super().__init__(clients, rng)
        self.log = SurfaceLog()
        self.problems = self.log.problems
        self.agent: str | None = None
        self.folder: str | None = None

    async def run(self) -> None:
        first = (self._blocks, self._agent, self._errors)  # the rest need the agent
        await self._phases(
            (
                self._blocks,
                self._agent,
                self._stream,
                self._delete_block,
                self._steps,
                self._folders,
                self._agent_file,
                self._deletes,
                self._http_layer,
                self._errors,
            ),
            lambda phase: phase in first or self.agent is not None,
        )

    # -- 1. standalone blocks ----------------------------------------------------------------
    async def _make_block(self, label: str, fields: dict[str, Any]) -> Any:
        async def find(sdk: Any) -> Any:
            page = await sdk.blocks.list(label=label, limit=1, order="asc")
            return page.items[0] if page.items else None

        return await self._create(
            f"block {label}", find, lambda sdk: sdk.blocks.create(label=label, **fields)
        )

    async def _blocks(self) -> None:
        fields: dict[str, Any] = {
            "value": "surface note",
            "description": "made by the surface walk",
            "limit": 200,
            "metadata": {"kind": "surface", "n": 0},
            "read_only": False,
        }
        made = await self._make_block("Surf-0", fields)
        model = {"label": "Surf-0", **fields}
        names = sorted(CHOICES)
        for k in range(UPDATES):
            count = int(self.rng.choice((1, 1, 2, 3)))
            chosen = sorted(self.rng.sample(names, count))
            if k == 0:
                chosen = sorted({*chosen, "value"})
            changes = {name: self.rng.choice(CHOICES[name]) for name in chosen}
            if k == 0:
                changes["value"] = ""  # a falsy value at least once
            answer = await self._sdk("blocks.update", made.id, **changes)
            model.update(changes)
            want = BlockState.of(model)
            shown = ", ".join(f"{n}={v!r}" for n, v in changes.items())
            self.log.block_updates.append(
                (f"blocks.update({shown}) answered", _block(answer), want)
            )
            seen = await self._sdk("blocks.retrieve", made.id)
            self.log.block_updates.append(
                (f"blocks.retrieve after update {k + 1}", _block(seen), want)
            )

    async def _delete_block(self) -> None:
        agent = self.agent
        made = await self._make_block("Surf-gone", {"value": "to be deleted", "limit": 100})
        await self._sdk("agents.blocks.attach", made.id, agent_id=agent)

        async def delete(sdk: Any, number: int) -> None:
            try:
                await sdk.blocks.delete(made.id)
            except letta_client.NotFoundError:
                if number == 1:
                    raise  # a retry finds it gone: the first attempt landed

        await self._call(f"delete block {made.id}", delete)
        self.log.deleted_block = made.id
        reads = self.log.deleted_reads

        async def gone(sdk: Any, _: int) -> bool:
            try:
                await sdk.blocks.retrieve(made.id)
            except letta_client.NotFoundError:
                return True
            return False

        reads.append(("blocks.retrieve (no 404)", not await self._call("deleted block", gone)))
        page = await self._sdk("blocks.list", limit=1000, order="asc")
        reads.append(("blocks.list", made.id in {b.id for b in page.items}))
        page = await self._sdk("blocks.list", label="Surf-gone", limit=10)
        reads.append(("blocks.list(label=Surf-gone)", bool(page.items)))
        page = await self._sdk("agents.blocks.list", agent, limit=100)
        reads.append((f"agents.blocks.list({agent})", made.id in {b.id for b in page.items}))
        state = await self._sdk("agents.retrieve", agent)
        reads.append((f"agents.retrieve({agent})", made.id in {b.id for b in state.blocks or ()}))

    # -- 2. the surface agent and its streams ----------------------------------------------
    async def _agent(self) -> None:
        async def find(sdk: Any) -> Any:
            page = await sdk.agents.list(name=AGENT, limit=1, order="asc")
            return page.items[0] if page.items else None

        async def make(sdk: Any) -> Any:
            return await sdk.agents.create(
                name=AGENT,
                agent_type="letta_v1_agent",
                memory_blocks=[
                    {"label": "human", "value": f"The surface walker ({MARK}).", "limit": 400},
                    {"label": "persona", "value": "A terse helper.", "read_only": True},
                ],
                tool_rules=[dict(r) for r in RULES],
                include_base_tools=False,
                tags=["surface"],
            )

        made = await self._create(f"agent {AGENT}", find, make)
        self.agent = str(made.id)
        await self._agent_block_updates()

    async def _agent_block_updates(self) -> None:
        """Four ``PATCH /v1/agents/{id}/core-memory/blocks/human``, each a random subset of
        the fields (falsy values too), each answer and reads after it (by label, by id) held
        to the model."""
        agent = self.agent
        block = await self._sdk("agents.blocks.retrieve", "human", agent_id=agent)
        model = {
            "label": "human",
            "value": block.value,
            "limit": block.limit,
            "description": block.description,
            "read_only": block.read_only,
            "metadata": dict(block.metadata or {}),
        }
        names = sorted(HUMAN_CHOICES)
        updates = self.log.block_updates
        for k in range(4):
            chosen = sorted(self.rng.sample(names, int(self.rng.choice((1, 2)))))
            changes = {name: self.rng.choice(HUMAN_CHOICES[name]) for name in chosen}
            answer = await self._sdk("agents.blocks.update", "human", agent_id=agent, **changes)
            model.update(changes)
            want = BlockState.of(model)
            shown = ", ".join(f"{n}={v!r}" for n, v in changes.items())
            updates.append((f"agents.blocks.update(human, {shown}) answered", _block(answer), want))
            seen = await self._sdk("agents.blocks.retrieve", "human", agent_id=agent)
            updates.append(
                (f"agents.blocks.retrieve(human) after update {k + 1}", _block(seen), want)
            )
            seen = await self._sdk("blocks.retrieve", block.id)
            updates.append(
                (f"blocks.retrieve(human's id) after update {k + 1}", _block(seen), want)
            )

    async def _stream(self) -> None:
        for k in range(STREAMS):
            otid = f"surface-{k}"
            text = f"kelp tide question {k} ({MARK})"
            body = {"role": "user", "content": text, "otid": otid}
            what = f"stream {k} (include_return_message_types={list(ASKED)})"

            async def attempt(sdk: Any, _: int, body: Any = body, what: str = what) -> None:
                stream: Any = await sdk.agents.messages.create(
                    self.agent,
                    messages=[body],
                    streaming=True,
                    stream_tokens=False,
                    include_return_message_types=list(ASKED),
                )
                frames = [str(chunk.message_type) async for chunk in stream]
                self.log.streams.append(StreamSeen(what, ASKED, tuple(frames)))

            await self._call(what, attempt)
        await self._disconnect()

    async def _disconnect(self) -> None:
        """A stream the client leaves after its first frame: the run goes on and is stored
        (docs/http-api.md: a disconnect stops the stream, not the run)."""
        body = {"role": "user", "content": f"kelp tide, then gone ({MARK})", "otid": "surface-gone"}

        async def attempt(sdk: Any, _: int) -> str | None:
            stream: Any = await sdk.agents.messages.create(
                self.agent, messages=[body], streaming=True, stream_tokens=True
            )
            run: str | None = None
            async for chunk in stream:
                run = getattr(chunk, "run_id", None) or run
                if run:
                    break
            await stream.close()  # the client goes away mid-stream
            return run

        run = await self._call("a stream left after its first frame", attempt)
        if not run:
            return
        for _ in range(40):  # the run ends on its own; judged once it has
            got = await self._sdk("runs.retrieve", run)
            if got.status not in ("created", "running"):
                break
            await trio.sleep(1.0)
        else:
            return  # still running (its node may be down): nothing to judge
        page = await self._sdk("agents.messages.list", self.agent, limit=1000, order="asc")
        stored = sum(1 for m in page.items if getattr(m, "run_id", None) == run)
        self.log.left_runs.append((run, str(got.status), got.stop_reason, stored))

    # -- 3. steps ----------------------------------------------------------------------------
    async def _agent_steps(self) -> list[StepSeen]:
        page = await self._sdk("steps.list", agent_id=self.agent, limit=1000, order="asc")
        return [_step(s) for s in page.items]

    async def _steps(self) -> None:
        log = self.log
        steps = await self._agent_steps()
        log.steps_model = {s.id: (s.feedback, s.tags) for s in steps}
        rated = steps[:2]
        plan: list[tuple[StepSeen, str, list[str] | None]] = []
        if rated:
            plan.append((rated[0], "positive", ["surf-a"]))
            plan.append((rated[0], "negative", None))  # without tags: they stay
        if len(rated) > 1:
            plan.append((rated[1], "positive", ["surf-b"]))
        for step, feedback, tags in plan:
            extra = {} if tags is None else {"tags": tags}
            await self._sdk("steps.feedback.create", step.id, feedback=feedback, **extra)
            old = log.steps_model[step.id]
            log.steps_model[step.id] = (feedback, tuple(tags) if tags is not None else old[1])
        for step in rated:
            log.steps_read.append(_step(await self._sdk("steps.retrieve", step.id)))
        log.steps_ref = await self._agent_steps()
        history = await self._sdk("agents.messages.list", self.agent, limit=1000, order="asc")
        log.step_history = [
            (str(m.id), str(m.message_type), getattr(m, "step_id", None)) for m in history.items
        ]
        for step in log.steps_ref:
            got = await self._sdk("steps.messages.list", step.id, limit=1000)
            items = got if isinstance(got, list) else got.items
            log.step_messages[step.id] = tuple(
                sorted({(str(m.id), str(m.message_type)) for m in items})
            )
        runs = list(dict.fromkeys(s.run_id for s in log.steps_ref if s.run_id))
        for run in runs[:2]:
            for order in ("asc", "desc"):
                size = int(self.rng.choice((1, 2)))
                got = await self._walk("steps.list", {"trace_ids": [run]}, order, size)
                log.step_walks.append(
                    PageWalk("steps", (("trace_ids", (run,)),), order, size, tuple(got))
                )
                got = await self._walk("runs.steps.list", {"run_id": run}, order, size)
                log.step_walks.append(
                    PageWalk("run steps", (("run_id", run),), order, size, tuple(got))
                )
        for params in STEP_WALKS:
            pairs = tuple(
                sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in params.items())
            )
            for order in ("asc", "desc"):
                size = int(self.rng.choice((1, 2)))
                got = await self._walk("steps.list", dict(params, agent_id=self.agent), order, size)
                log.step_walks.append(PageWalk("steps", pairs, order, size, tuple(got)))

    async def _walk(self, path: str, params: dict[str, Any], order: str, size: int) -> list[str]:
        """A list in pages of ``size``, following ``after`` cursors to the end."""
        got: list[str] = []
        for _ in range(100):
            kwargs = dict(params, order=order, limit=size)
            if got:
                kwargs["after"] = got[-1]
            page = await self._sdk(path, **kwargs)
            got += [str(x.id) for x in page.items]
            if len(page.items) < size:
                break
        return got

    # -- 4. folders and files ----------------------------------------------------------------
    async def _folders(self) -> None:
        log = self.log
        name = "surface-docs"

        async def find(sdk: Any) -> Any:
            page = await sdk.folders.list(name=name, limit=1)
            return page.items[0] if page.items else None

        folder = await self._create(
            f"folder {name}", find, lambda sdk: sdk.folders.create(name=name)
        )
        self.folder = str(folder.id)
        await self._folder_updates(folder)
        for i in range(FILES):
            file_name = f"{chr(ord('a') + FILES - 1 - i)}-note.txt"  # e, d, c, b, a
            text = f"Surface note {i}: kelp and tide.\n".encode()
            up = await self._sdk(
                "folders.files.upload",
                folder.id,
                file=(file_name, text),
                duplicate_handling="skip",  # a retry answers the file the first attempt made
            )
            log.uploaded.append(str(up.id))
            await trio.sleep(1)
        await self._sdk("agents.folders.attach", folder.id, agent_id=self.agent)
        for file_id in log.uploaded[:2]:  # closed: the agent's files are then of both kinds
            await self._sdk("agents.files.close", file_id, agent_id=self.agent)
            log.closed.append(file_id)
        page = await self._sdk("folders.files.list", folder.id, limit=1000, order="asc")
        log.files_ref = [
            FileSeen(str(f.id), str(f.file_name), f.created_at.timestamp() if f.created_at else 0.0)
            for f in page.items
        ]
        page = await self._sdk("agents.files.list", self.agent, limit=1000, order="asc")
        log.open_ref = {str(f.file_id): bool(f.is_open) for f in page.files}
        for order in ("asc", "desc"):
            size = int(self.rng.choice((1, 2)))
            got = await self._walk_files(folder.id, order, size)
            log.file_walks.append(PageWalk("folders.files", (), order, size, tuple(got)))
            for params in ({}, {"is_open": True}, {"is_open": False}):
                size = int(self.rng.choice((1, 2)))
                got = await self._walk_agent_files(params, order, size)
                pairs = tuple(sorted(params.items()))
                log.file_walks.append(PageWalk("agents.files", pairs, order, size, tuple(got)))

    async def _folder_updates(self, folder: Any) -> None:
        """Four ``PATCH /v1/folders/{id}``, each a random subset of the fields (falsy values
        too), each answer and a read after it held to the model; then the listing by the
        final name is exactly this folder."""
        model = {
            "name": str(folder.name),
            "description": folder.description,
            "instructions": folder.instructions,
            "metadata": dict(folder.metadata or {}),
        }
        names = sorted(FOLDER_CHOICES)
        for k in range(4):
            chosen = sorted(self.rng.sample(names, int(self.rng.choice((1, 2)))))
            changes = {name: self.rng.choice(FOLDER_CHOICES[name]) for name in chosen}
            answer = await self._sdk("folders.update", folder.id, **changes)
            model.update(changes)
            want = FolderState.of(model)
            shown = ", ".join(f"{n}={v!r}" for n, v in changes.items())
            updates = self.log.folder_updates
            updates.append((f"folders.update({shown}) answered", _folder(answer), want))
            seen = await self._sdk("folders.retrieve", folder.id)
            updates.append((f"folders.retrieve after folder update {k + 1}", _folder(seen), want))
        page = await self._sdk("folders.list", name=model["name"], limit=10)
        self.log.named_folders.append((str(model["name"]), tuple(str(f.id) for f in page.items)))
        self.log.folder_name = (str(folder.id), str(model["name"]))

    async def _deletes(self) -> None:
        """Delete one of the folder's files, then the folder, and look for each everywhere."""
        log, agent, folder = self.log, self.agent, self.folder
        if folder is None or not log.uploaded:
            return
        page = await self._sdk("folders.list", limit=1000, order="asc")
        log.folders_ref = [
            FileSeen(str(f.id), str(f.name), f.created_at.timestamp() if f.created_at else 0.0)
            for f in page.items
        ]
        for order in ("asc", "desc"):
            size = int(self.rng.choice((1, 2)))
            got = await self._walk("folders.list", {}, order, size)
            log.folder_walks.append(PageWalk("folders", (), order, size, tuple(got)))
        file_id = log.uploaded[-1]

        async def delete_file(sdk: Any, number: int) -> None:
            try:
                await sdk.folders.files.delete(file_id, folder_id=folder)
            except letta_client.NotFoundError:
                if number == 1:
                    raise

        await self._call(f"delete file {file_id}", delete_file)
        reads = log.deleted_reads
        reads.append(
            (
                f"folders.files.retrieve({file_id}) (no 404)",
                not await self._gone(
                    lambda sdk: sdk.folders.files.retrieve(file_id, folder_id=folder)
                ),
            )
        )
        page = await self._sdk("folders.files.list", folder, limit=1000)
        reads.append((f"folders.files.list: deleted file {file_id}", file_id in _ids(page.items)))
        page = await self._sdk("agents.files.list", agent, limit=1000)
        listed = {str(f.file_id) for f in page.files}
        reads.append((f"agents.files.list: deleted file {file_id}", file_id in listed))

        async def delete_folder(sdk: Any, number: int) -> None:
            try:
                await sdk.folders.delete(folder)
            except letta_client.NotFoundError:
                if number == 1:
                    raise

        await self._call(f"delete folder {folder}", delete_folder)
        reads.append(
            (
                f"folders.retrieve({folder}) (no 404)",
                not await self._gone(lambda sdk: sdk.folders.retrieve(folder)),
            )
        )
        page = await self._sdk("folders.list", limit=1000)
        reads.append((f"folders.list: deleted folder {folder}", folder in _ids(page.items)))
        page = await self._sdk("agents.folders.list", agent, limit=1000)
        reads.append((f"agents.folders.list: deleted folder {folder}", folder in _ids(page.items)))
        page = await self._sdk("agents.files.list", agent, limit=1000)
        left = sorted({str(f.file_id) for f in page.files} & set(log.uploaded))
        reads.append((f"agents.files.list: the deleted folder's files {left}", bool(left)))

    async def _gone(self, read: Callable[[Any], Awaitable[Any]]) -> bool:
        """Whether ``read`` answers 404 (tried until answered)."""

        async def attempt(sdk: Any, _: int) -> bool:
            try:
                await read(sdk)
            except letta_client.NotFoundError:
                return True
            return False

        gone: bool = await self._call("a read of something deleted", attempt)
        return gone

    async def _walk_files(self, folder: str, order: str, size: int) -> list[str]:
        got: list[str] = []
        for _ in range(100):
            kwargs: dict[str, Any] = {"order": order, "limit": size}
            if got:
                kwargs["after"] = got[-1]
            page = await self._sdk("folders.files.list", folder, **kwargs)
            got += [str(f.id) for f in page.items]
            if len(page.items) < size:
                break
        return got

    async def _walk_agent_files(self, params: dict[str, Any], order: str, size: int) -> list[str]:
        """The agent's files in pages of ``size``, following ``next_cursor`` while
        ``has_more`` (as the SDK's auto-pagination does)."""
        got: list[str] = []
        cursor: str | None = None
        for _ in range(100):
            kwargs: dict[str, Any] = dict(params, order=order, limit=size)
            if cursor is not None:
                kwargs["cursor"] = cursor
            page = await self._sdk("agents.files.list", self.agent, **kwargs)
            got += [str(f.file_id) for f in page.files]
            if not page.has_more or not page.next_cursor:
                break
            cursor = str(page.next_cursor)
        return got

    # -- 5. agent file -----------------------------------------------------------------------
    async def _agent_file(self) -> None:
        log = self.log
        source = self.agent
        assert source is not None
        exported = await self._sdk("agents.export_file", source)
        raw = exported if isinstance(exported, str) else json.dumps(exported)
        copy_name = f"{AGENT}_copy"

        async def find(sdk: Any) -> Any:
            page = await sdk.agents.list(name=copy_name, limit=1, order="asc")
            return page.items[0].id if page.items else None

        async def make(sdk: Any) -> Any:
            got = await sdk.agents.import_file(file=("surface.af", raw.encode()))
            return got.agent_ids[0] if got.agent_ids else None

        copy_id = await self._create("agents.import_file", find, make)
        if copy_id is None:
            log.copies.append("agents.import_file answered no agent id")
            return
        copy_id = str(copy_id)
        old = await self._sdk("agents.retrieve", source)
        new = await self._sdk("agents.retrieve", copy_id)
        where = f"import of {source} ({copy_id})"
        if copy_id == source:
            log.copies.append(f"{where}: the copy has the source's id")
        if new.name != copy_name:
            log.copies.append(f"{where}: named {new.name!r}, want {copy_name!r}")
        blocks_old = sorted((_block(b) for b in old.blocks or ()), key=repr)
        blocks_new = sorted((_block(b) for b in new.blocks or ()), key=repr)
        if blocks_new != blocks_old:
            log.copies.append(f"{where}: blocks {blocks_new}, want the source's {blocks_old}")
        shared = {b.id for b in old.blocks or ()} & {b.id for b in new.blocks or ()}
        if shared:
            log.copies.append(f"{where}: shares blocks {sorted(shared)} with the source")
        rules_old = sorted(map(_rule, old.tool_rules or ()))
        rules_new = sorted(map(_rule, new.tool_rules or ()))
        if rules_new != rules_old:
            log.copies.append(f"{where}: tool rules {rules_new}, want {rules_old}")
        kinds_old = await self._history(source)
        kinds_new = await self._history(copy_id)
        if kinds_new != kinds_old:
            log.copies.append(f"{where}: history {kinds_new}, want the source's {kinds_old}")
        before = {b.label: b.value for b in old.blocks or ()}
        await self._sdk("agents.blocks.update", "human", agent_id=copy_id, value="the copy's own")
        again = await self._sdk("agents.retrieve", source)
        after = {b.label: b.value for b in again.blocks or ()}
        if after != before:
            log.copies.append(f"{where}: writing the copy's memory changed the source's: {after}")
        await self._import_options(source, raw, kinds_old)

    async def _import_options(self, source: str, raw: str, kinds: list[str]) -> None:
        """The options: an export with ``scrub_messages`` carries no messages; an import with
        ``name`` and ``strip_messages`` is named exactly so (no ``_copy``) and has no history
        from the file (a message of the source's other than its system message is not in it)."""
        log = self.log
        scrubbed = await self._sdk("agents.export_file", source, scrub_messages=True)
        document = json.loads(scrubbed if isinstance(scrubbed, str) else json.dumps(scrubbed))
        carried = [len(a.get("messages") or []) for a in document.get("agents", [])]
        if carried != [0]:
            log.copies.append(f"export_file({source}, scrub_messages=True) carries {carried}")
        name = "surface-named"

        async def find(sdk: Any) -> Any:
            page = await sdk.agents.list(name=name, limit=1, order="asc")
            return page.items[0].id if page.items else None

        async def make(sdk: Any) -> Any:
            got = await sdk.agents.import_file(
                file=("surface.af", raw.encode()), name=name, strip_messages=True
            )
            return got.agent_ids[0] if got.agent_ids else None

        named = await self._create("agents.import_file(name=..., strip_messages)", find, make)
        if named is None:
            log.copies.append("agents.import_file(name=..., strip_messages) answered no agent")
            return
        state = await self._sdk("agents.retrieve", str(named))
        if state.name != name:
            log.copies.append(f"import with name={name!r}: named {state.name!r}")
        kept = [k for k in await self._history(str(named)) if k != "system_message"]
        if kept and kinds:
            log.copies.append(f"import with strip_messages: history {kept} came from the file")

    async def _history(self, agent: str) -> list[str]:
        page = await self._sdk("agents.messages.list", agent, limit=1000, order="asc")
        return [str(m.message_type) for m in page.items]

    # -- 6. the error contract ---------------------------------------------------------------
    async def _errors(self) -> None:
        probes: list[tuple[str, int, Callable[[Any], Awaitable[Any]]]] = [
            (
                "blocks.create(label='bad label!')",
                422,
                lambda sdk: sdk.blocks.create(label="bad label!", value="x"),
            ),
            ("blocks.list(limit=-1)", 422, lambda sdk: sdk.blocks.list(limit=-1)),
            (
                "blocks.create(value over its limit)",
                400,
                lambda sdk: sdk.blocks.create(label="Surf-big", value="x" * 50, limit=10),
            ),
            ("blocks.retrieve(unknown id)", 404, lambda sdk: sdk.blocks.retrieve("block-nope")),
            (
                "steps.feedback.create(unknown step)",
                404,
                lambda sdk: sdk.steps.feedback.create("step-nope", feedback="positive"),
            ),
            (
                "agents.import_file(not JSON)",
                400,
                lambda sdk: sdk.agents.import_file(file=("bad.af", b"{not json")),
            ),
            (
                "agents.export_file(unknown agent)",
                404,
                lambda sdk: sdk.agents.export_file("agent-nope"),
            ),
        ]
        for what, want, call in probes:
            answer = await self._probe(call)
            if answer is not None:
                status, retry = answer
                self.log.errors.append(ErrorSeen(what, want, status, retry))
        for what, method, path, body, want in RAW_PROBES:
            raw = await self._raw(method, path, body)
            if raw is not None:
                status, retry, allow = raw
                self.log.errors.append(ErrorSeen(what, want, status, retry, allow))

    async def _raw(
        self, method: str, path: str, body: bytes | None
    ) -> tuple[int, str | None, str | None] | None:
        """A request as raw bytes (what the SDK cannot send): its status, ``x-should-retry``
        and ``Allow``; a 5xx or a cut connection is tried again on another node."""
        got = await self._send_raw(method, path, lambda: body)
        if got is None:
            return None
        return got.status_code, got.headers.get("x-should-retry"), got.headers.get("allow")

    async def _send_raw(
        self,
        method: str,
        path: str,
        content: Callable[[], Any],
        before_retry: Callable[[], Awaitable[bool]] | None = None,
    ) -> httpx.Response | None:
        """The first answer below 500 to a raw request (``content()`` makes its body anew
        for each attempt); a 5xx or a cut connection is tried again on another node, up to
        8 times, unless ``before_retry()`` says the first attempts landed (then ``None``)."""
        http = self.clients.link.http
        nodes = self.clients.world.node_names
        for attempt in range(8):
            if attempt and before_retry is not None and await before_retry():
                return None
            url = f"http://{self.state['node']}:{PORT}{path}"
            body = content()
            headers = {"content-type": "application/json"} if body is not None else {}
            try:
                with trio.fail_after(self.clients.timeout):
                    got: httpx.Response = await http.request(
                        method, url, content=body, headers=headers
                    )
                if got.status_code < 500:
                    return got
            except (httpx.TransportError, trio.TooSlowError):
                pass
            if len(nodes) > 1:
                self.state["node"] = self.rng.choice([n for n in nodes if n != self.state["node"]])
            await trio.sleep(1.0)
        return None

    # -- 7. the HTTP layer -------------------------------------------------------------------
    async def _http_layer(self) -> None:
        """A body sent in chunks (``transfer-encoding: chunked``, three pieces) is the body
        sent; a path with percent-encoded letters names what the decoded path names."""
        log, label = self.log, "Surf-chunked"
        value = "".join(f"kelp {i:04d} " for i in range(300))  # 3,000 characters
        body = json.dumps({"label": label, "value": value, "limit": 4000}).encode()
        third = len(body) // 3
        pieces = (body[:third], body[third : 2 * third], body[2 * third :])

        def chunked() -> Any:
            async def gen() -> Any:
                for piece in pieces:
                    yield piece

            return gen()

        async def landed() -> bool:
            page = await self._sdk("blocks.list", label=label, limit=1)
            return bool(page.items)

        got = await self._send_raw("POST", "/v1/blocks/", chunked, landed)
        if got is not None and got.status_code != 200:
            log.http.append(f"a block created with a chunked body: answered {got.status_code}")
        page = await self._sdk("blocks.list", label=label, limit=10)
        values = [b.value for b in page.items]
        if values != [value]:
            shown = [f"{len(v or '')} characters" for v in values]
            log.http.append(
                f"a block created with a chunked body of {len(value)} characters reads back "
                f"as {shown}"
            )
        path = f"/v1/agents/{self.agent}/core-memory/blocks/hum%61n"  # "human"
        got = await self._send_raw("GET", path, lambda: None)
        if got is not None:
            named = got.json().get("label") if got.status_code == 200 else got.status_code
            if named != "human":
                log.http.append(f"GET {path} answered {named!r}, not the block 'human'")
        await self._unread_bodies()

    async def _unread_bodies(self) -> None:
        """Requests the app answers without reading their bodies (an unknown route, a method
        the path does not serve), each followed at once by a read on the same node, so on the
        same kept-alive connection: the read answers what it asked (the server read past the
        unread body, or closed the connection), never something parsed from the body."""
        log = self.log
        body = json.dumps({"note": "kelp " * 800}).encode()  # 4 KB nobody reads
        for method, path in (("POST", "/v1/no-such-route"), ("PUT", "/v1/blocks/")):
            got = await self._send_raw(method, path, lambda: body)
            if got is None:
                continue
            node = self.state["node"]
            after = await self._send_raw("GET", f"/v1/agents/{self.agent}", lambda: None)
            if after is None or self.state["node"] != node:
                continue  # a fault came between: not the same connection
            agent = after.json().get("id") if after.status_code == 200 else None
            if agent != self.agent:
                shown = after.text[:120]
                log.http.append(
                    f"GET /v1/agents/{self.agent} right after {method} {path} (answered "
                    f"{got.status_code}, body unread) on {node}: {after.status_code} {shown!r}"
                )

    async def _probe(self, call: Callable[[Any], Awaitable[Any]]) -> tuple[int, str | None] | None:
        """The status and ``x-should-retry`` of the first answer that is not a transient
        failure (a 5xx, a cut connection: tried again on another node, up to 8 times); an
        answer of 2xx is ``(200, None)``; ``None`` if none came."""
        nodes = self.clients.world.node_names
        for _ in range(8):
            sdk = self.clients.link.sdk(self.state["node"])
            try:
                with trio.fail_after(self.clients.timeout):
                    await call(sdk)
                return 200, None
            except letta_client.APIStatusError as error:
                if error.status_code < 500:
                    return error.status_code, error.response.headers.get("x-should-retry")
            except (letta_client.APIConnectionError, trio.TooSlowError):
                pass
            if len(nodes) > 1:
                self.state["node"] = self.rng.choice([n for n in nodes if n != self.state["node"]])
            await trio.sleep(1.0)
        return None
