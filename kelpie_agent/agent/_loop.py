"""The agent loop: steps until a stop reason, per agent type, with a checkpoint per commit.

A *step* is one LLM call and the tool calls it makes. What ends a run:

==========================  ==============================================================
``end_turn``                 memgpt: ``send_message`` ran, or no heartbeat was requested (or
                             heartbeats are paused); letta_v1/react: a plain-text answer
``tool_rule``                an ``exit_loop`` rule's tool, or ``memory_finish_edits``, ran
``max_steps``                the step budget is used up (``max_steps`` LLM calls)
``llm_api_error``            the LLM kept failing after the retries, or refused the request
``invalid_tool_call``        ``max_invalid_steps`` steps in a row whose calls were all refused
``invalid_llm_response``     more than ``max_empty_responses`` empty answers
``no_tool_call``             memgpt answered without a tool after ``no_tool_call_nudges``
``max_tokens_exceeded``      a text answer was cut off at ``max_tokens``
``cancelled``                the run's cancel was set (checked between steps; ``_cancels``)
``error``                    an unexpected failure inside the loop (recorded, never raised)
==========================  ==============================================================
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs

from kelpie_agent.actors import ActorError
from kelpie_agent.llm import LlmRequest, TextBlock, ToolCall
from kelpie_agent.storage import Transaction

from ._agent_files import directories, load_agent_files
from ._archive import archive_of
from ._boot import refresh_prompt
from ._builtins import SEND_MESSAGE
from ._calls import NON_USER, finish, heartbeat_message, run_call
from ._cancels import CancelLike
from ._checkpoint import PendingCall, SessionCheckpoint
from ._compaction import compact_before_step, context_body, in_context
from ._errors import AgentStorageError
from ._events import EventSink
from ._llm_call import LlmFailure, call_llm, streamer_factory
from ._loading import load_tools
from ._messages import (
    AgentMessage,
    ApprovalRequestMessage,
    AssistantMessage,
    ReasoningMessage,
    ToolCallInfo,
    ToolCallMessage,
    ToolReturnMessage,
    UserMessage,
    render_messages,
)
from ._models import Block
from ._prompt import build_messages, rules_block, system_prompt
from ._runtime import AgentRuntime
from ._steps import step_record
from ._toolset import ToolSet

__all__ = ["Loop", "TurnOptions", "compiled_system", "load_toolset"]


@attrs.frozen
class TurnOptions:
    stream_tokens: bool = False
    use_assistant_message: bool = True
    cancel: CancelLike | None = attrs.field(default=None, eq=False)


def _alert(text: str) -> str:
    return json.dumps({"type": "system_alert", "message": text})


EMPTY_ALERT = _alert("Your last response was empty. Respond to the user, or call a tool.")
NO_TOOL_ALERT = _alert(
    "You answered without calling a tool, so the user saw nothing. Use send_message to reply "
    "to the user."
)


async def load_toolset(rt: AgentRuntime) -> ToolSet:
    """The agent's tools as attached now (custom and MCP tools read from storage)."""
    return await load_tools(rt.reader, rt.require())


def _system(rt: AgentRuntime, directories: str | None) -> str:
    """The system prompt from the agent's memory as it is in ``rt`` now."""
    agent = rt.require()
    archive = rt.archive
    return system_prompt(
        agent,
        _memory(rt),
        now=rt.time_text(),
        messages=rt.history[-1].seq if rt.history else 0,
        passages=len(archive) if archive is not None else None,
        directories=directories,
    )


async def _directories(rt: AgentRuntime) -> str | None:
    """The attached folders and open files (read fresh: uploads and other runs change them)."""
    if not rt.require().folder_ids:
        return None
    return directories(rt, await load_agent_files(rt, texts=True))


async def compiled_system(rt: AgentRuntime, *, store: bool = False) -> str:
    """The system prompt the agent's next step would send (Letta's ``recompile``): memory
    blocks read fresh, archive loaded when the agent has archival tools, as a step does.
    With ``store``, it replaces the thread's stored system message if it differs."""
    rt.require()
    await rt.refresh_blocks()
    if any(name.startswith("archival_") for name in (await load_toolset(rt)).names):
        await archive_of(rt)
    compiled = _system(rt, await _directories(rt))
    if store:
        await refresh_prompt(rt, compiled, _memory(rt), force=True)
    return compiled


def _memory(rt: AgentRuntime) -> list[Block]:
    """The blocks the system prompt renders: the agent's, then its rules' block."""
    return [*rt.ordered_blocks(), *rules_block(rt.require())]


