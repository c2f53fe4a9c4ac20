"""The agent workload's clients: create agents, send their messages (some streamed), retry on
another node with the same ``otid`` until acknowledged, and read back the final state.

Clients run on ``main`` (which no fault crashes). How a request reaches a server node is a
:class:`Link`: :class:`~._agent_direct.DirectLink` calls the node's live
:class:`~kelpie_agent.actors.Dispatcher` (a crashed node answers ``ActorStoppedError``, a paused
one not at all), :class:`~._agent_http.HttpLink` speaks Letta's REST API to the node's HTTP
server through the unmodified ``letta_client`` SDK over the simulated network. Every attempt
has a timeout. A retry carries the same ``otid``, which makes it idempotent (docs/agent.md):
the agent answers a retried send with the run its first attempt started.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import attrs
import trio

from ..scenario import WorkloadContext
from ._agent_checks import Ack, BlockPlan, BlockState, Msg, RequestRecord, StreamRecord
from ._agent_creates import blind_attempt
from ._agent_durable import check_durable
from ._agent_world import World

__all__ = ["AgentPlan", "Clients", "Link", "Planned", "RunRecord", "Sent", "join_pieces"]

PAGE = 500


@attrs.frozen
class Planned:
    index: int
    text: str
    otid: str
    stream: bool
    max_steps: int | None = None  # None: the workload's max_steps


@attrs.frozen
class AgentPlan:
    number: int
    agent_id: str  # the workload's name for the agent; a link maps it to the server's id
    agent_type: str
    tool_ids: tuple[str, ...]
    messages: tuple[Planned, ...]
    blocks: tuple[BlockPlan, ...] = ()
    marker: str = ""  # in the persona block: what this agent's memory says in every prompt
    max_counts: tuple[tuple[str, int], ...] = ()  # max_count_per_step tool rules (_agent_rules)
    tags: tuple[str, ...] = ()  # the agent's tags (list_filters; _agent_filters)
    timezone: str | None = None  # None: the server's default, UTC (timezones)


@attrs.frozen
class Sent:
    """An acknowledged send: the run, its messages, its stop reason and, for a streamed send,
    the streamed pieces joined per ``<message id>/<message type>``."""

    run_id: str
    message_ids: tuple[str, ...]
    stop_reason: str
    pieces: tuple[tuple[str, str], ...] | None = None
    events: int = 0
    unclosed: bool = False  # the stream stayed open after the turn ended
    reply: str | None = None  # the last assistant text the client was shown
    steps: int | None = None  # the step count the run's usage reported


class Link(Protocol):
    """One transport from the clients to the server nodes. Each call is one attempt against
    ``node``; the clients retry what :meth:`retryable` allows."""

    def retryable(self, error: BaseException) -> bool: ...

    def server_id(self, plan: AgentPlan) -> str | None:
        """The server's id of ``plan``'s agent (None until it is created)."""

    async def create(self, node: str, plan: AgentPlan, block_limit: int, retry: bool) -> None: ...

    async def send(
        self, node: str, plan: AgentPlan, message: Planned, otid: str | None, max_steps: int
    ) -> Sent: ...

    async def history(
        self, node: str, plan: AgentPlan, after: str | None, assistant: bool, limit: int
    ) -> list[Msg]:
        """One page (at most ``limit``) of stored messages, oldest first; ``assistant`` renders
        ``send_message`` calls as assistant messages, as streams do."""

    async def blocks(self, node: str, plan: AgentPlan) -> list[BlockState]: ...

    async def passages(
        self, node: str, plan: AgentPlan, after: str | None, limit: int
    ) -> list[Any]:
        """One page of archival passages (objects with ``id`` and ``text``), oldest first."""


class RunRecord:
    """Everything the invariants look at, filled in by the clients and the final read."""

    def __init__(self, plans: Sequence[AgentPlan]) -> None:
        self.plans = list(plans)
        self.requests: dict[str, RequestRecord] = {}
        self.acks: list[Ack] = []
        self.streams: list[StreamRecord] = []
        self.histories: dict[str, list[Msg]] = {}
        self.blocks: list[BlockState] = []
        self.passages: dict[str, list[str]] = {}
        self.unclosed: list[str] = []  # streamed sends whose stream outlived their turn
        self.stop_reasons: dict[str, int] = {}
        self.pieces: dict[str, list[tuple[int, tuple[tuple[str, str], ...]]]] = {}
        self.durable: list[str] = []  # the database, checked at each ack and restart
        self.durable_checks = 0


SMALL_PAGES = 0.25
"""The share of the final read-back's histories paged in small pages (the rest in one page)."""


