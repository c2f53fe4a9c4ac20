"""A Hypothesis state machine over the agent server, in the simulation (docs/hypothesis.md,
section 12).

Three server nodes share one database host (tests/hypothesis/agent_world.py). The rules create
and delete agents, send messages (and resend earlier ones with their otid, as a retrying client
does), edit core memory blocks, insert and search archival memory, send two or three of these
at once, crash nodes (also in the middle of a request), partition the network, switch storage
faults on for a while, and let time pass. They go through a driver (agent_drivers.py):
``AgentService`` called directly (:class:`AgentServerMachine`), or the real ``letta_client``
SDK over the simulated network (:class:`HttpAgentServerMachine`). Every reply is checked
against the model (agent_model.py); after every step that leaves the network healed,
:meth:`~AgentServerMachine.agrees_with_model` reads everything back (agent_check.py).
:class:`QueuedEditMachine` and :class:`OtidDroppingMachine` have planted bugs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import ClassVar, TypeVar

import hypothesis.strategies as st
import trio
from hypothesis.stateful import Bundle, MultipleResults, consumes, multiple

from kelpie_agent.service import AgentService
from kelpie_dst.hypothesis import (
    CrashRules,
    FaultWindowRules,
    Outcome,
    PartitionRules,
    SimStateMachine,
    TimeRules,
    initialize,
    invariant,
    rule,
)

from .agent_check import read_back
from .agent_drivers import Driver, Reply, ServiceDriver
from .agent_http import HttpDriver
from .agent_model import AgentModel, Model
from .agent_ops import LABELS, NODES, OPS, SERVERS, VALUES, Op, run_concurrently
from .agent_ops import Delete as Delete  # the printed steps name them
from .agent_ops import Edit as Edit
from .agent_ops import Insert as Insert
from .agent_ops import Send as Send
from .agent_world import (
    CLIENT_GUARDS,
    DB,
    STRICT,
    OtidDroppingService,
    QueuedEditService,
    failover,
    running_service,
    start_world,
)

T = TypeVar("T")
# Crash the node serving a request this long after it was sent (it restarts at once).
CRASH_AFTER = st.sampled_from([None, 0.01, 0.2, 1.0])
WHICH = st.integers(0, 15)  # picks one of an agent's earlier messages or passages
PARTITIONED = ("main", DB, *SERVERS)
SIDES = st.lists(
    st.sampled_from(PARTITIONED), min_size=1, max_size=len(PARTITIONED) - 1, unique=True
)
# A partition heals by itself this long after it started (None: only heal_network heals it).
HEAL_AFTER = st.sampled_from([None, 1.0, 10.0])
FAILOVER = 5.0  # seconds a client tries the servers before it gives up on all being down


class AgentServerMachine(CrashRules, PartitionRules, FaultWindowRules, TimeRules, SimStateMachine):
    """The agent server, driven through ``AgentService`` on three nodes."""

    sim_options = STRICT
    http: ClassVar[bool] = False
    service_class: ClassVar[type[AgentService]] = AgentService
    crash_nodes = SERVERS
    restart_delays = (0.0, 1.0, 10.0)  # no "down for good": such a node only refuses
    partition_nodes = PARTITIONED
    # Storage faults of the servers' database handles (not corruption: a corrupted key stays
    # unreadable until it is written again, by design).
    fault_window_types = (
        "storage.latency",
        "storage.write_fail",
        "storage.read_fail",
        "storage.unavailable",
        "storage.conflict",
        "storage.crash_after_write",
    )
    fault_window_nodes = SERVERS
    agents = Bundle("agents")

    def __init__(self) -> None:
        super().__init__()
        self.model = Model()
        self.driver: Driver = HttpDriver(SERVERS) if self.http else ServiceDriver()
        self.checked_after = -1  # rule_steps at the last check
        self.checks = 0
        self.tally: Counter[str] = Counter()  # "<request>.<outcome>": what the faults did

    async def setup(self) -> None:
        start_world(self.sim, SERVERS, http=self.http, service_class=self.service_class)
        await self.driver.start()
        await trio.sleep(1.0)  # the servers boot (and listen)
        assert all(running_service(self.sim, name) for name in SERVERS)

    async def _request(
        self,
        what: str,
        node: str,
        crash_after: float | None,
        request: Callable[[str], Awaitable[Reply[T]]],
    ) -> Reply[T]:
        """``request(server)`` to ``node``, or if its service is down to the next server
        whose service runs (a client failing over, for up to ``FAILOVER`` seconds); with
        ``crash_after``, crash that server that long after the request was sent, unless it
        was answered by then, and restart it at once."""
        server = await failover(self.sim, SERVERS, node, FAILOVER)
        replies: list[Reply[T]] = []
        async with trio.open_nursery() as nursery:

            async def crash(delay: float) -> None:
                await trio.sleep(delay)
                target = self.sim.node(server)
                if target.alive:
                    self.sim.crash(target)
                    self.sim.restart(target)

            if crash_after is not None:
                nursery.start_soon(crash, crash_after)
            replies.append(await request(server))
            nursery.cancel_scope.cancel()
        self.tally[f"{what}.{replies[0].outcome.value}"] += 1
        return replies[0]

    # -- agents --------------------------------------------------------------------------------
    @initialize(target=agents)
    async def first_agent(self) -> str | MultipleResults[str]:
        """Every example starts with an agent (Hypothesis may switch ``create_agent`` off)."""
        return await self._create("n1", None)

    @rule(target=agents, node=NODES, crash_after=CRASH_AFTER)
    async def create_agent(
        self, node: str, crash_after: float | None
    ) -> str | MultipleResults[str]:
        return await self._create(node, crash_after)

    async def _create(self, node: str, crash_after: float | None) -> str | MultipleResults[str]:
        name = self.model.fresh("agent-")
        reply = await self._request(
            "create", node, crash_after, lambda n: self.driver.create_agent(n, name)
        )
        self.model.created(name, reply)
        return reply.get() if reply.outcome is Outcome.OK else multiple()

    @rule(target=agents, agent=consumes(agents), node=NODES, crash_after=CRASH_AFTER)
    async def delete_agent(
        self, agent: str, node: str, crash_after: float | None
    ) -> str | MultipleResults[str]:
        """Later rules pick the agent again only if the delete was refused (the check still
        covers it: listed while it may exist, never once it is gone)."""
        reply = await self._request(
            "delete", node, crash_after, lambda n: self.driver.delete_agent(n, agent)
        )
        model = self.model.agents[agent]
        self.model.deleted(model, reply)
        return multiple(agent) if model.live else multiple()

    # -- messages ------------------------------------------------------------------------------
    @rule(agent=agents, node=NODES, stream=st.booleans(), crash_after=CRASH_AFTER)
    async def send_message(
        self, agent: str, node: str, stream: bool, crash_after: float | None
    ) -> None:
        """Send a new message, whole or streamed (``stream``)."""
        model = self.model.agents[agent]
        otid = self.model.fresh("m")
        model.texts[otid] = f"note {otid}"
        await self._send(model, node, otid, stream, crash_after)

    @rule(agent=agents, node=NODES, which=WHICH)
    async def resend_message(self, agent: str, node: str, which: int) -> None:
        """Send one of the agent's earlier messages again, with its otid (a client retrying
        after no answer, or a duplicate delivery): it must run once in all."""
        model = self.model.agents[agent]
        if model.texts:
            otid = list(model.texts)[which % len(model.texts)]
            await self._send(model, node, otid, False, None)

    async def _send(
        self, model: AgentModel, node: str, otid: str, stream: bool, crash_after: float | None
    ) -> None:
        text = model.texts[otid]
        reply = await self._request(
            "stream" if stream else "send",
            node,
            crash_after,
            lambda n: self.driver.send_message(n, model.agent_id, text, otid, stream),
        )
        self.model.sent(model, otid, reply)

    # -- core memory ---------------------------------------------------------------------------
    @rule(agent=agents, node=NODES, label=LABELS, value=VALUES, crash_after=CRASH_AFTER)
    async def edit_block(
        self, agent: str, node: str, label: str, value: str, crash_after: float | None
    ) -> None:
        reply = await self._request(
            "edit", node, crash_after, lambda n: self.driver.update_block(n, agent, label, value)
        )
        self.model.edited(self.model.agents[agent], label, [(value, reply)])

    # -- archival memory -----------------------------------------------------------------------
    @rule(agent=agents, node=NODES, crash_after=CRASH_AFTER)
    async def insert_passage(self, agent: str, node: str, crash_after: float | None) -> None:
        text = f"kelp fact {self.model.fresh('p')}"
        reply = await self._request(
            "insert", node, crash_after, lambda n: self.driver.insert_passage(n, agent, text)
        )
        self.model.inserted(self.model.agents[agent], text, reply)

    @rule(agent=agents, node=NODES, which=WHICH)
    async def search_archival(self, agent: str, node: str, which: int) -> None:
        model = self.model.agents[agent]
        texts = sorted(model.passages.acked | model.passages.unknown)
        query = texts[which % len(texts)] if texts else "kelp fact"
        reply = await self._request(
            "search", node, None, lambda n: self.driver.search_passages(n, agent, query)
        )
        self.model.searched(model, query, reply)

    @rule(target=agents, agent=consumes(agents), ops=OPS)
    async def concurrently(self, agent: str, ops: list[Op]) -> str | MultipleResults[str]:
        """Two or three requests to one agent at once (agent_ops.py); a delete among them
        takes the agent out of the bundle as ``delete_agent`` does."""
        await run_concurrently(self, agent, ops)
        return multiple(agent) if self.model.agents[agent].live else multiple()

    # -- faults besides CrashRules, PartitionRules and TimeRules ------------------------------
    @rule(side=SIDES, one_way=st.booleans(), heal_after=HEAL_AFTER)
    async def partition(
        self, side: list[str], one_way: bool, heal_after: float | None = None
    ) -> None:
        """PartitionRules.partition; with ``heal_after`` the network heals by itself (every
        partition) that long after, so that more steps end healed, and get checked."""
        rest = [name for name in PARTITIONED if name not in side]
        self.sim.network.partition(sorted(side), rest, one_way=one_way)
        if heal_after is not None:

            async def heal(delay: float) -> None:
                await trio.sleep(delay)
                self.sim.network.heal()

            main = self.sim.current_node()
            assert main is not None
            main.start_soon(heal, heal_after)

    # -- the check -----------------------------------------------------------------------------
    def healed(self) -> bool:
        """No partition, and a server up (reads go to the servers that are up: a crashed one
        comes back by itself, and its leases expire)."""
        network = self.sim.network
        up = any(self.sim.node(name).alive for name in SERVERS)
        return up and not network.blocked and not network.clogged

    @invariant()
    def agrees_with_model(self) -> None:
        """After each step that leaves the network healed, read everything back and check it
        against the model (tests/hypothesis/agent_check.py): one more step."""
        if self.checked_after == self.rule_steps or not self.healed():
            return
        self.checked_after = self.rule_steps
        self.checks += 1
        self.step(read_back, self.sim, SERVERS, self.driver, self.model)


class HttpAgentServerMachine(AgentServerMachine):
    """The same rules through the real letta_client SDK over the simulated network."""

    sim_options = CLIENT_GUARDS
    http = True


class QueuedEditMachine(AgentServerMachine):
    """Planted bug: block edits acknowledged before they are applied (QueuedEditService)."""

    service_class = QueuedEditService


class HttpQueuedEditMachine(QueuedEditMachine):
    """The same planted bug, found through the SDK."""

    sim_options = CLIENT_GUARDS
    http = True


class OtidDroppingMachine(AgentServerMachine):
    """Planted bug: the service ignores the client's otid, so retries run twice."""

    service_class = OtidDroppingService
