"""What an AgentActor is given: its context (from the actor runtime) and its environment.

:class:`ActorContextLike` is the part of ``kelpie_agent.actors.ActorContext`` the agent uses;
any object with these members works (tests use a small stand-in). :class:`AgentEnv` holds the
ports shared by every agent of a process, and :class:`LoopConfig` the loop's limits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import attrs

from kelpie_agent.embeddings import Embedder, HashingEmbedder
from kelpie_agent.llm import LlmClient
from kelpie_agent.ports import Ports
from kelpie_agent.sandbox import Sandbox, SandboxRequest
from kelpie_agent.storage import KV, Transaction

from ._cancels import CancelTable

__all__ = ["ActorContextLike", "ActorIdLike", "AgentEnv", "LoopConfig", "McpToolSource"]


class ActorIdLike(Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def id(self) -> str: ...


class ActorContextLike(Protocol):
    """The members of the runtime's ActorContext that AgentActor uses."""

    @property
    def actor_id(self) -> ActorIdLike: ...

    @property
    def kv(self) -> KV: ...

    @property
    def ports(self) -> Ports: ...

    @property
    def node_id(self) -> str: ...

    def transaction(self) -> AbstractAsyncContextManager[Transaction]:
        """A KV transaction fenced by the actor's lease; every state write goes through one."""
        ...


class McpResultLike(Protocol):
    @property
    def text(self) -> str: ...

    @property
    def is_error(self) -> bool: ...


class McpToolSource(Protocol):
    """The part of ``kelpie_agent.mcp.McpClient`` the agent uses to call MCP tools.

    ``call_tool`` raises a ``KelpieError``; one whose ``outcome_unknown`` attribute is true
    was sent and may have run, so the agent never sends it again."""

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> McpResultLike: ...

    def status(self, server: str) -> str: ...

    async def reconnect(self, server: str) -> None: ...


def _positive(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"LoopConfig.{attribute.name} must be a positive number, got {value!r}")


def _count(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"LoopConfig.{attribute.name} must be an int >= 0, got {value!r}")


@attrs.frozen
class LoopConfig:
    """Limits of the agent loop (defaults follow Letta where Letta has one).

    * ``max_steps``: LLM calls per run unless the request says otherwise (Letta: 50).
    * ``llm_retries`` retryable LLM failures per call, with exponential backoff from
      ``llm_backoff`` seconds (doubling, at most ``llm_backoff_max``, jittered from the Rng
      port, never shorter than a 429's ``retry_after``); then ``llm_api_error``.
      ``llm_timeout`` bounds one attempt.
    * ``storage_attempts`` per transaction (conflicts and storage errors), backing off from
      ``storage_backoff`` seconds; then :class:`AgentStorageError`.
    * Budgets (doc 004): ``max_tool_calls`` executed per run; ``max_identical_calls`` of one
      tool with the same arguments per run; ``max_invalid_steps`` consecutive steps whose calls
      were all refused (then ``invalid_tool_call``); ``max_empty_responses`` empty answers per
      run (then ``invalid_llm_response``); ``no_tool_call_nudges`` reminders to a memgpt agent
      that answered without a tool (then ``no_tool_call``).
    * ``history_window``: messages kept in memory and offered to the LLM (fewer if the context
      window is too small).
    * ``sink_timeout``: how long a stream event may wait for a slow consumer before the stream
      is dropped (the run goes on). ``tool_timeout``: one sandbox or MCP call.
    * ``resume_on_activate``: finish an interrupted run when the actor activates.
    """

    max_steps: int = attrs.field(default=50, validator=_positive)
    llm_retries: int = attrs.field(default=3, validator=_count)
    llm_backoff: float = attrs.field(default=1.0, validator=_positive)
    llm_backoff_max: float = attrs.field(default=30.0, validator=_positive)
    llm_timeout: float = attrs.field(default=300.0, validator=_positive)
    storage_attempts: int = attrs.field(default=8, validator=_positive)
    storage_backoff: float = attrs.field(default=0.05, validator=_positive)
    max_tool_calls: int = attrs.field(default=100, validator=_positive)
    max_identical_calls: int = attrs.field(default=3, validator=_positive)
    max_invalid_steps: int = attrs.field(default=3, validator=_positive)
    max_empty_responses: int = attrs.field(default=2, validator=_count)
    no_tool_call_nudges: int = attrs.field(default=1, validator=_count)
    history_window: int = attrs.field(default=100, validator=_positive)
    sink_timeout: float = attrs.field(default=30.0, validator=_positive)
    tool_timeout: float = attrs.field(default=60.0, validator=_positive)
    resume_on_activate: bool = True


@attrs.define
class AgentEnv:
    """The ports every agent of a process shares. ``sandbox_factory`` makes an unbooted
    sandbox for an agent's :class:`SandboxRequest` (one per active agent, booted on first
    use); ``mcp`` serves ``external_mcp`` tools. Without them, those tools fail with a clear
    result. ``cancels``: the node's table of run cancels, shared with its service
    (``_cancels``)."""

    llm: LlmClient
    embedder: Embedder = attrs.field(factory=HashingEmbedder)
    sandbox_factory: Callable[[SandboxRequest], Sandbox] | None = None
    mcp: McpToolSource | None = None
    config: LoopConfig = attrs.field(factory=LoopConfig)
    cancels: CancelTable = attrs.field(factory=CancelTable)
