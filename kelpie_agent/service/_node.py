"""Assembling one server node: environment, dispatcher and service, running.

``async with open_agent_node(kv, ports, node_id=..., llm=...) as service:`` is all that
``kelpie serve`` and the simulation workloads need. Production passes a ``SqliteKV`` (or
``PostgresKV``), ``system_ports()`` and ``AnthropicLlm``; a simulation passes
``kelpie_dst.open_kv(node, host=db)``, ``sim_ports(node)``, a ``SimLlmClient`` and
``kelpie_dst.open_sandbox`` as the sandbox factory. The same code runs in both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import trio

from kelpie_agent.actors import Dispatcher, DispatcherOptions
from kelpie_agent.agent import AgentEnv, LoopConfig, McpToolSource
from kelpie_agent.embeddings import Embedder, HashingEmbedder
from kelpie_agent.llm import LlmClient
from kelpie_agent.mcp import McpClient, McpTransport, stdio_transport
from kelpie_agent.ports import Ports
from kelpie_agent.sandbox import Sandbox, SandboxRequest
from kelpie_agent.storage import KV

from ._actor import ServiceAgentActor
from ._base import KIND, Observer
from ._folders import resume_uploads
from ._mcp_servers import ManagedMcp
from ._service import AgentService
from ._types import ServiceOptions

__all__ = ["open_agent_node"]


@asynccontextmanager
async def open_agent_node(
    kv: KV,
    ports: Ports,
    *,
    node_id: str,
    llm: LlmClient,
    sandbox_factory: Callable[[SandboxRequest], Sandbox] | None = None,
    embedder: Embedder | None = None,
    mcp: McpToolSource | None = None,
    mcp_transport: McpTransport | None = None,
    loop_config: LoopConfig | None = None,
    dispatcher_options: DispatcherOptions | None = None,
    options: ServiceOptions | None = None,
    observer: Observer | None = None,
    service_class: type[AgentService] = AgentService,
) -> AsyncIterator[AgentService]:
    """Run a node: a :class:`Dispatcher` whose ``agent`` actors are
    :class:`ServiceAgentActor`\\ s over these ports, and the :class:`AgentService` in front of
    it. Yields the service once the dispatcher runs; on exit (or cancellation) the dispatcher
    deactivates its agents and releases their leases (within ``shutdown_timeout``).

    ``node_id`` names one live process at a time (a restarted process may reuse it; two live
    ones must not). ``observer(kind, **fields)`` hears the runtime's and the service's events
    (``kelpie_dst.log`` in a simulation). ``service_class``: an :class:`AgentService`
    subclass to serve with instead (instrumentation, or a test's planted bug). The caller
    owns ``kv``, ``llm`` and ``mcp`` (the static MCP servers); the servers managed through the
    API (``_mcp_servers``) are started with ``mcp_transport`` (default: stdio/HTTP)."""
    managed_client = McpClient([], transport=mcp_transport or stdio_transport)
    managed = ManagedMcp(kv, ports, managed_client, static=mcp)
    env = AgentEnv(
        llm=llm,
        embedder=embedder if embedder is not None else HashingEmbedder(),
        sandbox_factory=sandbox_factory,
        mcp=managed,
        config=loop_config if loop_config is not None else LoopConfig(),
    )
    dispatcher = Dispatcher(
        kv,
        ports,
        node_id=node_id,
        factories={KIND: lambda _: ServiceAgentActor(env)},
        options=dispatcher_options,
        observer=observer,
    )
    service = service_class(
        dispatcher,
        kv,
        ports,
        loop_config=env.config,
        options=options,
        observer=observer,
        embedder=env.embedder,
        cancels=env.cancels,
    )
    service.mcp_servers = managed
    async with managed_client, trio.open_nursery() as nursery:
        await nursery.start(service.run)
        # uploads a crash left unprocessed (D<files>-1): every node redoes them at start
        service._spawn("resuming uploads", lambda: resume_uploads(service))
        try:
            yield service
        finally:
            nursery.cancel_scope.cancel()
