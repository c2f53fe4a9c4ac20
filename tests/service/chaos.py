"""Three service nodes sharing one database under faults, clients on ``main``, and checkers.

Topology (as tests/actors): a ``db`` node holds the store; nodes ``n1..n3`` each run
``open_agent_node`` over their own ``open_kv(node, host=db)`` handle, so storage faults,
partitions from ``db`` and crashes hit each node separately, and a crashed node restarts with
the same node id. Clients run on ``main`` (never crashed) and call the service of a node of
their choice, as an HTTP client would call a server; a client retries a retryable
``ServiceError`` on another node with the same ``otid``.

Checkers (pure functions over what was recorded):

* :func:`check_messages`: every acknowledged message's input and its response messages are in
  the agent's history exactly once, under the run the client was told; no input ran twice;
  nothing of one agent's conversation is in another's;
* :func:`check_single_activation`: from the dispatchers' observer events, the activations of
  one agent (acquired .. deactivated / lease lost / released / node crash) never overlap;
* liveness: every client finished within ``settle`` seconds of ``Simulation.heal()``.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
import trio

import kelpie_dst
from kelpie_agent.agent import (
    AgentMessage,
    AssistantMessage,
    BlockCreate,
    CreateAgent,
    InputMessage,
    Keys,
    TurnResult,
    UserMessage,
)
from kelpie_agent.agent._codec import unpack
from kelpie_agent.service import AgentService, ServiceError, ServiceOptions, open_agent_node
from kelpie_dst import Fault, Node, Simulation
from kelpie_dst.shims import HelpfulPolicy, LlmTiming, SimLlmClient, open_kv, sim_ports

from ..timings import SHORT_LEASES

T = TypeVar("T")
OPTIONS = SHORT_LEASES
TOKEN = re.compile(r"c\d+-m\d+")
CLOSERS = ("actor.deactivated", "actor.lease_lost", "actor.released", "actor.release_failed")


def chaos_faults() -> list[Fault]:
    """Crashes, partitions from the database, every storage fault, skew within the margin."""
    return [
        Fault("process.crash", 0.01, params=(("restart_after", 3.0),)),
        Fault("network.partition", 0.4, params=(("duration", 8.0),)),
        Fault("storage.write_fail", 0.05),
        Fault("storage.read_fail", 0.03),
        Fault("storage.latency", 0.1, params=(("max", 0.3),)),
        Fault("storage.unavailable", 0.02),
        Fault("storage.conflict", 0.05),
        Fault("storage.crash_after_write", 0.002),
        Fault("storage.crash_before_write", 0.002),
        Fault("clock.skew", 1.0, params=(("max_skew", 1.0),)),
    ]


@attrs.define
class Activations:
    """The dispatchers' observer events (and node crashes), tagged with node and incarnation."""

    events: list[tuple[float, str, int, str, str]] = attrs.field(factory=list)

    def observer(self, node: Node) -> Callable[..., None]:
        def observe(kind: str, **fields: Any) -> None:
            kelpie_dst.log(kind, **fields)
            actor = fields.get("actor")
            if isinstance(actor, str):
                self.events.append((trio.current_time(), node.name, node.incarnation, kind, actor))

        return observe

    def crashed(self, node: Node) -> None:
        self.events.append((trio.current_time(), node.name, node.incarnation, "node.crash", ""))


def check_single_activation(events: list[tuple[float, str, int, str, str]]) -> list[str]:
    """Per agent, activation intervals (from ``actor.acquired`` on a node incarnation to the
    first closing event there, or that incarnation's crash) are disjoint."""
    open_: dict[tuple[str, str, int], float] = {}
    intervals: dict[str, list[tuple[float, float, str]]] = {}
    for time, node, life, kind, actor in events:
        if kind == "node.crash":
            for key in [k for k in open_ if k[1] == node and k[2] == life]:
                start = open_.pop(key)
                intervals.setdefault(key[0], []).append((start, time, f"{node}#{life}"))
        elif kind == "actor.acquired":
            open_[(actor, node, life)] = time
        elif kind in CLOSERS and (actor, node, life) in open_:
            start = open_.pop((actor, node, life))
            intervals.setdefault(actor, []).append((start, time, f"{node}#{life}"))
    for (actor, node, life), start in open_.items():
        intervals.setdefault(actor, []).append((start, float("inf"), f"{node}#{life}"))
    problems = []
    for actor, spans in intervals.items():
        spans.sort()
        for (s1, e1, a), (s2, _, b) in itertools.pairwise(spans):
            if s2 < e1:
                problems.append(f"{actor}: {a} held [{s1:.3f}, {e1:.3f}], {b} from {s2:.3f}")
    return problems


@attrs.define
class Cluster:
    sim: Simulation
    db: Node
    nodes: list[Node]
    activations: Activations

    def service(self, node: Node) -> AgentService | None:
        found = node.volatile.get("service") if node.alive else None
        return found if isinstance(found, AgentService) and found.running else None