class Loop:
    """Runs ``rt.session`` to its end, emitting events into ``sink``."""

    def __init__(self, rt: AgentRuntime, sink: EventSink, options: TurnOptions) -> None:
        self.rt = rt
        self.sink = sink
        self.options = options
        self.budget = 0  # the last request's characters for history

    async def run(self) -> SessionCheckpoint:
        rt = self.rt
        assert rt.session is not None
        try:
            tools = await load_toolset(rt)
            if any(name.startswith("archival_") for name in tools.names):
                await archive_of(rt)
            while rt.session.running:
                cp = rt.session
                if cp.undone:
                    for call in cp.undone:
                        done = await run_call(rt, tools, call)
                        await self._emit_return(done.returned)
                    continue
                if self.options.cancel is not None and self.options.cancel.is_set():
                    await self._close(cp, "cancelled")
                elif cp.iteration >= cp.max_steps:
                    await self._close(cp, "max_steps")
                else:
                    await self._step(tools)
        except (AgentStorageError, ActorError):
            raise  # storage gave up, or the lease is gone: nothing more may be written
        except Exception as error:  # a bug or an unexpected failure: stop the run, recorded
            if rt.session.running:
                await self._close(rt.session, "error", f"{type(error).__name__}: {error}")
        return rt.session

    async def _close(self, cp: SessionCheckpoint, reason: str, error: str | None = None) -> None:
        done = finish(self.rt, cp, reason, error)
        await self._commit([], done, "the end of the run")

    async def _commit(
        self,
        messages: list[AgentMessage],
        cp: SessionCheckpoint,
        what: str,
        extra: Sequence[tuple[bytes, bytes]] = (),
    ) -> None:
        rt = self.rt
        writes = [*rt.message_writes(messages), *rt.checkpoint_writes(cp), *extra]

        async def build(txn: Transaction) -> None:
            for key, value in writes:
                await txn.set(key, value)

        await rt.commit(build, what)
        rt.remember(messages)
        rt.session = cp

    async def _emit_return(self, returned: ToolReturnMessage) -> None:
        for event in render_messages(
            [returned], use_assistant_message=self.options.use_assistant_message
        ):
            await self.sink.emit(event)

    def _request(
        self,
        tools: ToolSet,
        allowed: frozenset[str] | None,
        directories: str | None,
        context: list[AgentMessage],
    ) -> LlmRequest:
        rt = self.rt
        agent = rt.require()
        llm_tools = tools.llm_tools(allowed)
        system = _system(rt, directories)
        schema_chars = sum(
            len(json.dumps(dict(t.input_schema))) + len(t.description) for t in llm_tools
        )
        budget = (agent.context_window - agent.max_tokens) * 4 - len(system) - schema_chars
        self.budget = max(budget, 4000)
        messages = build_messages(context, budget_chars=self.budget, tools=llm_tools)
        return LlmRequest(agent.llm_model, messages, system, llm_tools, agent.max_tokens)

    async def _step(self, tools: ToolSet) -> None:
        rt = self.rt
        cp = rt.session
        assert cp is not None
        agent = rt.require()
        memgpt = agent.agent_type == "memgpt_agent"
        await rt.refresh_blocks()
        step_id = rt.new_id("step")
        stream, started = None, rt.now()
        if self.sink.active and self.options.stream_tokens:
            stream = streamer_factory(
                self.sink,
                new_id=lambda: rt.new_id("message"),
                now=rt.now,
                text_kind="reasoning" if memgpt else "assistant",
                assistant_tool=SEND_MESSAGE
                if memgpt and self.options.use_assistant_message and SEND_MESSAGE in tools
                else None,
                run_id=cp.session_id,
                step_id=step_id,
            )
        history = cp.tool_history
        allowed = tools.solver.allowed(history, cp.last_return)
        prefill = tools.solver.prefill(history, allowed)
        directories = await self._directories()
        # Letta's rebuild at the step's start: the stored system message shows the memory
        await refresh_prompt(rt, _system(rt, directories), _memory(rt), force=False)
        request = self._request(tools, allowed, directories, await self._context())
        try:
            if await compact_before_step(rt, cp, self.budget):
                cp = rt.session or cp  # the summary's commit wrote the checkpoint again
                request = self._request(tools, allowed, directories, await self._context())
            outcome = await call_llm(
                rt.env.llm,
                request,
                config=rt.config,
                random=rt.ctx.ports.rng.random,
                new_id=lambda: rt.new_id("message"),
                stream=stream,
            )
        except LlmFailure as failure:
            await self._close(cp, "llm_api_error", str(failure))
            return
        await rt.hazard("agent.llm_answered")
        answered, response = rt.now(), outcome.response
        usage = cp.usage.plus(response.usage.input_tokens, response.usage.output_tokens, 1)
        common = {"run_id": cp.session_id, "step_id": step_id}
        messages: list[AgentMessage] = []
        calls: list[PendingCall] = []
        seen: set[str] = set()
        for index, block in enumerate(response.content):
            mid, date = outcome.ids[index], rt.now()
            if isinstance(block, TextBlock):
                if not block.text.strip():
                    continue
                seq = rt.alloc_seq()
                if memgpt:
                    messages.append(
                        ReasoningMessage(id=mid, date=date, seq=seq, reasoning=block.text, **common)
                    )
                else:
                    messages.append(
                        AssistantMessage(id=mid, date=date, seq=seq, content=block.text, **common)
                    )
            elif isinstance(block, ToolCall):
                if block.id in seen:  # a repeated id would make the results ambiguous
                    block = ToolCall(rt.new_id("toolu"), block.name, block.arguments)
                seen.add(block.id)
                info = ToolCallInfo(block.name, block.arguments, block.id)
                bound = tools.tools.get(block.name)
                ask = bound is not None and bound.approval
                kind = ApprovalRequestMessage if ask else ToolCallMessage
                seq = rt.alloc_seq()
                messages.append(kind(id=mid, date=date, seq=seq, tool_call=info, **common))
                approval = "requested" if ask else None
                calls.append(
                    PendingCall(block.id, block.name, block.arguments, mid, approval=approval)
                )
        cp = attrs.evolve(cp, usage=usage, steps=(*cp.steps, step_id), updated_at=rt.now())
        uncalled = tools.solver.uncalled(cp.tool_history)
        if calls:
            cp = attrs.evolve(
                cp,
                step_id=step_id,
                pending=tuple(calls),
                allowed=None if allowed is None else tuple(sorted(allowed)),
                prefill=tuple(
                    (name, json.dumps(args, sort_keys=True))
                    for name, args in sorted(prefill.items())
                ),
            )
            if any(c.approval == "requested" for c in calls):  # nothing runs until answered
                cp = attrs.evolve(
                    cp,
                    status="done",
                    stop_reason="requires_approval",
                    iteration=cp.iteration + 1,
                    updated_at=rt.now(),
                )
        elif not messages:  # an empty answer
            if response.stop_reason == "max_tokens":
                cp = finish(rt, cp, "max_tokens_exceeded")
            elif cp.empty_responses < rt.config.max_empty_responses:
                messages.append(self._alert(EMPTY_ALERT, cp.session_id))
                cp = self._next(attrs.evolve(cp, empty_responses=cp.empty_responses + 1))
            else:
                cp = finish(
                    rt, attrs.evolve(cp, iteration=cp.iteration + 1), "invalid_llm_response"
                )
        elif memgpt:  # thoughts without a tool: the user saw nothing
            if cp.nudges < rt.config.no_tool_call_nudges and cp.iteration + 1 < cp.max_steps:
                messages.append(self._alert(NO_TOOL_ALERT, cp.session_id))
                cp = self._next(attrs.evolve(cp, nudges=cp.nudges + 1))
            else:
                cp = finish(rt, attrs.evolve(cp, iteration=cp.iteration + 1), "no_tool_call")
        elif uncalled and cp.iteration + 1 < cp.max_steps:  # Letta: required tools first
            names = ", ".join(uncalled)
            reason = (
                f"{NON_USER}ToolRuleViolated: You must call {names} at least once to exit the loop."
            )
            reserve = lambda: (rt.new_id("message"), rt.alloc_seq())  # noqa: E731
            messages.append(heartbeat_message(rt, reserve, reason, cp.session_id))
            cp = self._next(cp)
        else:
            reason = "max_tokens_exceeded" if response.stop_reason == "max_tokens" else "end_turn"
            cp = finish(rt, attrs.evolve(cp, iteration=cp.iteration + 1), reason)
        step = step_record(
            step_id=step_id,
            agent=agent,
            cp=cp,
            request=request,
            response=response,
            attempts=outcome.attempts,
            message_ids=[m.id for m in messages],
            started=started,
            answered=answered,
            committed=rt.now(),
        )
        await self._commit(messages, cp, "the step's messages", rt.step_writes(step))
        await rt.hazard("agent.step_committed")
        if stream is None:
            shown = [m for m in messages if not isinstance(m, UserMessage)]
            for event in render_messages(
                shown, use_assistant_message=self.options.use_assistant_message
            ):
                await self.sink.emit(event)

    async def _context(self) -> list[AgentMessage]:
        return in_context(self.rt, await context_body(self.rt))

    async def _directories(self) -> str | None:
        return await _directories(self.rt)

    def _next(self, cp: SessionCheckpoint) -> SessionCheckpoint:
        cp = attrs.evolve(cp, iteration=cp.iteration + 1)
        return finish(self.rt, cp, "max_steps") if cp.iteration >= cp.max_steps else cp

    def _alert(self, content: str, run_id: str) -> UserMessage:
        rt = self.rt
        return UserMessage(
            id=rt.new_id("message"),
            date=rt.now(),
            seq=rt.alloc_seq(),
            run_id=run_id,
            content=content,
            kind="alert",
        )
