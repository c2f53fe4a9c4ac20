"""The typed messages an AgentActor handles, and what it answers.

Every request is an attrs frozen value; ``AgentActor.handle`` returns the matching response
type (documented on each request) or raises an :class:`~kelpie_agent.agent.AgentError`.
Optional fields left as ``None`` mean "unchanged" in updates and "not given" elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs
import trio

from ._checkpoint import SessionCheckpoint
from ._messages import AgentMessage, ApprovalDecision, LettaUsage, StreamEvent
from ._models import (
    DEFAULT_FILE_WINDOW,
    DEFAULT_MAX_FILES_OPEN,
    DEFAULT_MODEL,
    AgentRecord,
    Block,
    PassageRecord,
    ToolRule,
    ToolSpec,
)

__all__ = [
    "AgentView",
    "AttachBlock",
    "AttachFolder",
    "AttachShared",
    "AttachTool",
    "BlockCreate",
    "CloseFile",
    "CompactMessages",
    "CreateAgent",
    "CreateSchedule",
    "DeleteAgent",
    "DeletePassage",
    "DeleteSchedule",
    "DetachBlock",
    "DetachFolder",
    "DetachShared",
    "DetachTool",
    "ExportSession",
    "FireSchedule",
    "GetAgent",
    "GetBlock",
    "GetSession",
    "ImportSession",
    "InputMessage",
    "InsertPassage",
    "ListAgentFiles",
    "ListBlocks",
    "ListMessages",
    "ListPassages",
    "ListTools",
    "OpenFile",
    "PassageHit",
    "Recompile",
    "ResetMessages",
    "ResumeRun",
    "RunTool",
    "SearchPassages",
    "SendMessage",
    "SessionSnapshot",
    "SetToolApproval",
    "ToolRunResult",
    "TurnResult",
    "UpdateAgent",
    "UpdateBlock",
]


def _decisions(value: Any) -> tuple[ApprovalDecision, ...]:
    return tuple(value)


@attrs.frozen
class InputMessage:
    """One input message (``role`` user, system or assistant), or the client's answer to a
    run that stopped on calls awaiting approval (``role`` ``approval``: ``approvals`` per
    call, or the legacy ``approve`` for every call of ``approval_request_id``; ``content``
    holds the legacy reason). An approval must be the first input; user messages may follow."""

    role: Literal["user", "system", "assistant", "approval"]
    content: str
    name: str | None = None
    otid: str | None = None
    approvals: tuple[ApprovalDecision, ...] = attrs.field(default=(), converter=_decisions)
    approval_request_id: str | None = None
    approve: bool | None = None


@attrs.frozen
class BlockCreate:
    """A block created together with the agent (``limit`` None: the default 20,000)."""

    label: str
    value: str = ""
    limit: int | None = None
    description: str = ""
    read_only: bool = False
    metadata: Mapping[str, Any] = attrs.field(factory=dict, hash=False)


# -- agent lifecycle -----------------------------------------------------------------------------
@attrs.frozen
class CreateAgent:
    """Create this actor's agent -> :class:`AgentView`. ``tool_ids`` are attached in order
    (use ``default_tool_names`` + ``builtin_id`` for the base tools)."""

    name: str
    agent_type: str = "letta_v1_agent"
    system: str = ""
    model: str = DEFAULT_MODEL
    embedding: str | None = None
    context_window: int = 32_000
    max_tokens: int = 4096
    description: str = ""
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
    memory_blocks: tuple[BlockCreate, ...] = ()
    block_ids: tuple[str, ...] = ()
    tool_ids: tuple[str, ...] = ()
    tool_rules: tuple[ToolRule, ...] = ()
    timezone: str = "UTC"
    # after the system message; None: Letta's default first messages for the agent type
    initial_messages: tuple[InputMessage, ...] | None = None
    identity_ids: tuple[str, ...] = ()  # linked in the creating transaction
    folder_ids: tuple[str, ...] = ()  # attached (files opened) right after it
    max_files_open: int = DEFAULT_MAX_FILES_OPEN
    per_file_view_window_char_limit: int = DEFAULT_FILE_WINDOW
    # an imported history (``_af_messages.ImportedMessage``s from an agent file)
    imported: tuple[Any, ...] = attrs.field(default=(), eq=False)


@attrs.frozen
class GetAgent:
    """-> :class:`AgentView`."""


UPDATABLE_FIELDS: tuple[str, ...] = (
    "name",
    "system",
    "model",
    "embedding",
    "context_window",
    "max_tokens",
    "description",
    "tags",
    "metadata",
    "tool_rules",
    "timezone",
    "max_files_open",
    "per_file_view_window_char_limit",
)
"""The agent metadata :class:`UpdateAgent` may change (tools and blocks have requests of
their own)."""


@attrs.frozen
class UpdateAgent:
    """Change metadata -> :class:`AgentView`. Keys: :data:`UPDATABLE_FIELDS`."""

    changes: Mapping[str, Any] = attrs.field(hash=False)


@attrs.frozen
class SetToolApproval:
    """Whether calls of the attached tool ``tool_name`` wait for a client's approval (the
    agent's ``requires_approval`` rule for it) -> :class:`AgentView`. A request of its own, so
    the read-modify-write of the rules runs on the actor: two concurrent changes for different
    tools both land."""

    tool_name: str
    required: bool


@attrs.frozen
class DeleteAgent:
    """Delete the agent, its messages, passages and session -> ``None``. Blocks stay (they
    are standalone and may be shared)."""


# -- messages ------------------------------------------------------------------------------------
@attrs.frozen
class SendMessage:
    """Run the loop on new input -> :class:`TurnResult`.

    ``stream`` receives events as they happen (messages, then :class:`LettaStopReason` and
    :class:`LettaUsage`); with ``stream_tokens`` the LLM's text arrives in pieces that share a
    message id. A consumer that closes its end or stops reading never breaks the run. Setting
    ``cancel`` stops the run between steps with ``cancelled``. A request whose first message
    has the same ``otid`` as the first input of an earlier run is a retry (its first attempt's
    outcome was unknown to the caller): it gets that run's result, not a new run. ``background``
    and ``config`` are recorded on the run (Letta's ``background`` and ``request_config``).
    ``on_start(run_id)`` is called once the input is committed (for a retry: with the run the
    first attempt started), before the loop runs.
    """

    messages: tuple[InputMessage, ...]
    max_steps: int | None = None
    stream: trio.MemorySendChannel[StreamEvent] | None = attrs.field(default=None, eq=False)
    stream_tokens: bool = False
    use_assistant_message: bool = True
    cancel: trio.Event | None = attrs.field(default=None, eq=False)
    # more writes (None deletes) committed with the input messages (a schedule's advance)
    extra_writes: tuple[tuple[bytes, bytes | None], ...] = attrs.field(default=(), eq=False)
    background: bool = False  # recorded on the run (Letta's background mode)
    config: Mapping[str, Any] = attrs.field(factory=dict, hash=False)  # the run's request_config
    on_start: Callable[[str], None] | None = attrs.field(default=None, eq=False)
    thread: str | None = None  # the conversation to run in (None: the agent's own history)


@attrs.frozen
class ListMessages:
    """Stored messages -> ``list[AgentMessage]``: those strictly after message ``after`` and
    strictly before ``before`` (in history order), sorted by ``order`` (``desc``: newest
    first), the first ``limit`` of them; rendered with ``use_assistant_message``."""

    after: str | None = None
    before: str | None = None
    limit: int = 100
    order: Literal["asc", "desc"] = "desc"
    use_assistant_message: bool = True
    thread: str | None = None  # the conversation whose history to list (None: the agent's)


@attrs.frozen
class CompactMessages:
    """Summarize the oldest messages in context now -> ``CompactionResult``. ``mode`` is
    ``sliding_window`` or ``all``; ``clip_chars`` None: no clipping."""

    mode: str = "sliding_window"
    prompt: str | None = None
    clip_chars: int | None = 50_000
    sliding_window_percentage: float = 0.3
    acknowledge: bool = False  # add Letta's acknowledgement post-prompt
    thread: str | None = None  # the conversation to compact (None: the agent's own history)


@attrs.frozen
class ResetMessages:
    """Delete the message history and the session (memory stays) -> :class:`AgentView`."""


@attrs.frozen
class Recompile:
    """-> ``str``: the system prompt the agent's next step sends, compiled from its current
    memory (Letta's recompile): it replaces the thread's stored system message in place
    unless ``dry_run``."""

    thread: str | None = None  # a conversation's (the same prompt: memory is the agent's)
    dry_run: bool = False


# -- blocks --------------------------------------------------------------------------------------
@attrs.frozen
class ListBlocks:
    """-> ``list[Block]`` in attachment order."""


@attrs.frozen
class GetBlock:
    """-> :class:`Block` by label."""

    label: str


@attrs.frozen
class UpdateBlock:
    """Change the block with ``label`` -> :class:`Block`."""

    label: str
    value: str | None = None
    limit: int | None = None
    description: str | None = None
    read_only: bool | None = None
    new_label: str | None = None
    metadata: Mapping[str, Any] | None = attrs.field(default=None, hash=False)


@attrs.frozen
class AttachBlock:
    """Attach the standalone block ``block_id`` -> :class:`AgentView`."""

    block_id: str


@attrs.frozen
class DetachBlock:
    """-> :class:`AgentView`."""

    block_id: str


# -- archival memory -----------------------------------------------------------------------------
@attrs.frozen
class InsertPassage:
    """-> ``list[PassageRecord]`` (the one inserted)."""

    text: str
    tags: tuple[str, ...] = ()


@attrs.frozen
class ListPassages:
    """-> ``list[PassageRecord]``, oldest first (``ascending``) or newest first; cursors are
    passage ids, as for :class:`ListMessages`; ``search`` keeps texts containing it."""

    after: str | None = None
    before: str | None = None
    limit: int = 100
    search: str | None = None
    ascending: bool = True


@attrs.frozen
class SearchPassages:
    """Semantic search -> ``list[PassageHit]``. ``start``/``end`` are epoch seconds."""

    query: str
    tags: tuple[str, ...] = ()
    tag_match_mode: Literal["any", "all"] = "any"
    top_k: int = 5
    start: float | None = None
    end: float | None = None


@attrs.frozen
class DeletePassage:
    """-> ``None``."""

    passage_id: str


# -- tools ---------------------------------------------------------------------------------------
@attrs.frozen
class ListTools:
    """-> ``list[ToolSpec]`` attached to the agent."""


@attrs.frozen
class AttachTool:
    """-> :class:`AgentView`."""

    tool_id: str


@attrs.frozen
class DetachTool:
    """-> :class:`AgentView`."""

    tool_id: str


@attrs.frozen
class RunTool:
    """Run an attached tool once, outside any run -> :class:`ToolRunResult`."""

    name: str
    args: Mapping[str, Any] = attrs.field(factory=dict, hash=False)


# -- folders, files, archives, identities --------------------------------------------------------
@attrs.frozen
class AttachFolder:
    """Attach a folder (its files are opened up to ``max_files_open``) -> ``None``."""

    folder_id: str


@attrs.frozen
class DetachFolder:
    """-> ``None``."""

    folder_id: str


@attrs.frozen
class OpenFile:
    """Open a file (whole, or lines ``start``..``end``, 0-based, end exclusive) -> the names
    of files closed to make room (``list[str]``)."""

    file_id: str
    start: int | None = None
    end: int | None = None


@attrs.frozen
class CloseFile:
    """Close one file (``file_id``), or every open file (``None``) -> the names closed."""

    file_id: str | None = None


@attrs.frozen
class ListAgentFiles:
    """-> ``list[AgentFile]``: every file of the attached folders, its state and window."""


@attrs.frozen
class AttachShared:
    """Attach an archive or an identity (``kind``) -> ``None``."""

    kind: Literal["archive", "identity"]
    target_id: str


@attrs.frozen
class DetachShared:
    """-> ``None`` (detaching what is not attached is a no-op)."""

    kind: Literal["archive", "identity"]
    target_id: str


# -- scheduled messages --------------------------------------------------------------------------
@attrs.frozen
class CreateSchedule:
    """Schedule ``messages`` (Letta's ``schedule``: one-time or recurring)
    -> ``ScheduledMessage``."""

    messages: tuple[InputMessage, ...]
    schedule: Mapping[str, Any] = attrs.field(hash=False)
    max_steps: int | None = None
    include_return_message_types: tuple[str, ...] | None = None


@attrs.frozen
class DeleteSchedule:
    """-> ``None``."""

    schedule_id: str


@attrs.frozen
class FireSchedule:
    """Send the occurrence of a schedule due at ``due`` (epoch microseconds, as in its due
    key), if it still is -> :class:`TurnResult`, or ``None`` when it already fired or is
    gone."""

    schedule_id: str
    due: int


# -- sessions ------------------------------------------------------------------------------------
@attrs.frozen
class GetSession:
    """-> :class:`SessionCheckpoint` or ``None``."""


@attrs.frozen
class ResumeRun:
    """Finish an interrupted run (no-op if none) -> :class:`TurnResult` or ``None``."""


@attrs.frozen
class ExportSession:
    """Hand the current session to another agent -> :class:`SessionSnapshot`. An unfinished
    session is closed here (``cancelled``, ``transferred_to`` set) and continues there."""

    target_agent_id: str


@attrs.frozen
class ImportSession:
    """Take over a session exported by another agent; an unfinished one is resumed here
    -> :class:`TurnResult`. Importing the same session twice is a no-op the second time."""

    snapshot: SessionSnapshot
    stream: trio.MemorySendChannel[StreamEvent] | None = attrs.field(default=None, eq=False)


# -- responses -----------------------------------------------------------------------------------
@attrs.frozen
class AgentView:
    """An agent as the API shows it (Letta's AgentState)."""

    agent: AgentRecord
    blocks: tuple[Block, ...]
    tools: tuple[ToolSpec, ...]
    last_stop_reason: str | None
    message_ids: tuple[str, ...]
    folders: tuple[Any, ...] = ()  # the attached ``_folders.Folder`` records, in attach order


@attrs.frozen
class TurnResult:
    """A finished run: its messages (input included, rendered), why it stopped, its usage."""

    run_id: str
    messages: tuple[AgentMessage, ...]
    stop_reason: str
    usage: LettaUsage
    error: str | None = None

    @property
    def response_messages(self) -> tuple[AgentMessage, ...]:
        """What Letta's LettaResponse.messages holds: the messages the run made, without its
        input (user-role messages are the input, heartbeats and alerts; a system message in a
        run is an input; an assistant message no step made is an input) and without an
        approval answer."""
        from ._messages import (
            ApprovalResponseMessage,
            AssistantMessage,
            SystemMessage,
            UserMessage,
        )

        hidden = (UserMessage, ApprovalResponseMessage, SystemMessage)
        return tuple(
            m
            for m in self.messages
            if not isinstance(m, hidden)
            and not (isinstance(m, AssistantMessage) and m.step_id is None)
        )

    @property
    def reply(self) -> str:
        """The assistant text the user sees, joined (for tests and demos)."""
        from ._messages import AssistantMessage

        return "\n".join(m.content for m in self.messages if isinstance(m, AssistantMessage))


@attrs.frozen
class PassageHit:
    passage: PassageRecord
    score: float


@attrs.frozen
class ToolRunResult:
    """Letta's tool run answer."""

    status: Literal["success", "error"]
    func_return: str
    stdout: tuple[str, ...] = ()
    stderr: tuple[str, ...] = ()


@attrs.frozen
class SessionSnapshot:
    """A session in transit: its checkpoint and its messages (tool results included, so the
    agent that takes it over never runs a completed call again)."""

    source_agent_id: str
    checkpoint: SessionCheckpoint
    messages: tuple[AgentMessage, ...]