def start_cluster(sim: Simulation, *, n_nodes: int = 3) -> Cluster:
    db = sim.add_node("db")
    activations = Activations()

    async def node_main(node: Node) -> None:
        async with open_agent_node(
            open_kv(node, host=db),
            sim_ports(node),
            node_id=node.name,
            llm=SimLlmClient(HelpfulPolicy(), timing=LlmTiming(0.1, 0.4, 200.0)),
            dispatcher_options=OPTIONS,
            options=ServiceOptions(request_timeout=20.0),
            observer=activations.observer(node),
        ) as service:
            node.volatile["service"] = service
            await trio.sleep_forever()

    nodes = [sim.add_node(f"n{i + 1}", node_main) for i in range(n_nodes)]
    for node in nodes:
        node.crash_hooks.append(activations.crashed)
    return Cluster(sim, db, nodes, activations)


@attrs.frozen
class Ack:
    agent_id: str
    otid: str
    echo: bool
    result: TurnResult


@attrs.define
class Clients:
    cluster: Cluster
    agents: list[str] = attrs.field(factory=list)
    issued: dict[str, str] = attrs.field(factory=dict)  # otid -> agent id
    acks: list[Ack] = attrs.field(factory=list)
    errors: Counter[str] = attrs.field(factory=Counter)
    fatal: list[str] = attrs.field(factory=list)
    streamed: int = 0

    async def call(self, rng: Any, op: Callable[[AgentService], Awaitable[T]]) -> T | None:
        """``op`` on a random live node until it succeeds or fails for good (then None)."""
        nodes = self.cluster.nodes
        while True:
            service = self.cluster.service(nodes[rng.randrange(len(nodes))])
            if service is None:
                await trio.sleep(0.5)
                continue
            try:
                return await op(service)
            except ServiceError as error:
                self.errors[f"{type(error).__name__}/{error.status}"] += 1
                if not error.retryable:
                    self.fatal.append(f"{error!r}")
                    return None
                await trio.sleep(0.3 + 0.5 * rng.random())

    async def create(self, index: int) -> None:
        rng = self.cluster.sim.rng(f"test/create/{index}")
        request = CreateAgent(
            name=f"agent-{index}",
            agent_type=("memgpt_agent", "letta_v1_agent")[index % 2],
            memory_blocks=(BlockCreate("persona", "I am helpful."), BlockCreate("human", "")),
            tags=(f"group-{index % 2}",),
        )
        view = await self.call(rng, lambda s: s.create_agent(request))
        if view is not None:
            self.agents.append(view.agent.id)
            self.cluster.sim.log("test.created", agent=view.agent.id)

    async def client(self, cid: int, sends: int) -> None:
        rng = self.cluster.sim.rng(f"test/client/{cid}")
        for k in range(sends):
            await trio.sleep(2.0 * rng.random())
            agent_id = self.agents[rng.randrange(len(self.agents))]
            otid = f"c{cid}-m{k}"
            echo = rng.random() < 0.75
            text = f"note {otid} for {agent_id}" if echo else f"remember that {otid} matters"
            self.issued[otid] = agent_id
            messages = (InputMessage("user", text, otid=otid),)
            stream = rng.random() < 0.3

            async def send(
                service: AgentService,
                agent_id: str = agent_id,
                messages: tuple[InputMessage, ...] = messages,
                stream: bool = stream,
            ) -> TurnResult:
                if not stream:
                    return await service.send_message(agent_id, messages)
                async with service.stream_message(agent_id, messages) as events:
                    async for _ in events:
                        pass
                assert events.result is not None
                self.streamed += 1
                return events.result

            result = await self.call(rng, send)
            if result is not None:
                self.acks.append(Ack(agent_id, otid, echo, result))
                self.cluster.sim.log("test.acked", otid=otid, run=result.run_id)


async def stored_history(kv: Any, agent_id: str) -> list[AgentMessage]:
    return [unpack(v) for _, v in await kv.scan_prefix(Keys(agent_id).messages)]


def check_messages(
    histories: dict[str, list[AgentMessage]], acks: list[Ack], issued: dict[str, str]
) -> list[str]:
    problems: list[str] = []
    inputs: Counter[str] = Counter()
    for agent_id, history in histories.items():
        run_owner: dict[str, str] = {}  # run id -> otid of its input, in this history
        ids = Counter(m.id for m in history)
        problems += [f"{agent_id}: message {i} stored {n} times" for i, n in ids.items() if n > 1]
        for m in history:
            if isinstance(m, UserMessage) and m.kind == "input" and m.otid is not None:
                inputs[m.otid] += 1
                if issued.get(m.otid) != agent_id:
                    problems.append(
                        f"{agent_id}: holds input {m.otid} sent to {issued.get(m.otid)}"
                    )
                if m.run_id is not None:
                    run_owner[m.run_id] = m.otid
            if isinstance(m, AssistantMessage):
                for token in TOKEN.findall(m.content):
                    if issued.get(token) != agent_id:
                        problems.append(f"{agent_id}: replied about {token} of another agent")
        for m in history:
            otid = run_owner.get(m.run_id or "")
            if m.run_id is not None and (otid is None or issued.get(otid) != agent_id):
                problems.append(f"{agent_id}: message {m.id} of a run that is not its own")
    problems += [f"input {otid} ran {n} times" for otid, n in inputs.items() if n > 1]
    for ack in acks:
        history = histories.get(ack.agent_id, [])
        by_id = {m.id: m for m in history}
        if inputs[ack.otid] != 1:
            problems.append(f"acknowledged {ack.otid} is stored {inputs[ack.otid]} times")
        for m in ack.result.messages:
            stored = by_id.get(m.id)
            if stored is None or stored.run_id != ack.result.run_id:
                problems.append(f"{ack.otid}: response message {m.id} missing from the history")
        if ack.result.stop_reason != "end_turn":
            problems.append(f"{ack.otid}: stop reason {ack.result.stop_reason}")
        if ack.echo and ack.otid not in ack.result.reply:
            problems.append(f"{ack.otid}: reply {ack.result.reply!r} does not echo it")
    return problems


