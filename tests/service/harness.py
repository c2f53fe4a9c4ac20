"""A service node inside the simulator, for the single-node tests (the ``dst`` fixture).

``service_node()`` runs :func:`kelpie_agent.service.open_agent_node` on the calling node, with
a ``SimLlmClient`` (the helpful policy by default), the simulated sandbox and KV, and short
actor timings so that idle deactivation happens within a test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs

import kelpie_dst
from kelpie_agent.agent import BlockCreate, CreateAgent, InputMessage, LoopConfig
from kelpie_agent.service import AgentService, ServiceOptions, open_agent_node
from kelpie_agent.storage import KV
from kelpie_dst.shims import HelpfulPolicy, LlmTiming, SimLlmClient, open_kv, sim_ports
from kelpie_dst.shims.llm import Policy

from ..timings import SHORT_LEASES

OPTIONS = attrs.evolve(SHORT_LEASES, idle_timeout=5.0)
SERVICE = ServiceOptions(request_timeout=30.0)


@asynccontextmanager
async def service_node(
    *,
    policy: Policy | None = None,
    timing: LlmTiming | None = None,
    kv: KV | None = None,
    sandbox: bool = True,
    config: LoopConfig | None = None,
    options: ServiceOptions = SERVICE,
) -> AsyncIterator[AgentService]:
    sim = kelpie_dst.current_simulation()
    assert sim is not None
    node = sim.current_node()
    assert node is not None
    async with open_agent_node(
        kv if kv is not None else open_kv(node),
        sim_ports(node),
        node_id=node.name,
        llm=SimLlmClient(policy or HelpfulPolicy(), timing=timing or LlmTiming()),
        sandbox_factory=(lambda _: kelpie_dst.open_sandbox(name="tools")) if sandbox else None,
        loop_config=config,
        dispatcher_options=OPTIONS,
        options=options,
        observer=kelpie_dst.log,
    ) as service:
        yield service


def otto(**options: Any) -> CreateAgent:
    """A memgpt agent with a persona and a human block."""
    fields: dict[str, Any] = {
        "name": "otto",
        "agent_type": "memgpt_agent",
        "memory_blocks": (BlockCreate("persona", "I am Otto."), BlockCreate("human", "")),
    }
    fields.update(options)
    return CreateAgent(**fields)


def user(text: str, otid: str | None = None) -> tuple[InputMessage, ...]:
    return (InputMessage("user", text, otid=otid),)