def _page_size(rng: Any) -> int:
    """The page size of a history in the final read-back: small and random for a sampled
    ``SMALL_PAGES`` of the lists (every cursor is used, so a cursor off by one shows as a
    message or passage read twice or never), the whole list otherwise. Paging every list in
    small pages cost more CPU than all the boundary oracles together (docs/oracles.md)."""
    if rng.random() < SMALL_PAGES:
        return int(rng.choice((4, 16)))
    return PAGE


def join_pieces(pieces: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Streamed ``(key, text)`` pieces joined per key, in order of first appearance."""
    joined: dict[str, str] = {}
    for key, text in pieces:
        joined[key] = joined.get(key, "") + text
    return tuple(joined.items())


LETTA_MAX_STEPS = 50
"""The step budget of a send that gives none (Letta's default; docs/letta-compat.md)."""


class Clients:
    def __init__(self, ctx: WorkloadContext, world: World, record: RunRecord, link: Link) -> None:
        self.ctx = ctx
        self.world = world
        self.record = record
        self.link = link
        self.timeout = float(ctx.params["attempt_timeout"])
        self.hop = float(ctx.params["hop"])
        self.max_steps = int(ctx.params["max_steps"])
        self.block_limit = int(ctx.params["block_limit"])
        self.otids = bool(ctx.params["otids"])  # False: a planted bug (retries not idempotent)
        self.blind: dict[str, int] = {}  # agent name -> create attempts that got no answer
        world.boot_hooks.append(lambda node: self.check_durable(f"{node.name} restarted"))

    def check_durable(self, when: str, only: AgentPlan | None = None) -> None:
        """Check every acknowledged message of ``only`` (default: all agents) in the
        database itself."""
        record = self.record
        store = self.world.store()
        for plan in [only] if only is not None else record.plans:
            server_id = self.link.server_id(plan)
            acks = [a for a in record.acks if a.agent == plan.agent_id]
            if server_id is None or not acks:
                continue
            record.durable_checks += 1
            for problem in check_durable(store, server_id, acks, when):
                if len(record.durable) < 50:
                    record.durable.append(problem)

    async def client(self, number: int, plans: Sequence[AgentPlan]) -> None:
        """Create this client's agents, then send round-robin: message k of every agent
        before message k + 1 of any."""
        rng = self.ctx.rng(f"client/{number}")
        state = {"node": rng.choice(self.world.node_names)}
        live = []
        for plan in plans:
            if await self._create(plan, rng, state):
                live.append(plan)
        rounds = max((len(p.messages) for p in plans), default=0)
        for k in range(rounds):
            for plan in list(live):
                if not await self._send(plan, plan.messages[k], rng, state):
                    live.remove(plan)

    async def _call(
        self,
        key: str,
        agent: str,
        attempt: Callable[[str, int], Awaitable[Any]],
        rng: Any,
        state: dict[str, str],
    ) -> Any:
        """Send a request until it is answered; a non-retryable error is recorded and raised.
        ``attempt(node, number)`` makes attempt ``number`` (1 for the first) on ``node``."""
        record = self.record.requests.setdefault(key, RequestRecord(agent, key))
        nodes = self.world.node_names
        if len(nodes) > 1 and rng.random() < self.hop:
            state["node"] = rng.choice([n for n in nodes if n != state["node"]])
        while True:
            record = attrs.evolve(record, attempts=record.attempts + 1)
            self.record.requests[key] = record
            self.ctx.count("requests.attempts")
            try:
                with trio.fail_after(self.timeout):
                    value = await attempt(state["node"], record.attempts)
            except Exception as error:
                if not (isinstance(error, trio.TooSlowError) or self.link.retryable(error)):
                    self.record.requests[key] = attrs.evolve(
                        record, outcome="failed", error=f"{type(error).__name__}: {error}"
                    )
                    raise
                self.ctx.count("requests.retries")
                if isinstance(error, trio.TooSlowError):
                    self.ctx.count("requests.timeouts")
                if len(nodes) > 1:
                    state["node"] = rng.choice([n for n in nodes if n != state["node"]])
                backoff = min(5.0, 0.25 * 2 ** min(record.attempts, 6))
                await trio.sleep(backoff * (0.5 + rng.random() / 2))
                continue
            self.record.requests[key] = attrs.evolve(
                record, outcome="acked", finished_at=trio.current_time()
            )
            return value

    async def _create(self, plan: AgentPlan, rng: Any, state: dict[str, str]) -> bool:
        async def attempt(node: str, number: int) -> None:
            create = self.link.create(node, plan, self.block_limit, number > 1)
            await blind_attempt(self.blind, f"agent-{plan.number}", create)

        try:
            await self._call(f"a{plan.number} create", plan.agent_id, attempt, rng, state)
        except Exception:
            return False
        self.ctx.count("agents.created")
        return True

    async def _send(
        self, plan: AgentPlan, message: Planned, rng: Any, state: dict[str, str]
    ) -> bool:
        otid = message.otid if self.otids else None
        budget = message.max_steps if message.max_steps is not None else self.max_steps

        async def attempt(node: str, _: int) -> Sent:
            return await self.link.send(node, plan, message, otid, budget)

        key = f"a{plan.number} #{message.index}"
        try:
            sent: Sent = await self._call(key, plan.agent_id, attempt, rng, state)
        except Exception:
            return False
        record = self.record
        record.acks.append(
            Ack(
                plan.agent_id,
                message.index,
                message.otid,
                message.text,
                sent.run_id,
                sent.message_ids,
                sent.stop_reason,
                sent.reply,
                budget or LETTA_MAX_STEPS,  # 0: none sent, so Letta's default applies
                sent.steps,
            )
        )
        self.check_durable(f"t={trio.current_time():.3f} ack of #{message.index}", plan)
        record.stop_reasons[sent.stop_reason] = record.stop_reasons.get(sent.stop_reason, 0) + 1
        if sent.pieces is not None:
            record.pieces.setdefault(plan.agent_id, []).append((message.index, sent.pieces))
            self.ctx.count("stream.events", sent.events)
        if sent.unclosed:
            record.unclosed.append(key)
        return True

    async def read_back(self, plan: AgentPlan, rng: Any) -> None:
        """The agent's whole stored history, its blocks and its passages, through the agent
        itself; each streamed send's pieces are compared with the stored messages, rendered
        as streams render them."""
        state = {"node": rng.choice(self.world.node_names)}
        messages = await self._history(plan, rng, state, assistant=False)
        key = f"a{plan.number} blocks"

        async def blocks(node: str, _: int) -> list[BlockState]:
            return await self.link.blocks(node, plan)

        got_blocks = await self._call(key, plan.agent_id, blocks, rng, state)
        passages: list[Any] = []
        size = int(rng.choice((2, 3, 5)))  # a few passages: always in small pages (cheap)
        while True:
            after = passages[-1].id if passages else None

            async def page(node: str, _: int, after: str | None = after) -> list[Any]:
                return await self.link.passages(node, plan, after, size)

            got = await self._call(f"a{plan.number} passages", plan.agent_id, page, rng, state)
            passages.extend(got)
            if len(got) < size:
                break
        self.record.passages[plan.agent_id] = [p.text for p in passages]
        self.record.histories[plan.agent_id] = messages
        self.record.blocks.extend(got_blocks)
        streamed = self.record.pieces.get(plan.agent_id)
        if streamed:
            rendered = await self._history(plan, rng, state, assistant=True)
            texts = tuple((f"{m.id}/{m.type}", m.text) for m in rendered)
            for index, pieces in streamed:
                self.record.streams.append(StreamRecord(plan.agent_id, index, pieces, texts))

    async def _history(
        self, plan: AgentPlan, rng: Any, state: dict[str, str], *, assistant: bool
    ) -> list[Msg]:
        messages: list[Msg] = []
        key = f"a{plan.number} read" + (" rendered" if assistant else "")
        size = _page_size(rng)
        while True:
            after = messages[-1].id if messages else None

            async def page(node: str, _: int, after: str | None = after) -> list[Msg]:
                return await self.link.history(node, plan, after, assistant, size)

            got = await self._call(key, plan.agent_id, page, rng, state)
            messages.extend(got)
            if len(got) < size:
                return messages