async def service_chaos(
    sim: Simulation,
    *,
    n_agents: int = 3,
    n_clients: int = 4,
    sends: int = 8,
    heal_at: float = 25.0,
    settle: float = 120.0,
) -> dict[str, Any]:
    """Create agents and send messages from random nodes while faults fire; heal at
    ``heal_at``; every client must be done ``settle`` seconds later. Returns what the checks
    need (and the checks' findings)."""
    cluster = start_cluster(sim)
    clients = Clients(cluster)
    await trio.sleep(0.5)
    async with trio.open_nursery() as nursery:
        for i in range(n_agents):
            nursery.start_soon(clients.create, i)
    if not clients.agents:
        raise kelpie_dst.LivenessError("no agent could be created")
    done = trio.Event()

    async def talk() -> None:
        async with trio.open_nursery() as inner:
            for cid in range(n_clients):
                inner.start_soon(clients.client, cid, sends)
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(talk)
        await trio.sleep(max(0.0, heal_at - trio.current_time()))
        sim.heal()
        with trio.move_on_after(settle):
            await done.wait()
        nursery.cancel_scope.cancel()
    if not done.is_set():
        raise kelpie_dst.LivenessError(
            f"{len(clients.acks)} of {n_clients * sends} messages acknowledged {settle}s after "
            "the faults healed"
        )
    main = sim.current_node()
    assert main is not None
    kv = open_kv(main, host=cluster.db)
    histories = {a: await stored_history(kv, a) for a in clients.agents}
    listed: list[str] = []
    service = None
    while service is None:
        service = next(filter(None, map(cluster.service, cluster.nodes)), None)
        await trio.sleep(0.5)
    created: list[float] = []
    page = await service.list_agents(limit=2)
    while page:
        listed += [v.agent.id for v in page]
        created += [v.agent.created_at for v in page]
        page = await service.list_agents(limit=2, after=page[-1].agent.id)
    stored = [unpack(v).id for _, v in await kv.scan_prefix(Keys.AGENTS)]
    report = await service.repair()
    return {
        "clients": clients,
        "histories": histories,
        "listed": listed,
        "listed_created": created,
        "stored": stored,
        "repair": report,
        "problems": check_messages(histories, clients.acks, clients.issued)
        + check_single_activation(cluster.activations.events),
    }


async def determinism_main(sim: Simulation) -> list[tuple[str, str]]:
    """A short chaos run for the same-seed and fresh-process comparisons (faults given by the
    caller); returns (otid, run id) of every acknowledged message."""
    out = await service_chaos(sim, n_agents=2, n_clients=2, sends=3, heal_at=10.0, settle=90.0)
    assert not out["problems"], out["problems"]
    return sorted((ack.otid, ack.result.run_id) for ack in out["clients"].acks)


def sweep(first: int, last: int) -> None:
    """Figures for docs/service.md: ``python -m tests.service.chaos FIRST LAST``."""
    import sys
    import time

    totals: Counter[str] = Counter()
    failed: list[int] = []
    acks = acquired = 0
    virtual = 0.0
    started = time.perf_counter()  # determinism-ok: wall time of the sweep, outside any run
    for seed in range(first, last):
        out: dict[str, Any] = {}

        async def main(sim: Simulation, out: dict[str, Any] = out) -> None:
            out.update(await service_chaos(sim))

        result = kelpie_dst.run(main, seed=seed, faults=chaos_faults(), guards="strict")
        if not result.ok or out["problems"]:
            failed.append(seed)
            continue
        totals.update(result.faults_fired)
        acks += len(out["clients"].acks)
        acquired += sum(e[3] == "actor.acquired" for e in out["clients"].cluster.activations.events)
        virtual += result.virtual_time
    wall = time.perf_counter() - started  # determinism-ok: see above
    runs = last - first
    print(f"seeds {first}..{last - 1}: {runs - len(failed)} passed, failed: {failed}")
    ratio = virtual / wall
    print(f"wall {wall:.1f}s ({wall / runs:.2f}s/seed), virtual {virtual:.0f}s ({ratio:.0f}x)")
    print(f"acknowledged messages {acks}, activations {acquired}")
    print("faults fired: " + ", ".join(f"{k}={v}" for k, v in sorted(totals.items())))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    import sys

    sweep(int(sys.argv[1]), int(sys.argv[2]))
