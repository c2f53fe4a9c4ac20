"""The API inside the simulator: an AgentService node (sim KV, sim ports, SimLlmClient, sim
sandbox) with ``create_app`` in front, reached through httpx's ASGITransport on trio.

``api()`` yields an ``httpx.AsyncClient`` whose base URL is the app; ``api(raw=True)`` also
yields the service and the app for tests that need them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx
import trio

import kelpie_dst
from kelpie_agent.agent import LoopConfig
from kelpie_agent.api import create_app
from kelpie_agent.mcp import McpTransport
from kelpie_agent.service import AgentService, ServiceOptions, open_agent_node
from kelpie_dst.shims import HelpfulPolicy, LlmTiming, SimLlmClient, open_kv, sim_ports
from kelpie_dst.shims.llm import Policy

from ..timings import SHORT_LEASES

BASE = "http://kelpie.test"
# strict guards; httpx's cookie jar (the test client's, not the app's) reads time.time
STRICT: dict[str, Any] = {"guards": "strict", "guard_allow": ("http.cookiejar",)}
OPTIONS = attrs.evolve(SHORT_LEASES, idle_timeout=5.0)


@attrs.define
class Api:
    client: httpx.AsyncClient
    service: AgentService
    app: Any
    nursery: trio.Nursery


@asynccontextmanager
async def service_node(
    *,
    policy: Policy | None = None,
    timing: LlmTiming | None = None,
    config: LoopConfig | None = None,
    mcp_transport: McpTransport | None = None,
) -> AsyncIterator[AgentService]:
    sim = kelpie_dst.current_simulation()
    assert sim is not None
    node = sim.current_node()
    assert node is not None
    async with open_agent_node(
        open_kv(node),
        sim_ports(node),
        node_id=node.name,
        llm=SimLlmClient(policy or HelpfulPolicy(), timing=timing or LlmTiming()),
        sandbox_factory=lambda _: kelpie_dst.open_sandbox(name="tools"),
        loop_config=config,
        mcp_transport=mcp_transport,
        dispatcher_options=OPTIONS,
        options=ServiceOptions(request_timeout=30.0),
        observer=kelpie_dst.log,
    ) as service:
        yield service


@asynccontextmanager
async def api(
    *,
    api_key: str | None = None,
    policy: Policy | None = None,
    timing: LlmTiming | None = None,
    config: LoopConfig | None = None,
    ping_interval: float = 15.0,
    mcp_transport: McpTransport | None = None,
) -> AsyncIterator[Api]:
    async with (
        service_node(
            policy=policy, timing=timing, config=config, mcp_transport=mcp_transport
        ) as service,
        trio.open_nursery() as nursery,
    ):
        app = create_app(
            service,
            api_key=api_key,
            observer=kelpie_dst.log,
            ping_interval=ping_interval,
        )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            yield Api(client, service, app, nursery)
        nursery.cancel_scope.cancel()


def sse_frames(body: str) -> list[Any]:
    """The JSON payloads of a stream's ``data:`` frames, ``"[DONE]"`` as a string."""
    import json

    out: list[Any] = []
    for chunk in body.split("\n\n"):
        if not chunk:
            continue
        lines = chunk.split("\n")
        data = "".join(line[len("data: ") :] for line in lines if line.startswith("data: "))
        event = next((line[len("event: ") :] for line in lines if line.startswith("event: ")), None)
        if data == "[DONE]":
            out.append("[DONE]")
        elif event is not None:
            out.append({"event": event, **json.loads(data)})
        else:
            out.append(json.loads(data))
    return out


AGENT = {
    "name": "otto",
    "agent_type": "memgpt_agent",
    "memory_blocks": [
        {"label": "persona", "value": "I am Otto.", "limit": 2000},
        {"label": "human", "value": "The user."},
    ],
}
