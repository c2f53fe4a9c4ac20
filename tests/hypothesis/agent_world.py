"""The simulated world of the agent server machine (tests/hypothesis/agent_machine.py).

A ``db`` node holds the one database; server nodes (``n1``, ``n2``, ``n3``) each run
``open_agent_node`` over their own handle on it (``open_kv(node, host=db)``), so a crash or a
partition from ``db`` hits one server at a time, and an agent's lease moves between them. With
``http=True`` each server also serves the Letta-compatible app with ``kelpie_agent.http.serve``
on port 8283 of the simulated network, where the real ``letta_client`` SDK on ``main`` reaches
it. The LLM is scripted (it echoes the user's text and calls no tool), so an agent's memory
changes only through the requests the machine makes.

:class:`QueuedEditService` and :class:`OtidDroppingService` are planted bugs that the machine
must find (tests/hypothesis/test_agent_machine.py).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import trio

import kelpie_dst
from kelpie_agent.agent import Block, InputMessage, TurnResult
from kelpie_agent.api import create_app
from kelpie_agent.http import ServerOptions, serve
from kelpie_agent.service import AgentService, ServiceError, ServiceOptions, open_agent_node
from kelpie_dst.shims import LlmTiming, ScriptedPolicy, SimLlmClient, open_kv, sim_ports

from ..timings import SHORT_LEASES

DB = "db"
PORT = 8283
ECHO = ScriptedPolicy.from_dict({"mode": "scripted", "rules": [{"text": "echo: {text}"}]})
TIMING = LlmTiming(0.05, 0.2, 400.0)
# Short leases and idle timeouts: agents deactivate and move between nodes within an example.
DISPATCHER = SHORT_LEASES
SERVICE = ServiceOptions(request_timeout=20.0)
SERVER = ServerOptions(header_timeout=10.0, body_timeout=10.0, keep_alive_timeout=5.0)
# Strict guards: a wall-clock read, entropy or a thread in the server fails the example. The
# HTTP client side is allowed what tests/api/test_letta_client.py allows it: httpx's cookie
# jar reads time.time for expiry, the SDK and anyio are let through.
STRICT: dict[str, Any] = {"guards": "strict"}
CLIENT_GUARDS: dict[str, Any] = {
    "guards": "strict",
    "guard_allow": ("http.cookiejar", "letta_client", "anyio"),
}


class QueuedEditService(AgentService):
    """Planted bug: a block edit is acknowledged as soon as it is queued, and a background
    task of the node applies it (a write-behind "optimisation" that saves the caller the
    agent's round trip). A crash before the task ran loses an acknowledged edit."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._queue = nursery
            await super().run(task_status=task_status)

    async def update_agent_block(
        self, agent_id: str, label: str, *, value: str | None = None, **changes: Any
    ) -> Block:
        block = await self.get_agent_block(agent_id, label)  # checks the agent and the label

        async def apply() -> None:
            with contextlib.suppress(ServiceError):
                await super(QueuedEditService, self).update_agent_block(
                    agent_id, label, value=value, **changes
                )

        self._queue.start_soon(apply)
        return attrs.evolve(block, value=block.value if value is None else value)


class OtidDroppingService(AgentService):
    """Planted bug: the service drops the otid its client put on a message (a refactoring
    slip) and makes its own, so a client's retry of a message that did land runs it twice."""

    async def send_message(
        self, agent_id: str, messages: Sequence[InputMessage], **options: Any
    ) -> TurnResult:
        bare = tuple(attrs.evolve(m, otid=None) for m in messages)
        return await super().send_message(agent_id, bare, **options)


async def server_node(
    node: kelpie_dst.Node, *, http: bool, service_class: type[AgentService]
) -> None:
    """A server node's program (run again from the start after each restart)."""
    sim = node.sim
    async with open_agent_node(
        open_kv(node, host=sim.node(DB)),
        sim_ports(node),
        node_id=node.name,
        llm=SimLlmClient(ECHO, timing=TIMING),
        dispatcher_options=DISPATCHER,
        options=SERVICE,
        observer=kelpie_dst.log,
        service_class=service_class,
    ) as service:
        node.volatile["service"] = service
        if not http:
            await trio.sleep_forever()
        app = create_app(service, observer=kelpie_dst.log)
        await serve(app, "0.0.0.0", PORT, SERVER)


def start_world(
    sim: kelpie_dst.Simulation,
    servers: tuple[str, ...],
    *,
    http: bool,
    service_class: type[AgentService] = AgentService,
) -> None:
    sim.add_node(DB)
    main = functools.partial(server_node, http=http, service_class=service_class)
    for name in servers:
        sim.add_node(name, main)


def running_service(sim: kelpie_dst.Simulation, name: str) -> AgentService | None:
    """The node's service if the node is up and its service runs (else None: "refused")."""
    node = sim.node(name)
    found: Mapping[str, Any] = node.volatile if node.alive else {}
    service = found.get("service")
    return service if isinstance(service, AgentService) and service.running else None


async def failover(
    sim: kelpie_dst.Simulation, servers: tuple[str, ...], node: str, wait: float
) -> str:
    """The server a client reaches when it prefers ``node``: the first whose service runs,
    from ``node`` on; if none does, it tries again for up to ``wait`` seconds, then takes
    ``node`` (and is refused)."""
    start = servers.index(node)
    order = servers[start:] + servers[:start]
    deadline = trio.current_time() + wait
    while True:
        up = [name for name in order if running_service(sim, name)]
        if up:
            return up[0]
        if trio.current_time() >= deadline:
            return node
        await trio.sleep(0.5)
