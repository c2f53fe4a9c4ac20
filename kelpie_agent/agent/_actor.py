"""AgentActor: one agent as a virtual actor (activate, handle requests one at a time,
deactivate).

It keeps no unsaved state: every change is committed when it happens (``_runtime``), so
``deactivate`` only releases the sandbox. ``activate`` loads the agent and, unless
``LoopConfig.resume_on_activate`` is off, finishes a run that a crash interrupted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from kelpie_agent.storage import Transaction

from . import _agent_files as files
from . import _archive as archival
from . import _conversations as convs
from . import _handlers as h
from . import _links as links
from . import _schedules as schedules
from ._compaction import compact_now
from ._config import ActorContextLike, AgentEnv
from ._errors import InvalidRequestError, ToolNotFoundError
from ._executor import ToolOutcome, run_tool
from ._loop import compiled_system, load_toolset
from ._requests import (
    AttachBlock,
    AttachFolder,
    AttachShared,
    AttachTool,
    CloseFile,
    CompactMessages,
    CreateAgent,
    CreateSchedule,
    DeleteAgent,
    DeletePassage,
    DeleteSchedule,
    DetachBlock,
    DetachFolder,
    DetachShared,
    DetachTool,
    ExportSession,
    FireSchedule,
    GetAgent,
    GetBlock,
    GetSession,
    ImportSession,
    InsertPassage,
    ListAgentFiles,
    ListBlocks,
    ListMessages,
    ListPassages,
    ListTools,
    OpenFile,
    PassageHit,
    Recompile,
    ResetMessages,
    ResumeRun,
    RunTool,
    SearchPassages,
    SendMessage,
    SetToolApproval,
    ToolRunResult,
    TurnResult,
    UpdateAgent,
    UpdateBlock,
)
from ._runtime import AgentRuntime
from ._session import export_session, import_session, resume, send
from ._toolset import BoundTool, Prepared, validate_arguments

__all__ = ["AgentActor"]

KIND = "agent"


class AgentActor:
    """The actor behind one agent (actor kind ``"agent"``, id = the agent's id)."""

    kind = KIND

    def __init__(self, env: AgentEnv) -> None:
        self.env = env
        self._rt: AgentRuntime | None = None
        self.resumed: TurnResult | None = None  # the run finished during activation, if any
        self._handlers: dict[type, Callable[[Any], Awaitable[Any]]] = {
            CreateAgent: lambda r: h.create_agent(self.rt, r),
            GetAgent: lambda r: h.view(self.rt),
            UpdateAgent: lambda r: h.update_agent(self.rt, r.changes),
            SetToolApproval: lambda r: h.set_tool_approval(self.rt, r.tool_name, r.required),
            DeleteAgent: lambda r: h.delete_agent(self.rt),
            SendMessage: lambda r: send(self.rt, r),
            ListMessages: lambda r: h.list_messages(self.rt, r),
            ResetMessages: lambda r: h.reset_messages(self.rt),
            CompactMessages: lambda r: compact_now(self.rt, r),
            ListBlocks: self._list_blocks,
            Recompile: lambda r: compiled_system(self.rt, store=not r.dry_run),
            GetBlock: self._get_block,
            UpdateBlock: lambda r: h.update_block(self.rt, r),
            AttachBlock: lambda r: h.attach_block(self.rt, r.block_id),
            DetachBlock: lambda r: h.detach_block(self.rt, r.block_id),
            InsertPassage: lambda r: archival.insert_passage(self.rt, r.text, r.tags),
            ListPassages: lambda r: archival.list_passages(self.rt, r),
            SearchPassages: self._search_passages,
            DeletePassage: lambda r: archival.delete_passage(self.rt, r.passage_id),
            ListTools: self._list_tools,
            AttachTool: lambda r: h.attach_tool(self.rt, r.tool_id),
            DetachTool: lambda r: h.detach_tool(self.rt, r.tool_id),
            RunTool: self._run_tool,
            GetSession: self._get_session,
            ResumeRun: lambda r: resume(self.rt),
            ExportSession: lambda r: export_session(self.rt, r.target_agent_id),
            ImportSession: lambda r: import_session(self.rt, r),
            CreateSchedule: lambda r: schedules.create_schedule(
                self.rt,
                r.messages,
                r.schedule,
                max_steps=r.max_steps,
                include_return_message_types=r.include_return_message_types,
            ),
            DeleteSchedule: lambda r: schedules.delete_schedule(self.rt, r.schedule_id),
            AttachFolder: lambda r: files.attach_folder(self.rt, r.folder_id),
            DetachFolder: lambda r: files.detach_folder(self.rt, r.folder_id),
            OpenFile: lambda r: files.open_file(self.rt, r.file_id, r.start, r.end),
            CloseFile: lambda r: files.close_files(self.rt, r.file_id),
            ListAgentFiles: lambda r: files.list_agent_files(self.rt),
            AttachShared: lambda r: links.attach(self.rt, r.kind, r.target_id),
            DetachShared: lambda r: links.detach(self.rt, r.kind, r.target_id),
            convs.CreateConversation: lambda r: convs.create_conversation(self.rt, r),
            convs.UpdateConversation: lambda r: convs.update_conversation(self.rt, r),
            convs.DeleteConversation: lambda r: convs.delete_conversation(self.rt, r),
            convs.ForkConversation: lambda r: convs.fork_conversation(self.rt, r),
            FireSchedule: lambda r: schedules.fire_schedule(
                self.rt, r.schedule_id, r.due, lambda request: send(self.rt, request)
            ),
        }

    @property
    def rt(self) -> AgentRuntime:
        if self._rt is None:
            raise RuntimeError("the AgentActor was not activated")
        return self._rt

    async def activate(self, ctx: ActorContextLike) -> None:
        self._rt = AgentRuntime(ctx, self.env)
        await self._rt.load()
        session = self._rt.session
        if not self.env.config.resume_on_activate:
            return
        # A storage error here propagates: the activation fails like a failed load, its waiting
        # requests get the error, and the next request activates again and resumes. Serving with
        # the interrupted run still ``running`` would leave it so until someone wrote to that
        # thread again (``ensure_fresh`` reloads, it does not resume).
        if session is not None and session.running:
            self.resumed = await resume(self._rt)
        await convs.resume_conversations(self._rt, resume)

    async def handle(self, message: object) -> object:
        handler = self._handlers.get(type(message))
        if handler is None:
            raise InvalidRequestError(f"AgentActor cannot handle {type(message).__name__}")
        await self.rt.ensure_fresh()
        try:
            await self.rt.enter(getattr(message, "thread", None))
            return await handler(message)
        finally:
            self.rt.thread = self.rt.default  # a request in a conversation leaves it

    async def deactivate(self) -> None:
        if self._rt is not None:
            await self._rt.close_sandbox()

    # -- small handlers ------------------------------------------------------------------------
    async def _list_blocks(self, _: ListBlocks) -> list[Any]:
        self.rt.require()
        await self.rt.refresh_blocks()
        return self.rt.ordered_blocks()

    async def _get_block(self, request: GetBlock) -> Any:
        self.rt.require()
        await self.rt.refresh_blocks()
        block = self.rt.block_by_label(request.label)
        if block is None:
            from ._errors import BlockNotFoundError

            self.rt.require()
            raise BlockNotFoundError(
                f"agent {self.rt.agent_id} has no block labelled {request.label!r}"
            )
        return block

    async def _search_passages(self, request: SearchPassages) -> list[PassageHit]:
        return [PassageHit(p, s) for p, s in await archival.search_passages(self.rt, request)]

    async def _list_tools(self, _: ListTools) -> list[Any]:
        self.rt.require()
        return [t.spec for t in (await load_toolset(self.rt)).tools.values()]

    async def _get_session(self, _: GetSession) -> Any:
        self.rt.require()
        return self.rt.session

    async def _run_tool(self, request: RunTool) -> ToolRunResult:
        rt = self.rt
        tools = await load_toolset(rt)
        bound = tools.tools.get(request.name)
        if bound is None:
            raise ToolNotFoundError(f"agent {rt.agent_id} has no tool named {request.name!r}")
        plain = attrs.evolve(bound, heartbeat=False, schema=bound.spec.parameters)
        plain = attrs.evolve(plain, validator=_validator_for(plain))
        problem = validate_arguments(plain.validator, dict(request.args))
        if problem is not None:
            raise InvalidRequestError(f"tool {request.name}: {problem}")
        result = await run_tool(rt, Prepared(plain, dict(request.args), False))

        async def build(txn: Transaction) -> ToolOutcome:
            outcome = await result(txn) if callable(result) else result
            for key, value in outcome.writes:
                await (txn.delete(key) if value is None else txn.set(key, value))
            return outcome

        outcome = await rt.commit(build, f"tool {request.name}")
        for apply in outcome.after:
            apply()
        return ToolRunResult(
            "success" if outcome.ok else "error",
            outcome.text,
            outcome.stdout or (),
            outcome.stderr or (),
        )


def _validator_for(tool: BoundTool) -> Any:
    from ._toolset import _validator

    return _validator(tool.schema)
