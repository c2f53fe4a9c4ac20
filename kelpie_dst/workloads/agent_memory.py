"""The agent's memory under faults: archival search, recall search, memory edits racing the
blocks API, and the counts the prompt shows (``agent_memory``).

Server nodes (``topology.nodes``) share the database host, each running the production node
with a model (:class:`ProbePolicy`) that makes exactly the tool call a client's input asks
for (``memprobe {"tool": ..., "args": ...}``) and then says it is done. A client on ``main``
makes ``agents`` agents, each with a read-only ``persona`` block, a small ``notes`` block and a
``board`` block, and the memory tools. Each stores two passages of its own; then one shared
archive (``pool``), holding passages dated up to three days back, is attached to every other
agent (agents 0, 2, ...), so their archival memory is their own passages *and* the pool's.
For ``span`` seconds, per agent, on random live nodes, the client:

* stores passages (tagged with any of three tags, or none) and deletes some;
* searches archival memory through the API and, through the model, with
  ``archival_memory_search`` (tags any or all, ``top_k``, date ranges: epoch seconds through
  the API, whole days ``YYYY-MM-DD`` through the tool);
* asks the model for a ``conversation_search`` with a limit over the page size, for the word
  every probe input carries;
* asks for ``memory_rethink`` of the read-only block, of ``notes`` over its limit, and within;
* asks for ``core_memory_append`` of a line to ``board``, while a second client sets the
  board's value or its description through the blocks API (``/v1/blocks``, outside the
  agent's actor), and both read the board back.

The properties (``memory_consistent``, :mod:`._agent_memory_checks`): every search hit is the
agent's (or its archives'), not deleted, within the filters, and a search answers
``min(top_k, matching)`` hits, the matching set computed from the client's model; the final
list holds every acknowledged passage; refused edits are refused and allowed ones succeed; a
conversation search answers ``min(limit, matching)`` results; no acknowledged edit of a board
is lost (every read is a value some real-time-respecting serial order of the edits gives);
and, checked at every model call against the database (read directly, no request), the prompt's
count of messages in recall memory and of the agent's own archival passages is the stored one.

**Every prompt is a read of the board** (session 15). The blocks API changes the board outside
the agent's actor, so the agent learns of it only by reading its blocks again before a step
(``refresh_blocks``). A step's prompt must show the board as some serial order of the edits
leaves it, with every edit acknowledged before the client sent the input the step answers:
each model call is judged by ``check_board`` as a read that was sent when that input was first
sent (for a later step of the run: when the node called the model for the step before, since
every step reads the blocks again) and ended at the call. A runtime that renders its cached
copy shows the model memory the database no longer holds (and the next edit the model makes
from it is built on that).
"""

from __future__ import annotations

import datetime as _dt
import json
import random
import re
from collections.abc import Sequence
from typing import Any

import attrs
import trio

import kelpie_dst
from kelpie_agent.agent import BlockCreate, CreateAgent, InputMessage, Keys, builtin_id
from kelpie_agent.agent._config import LoopConfig
from kelpie_agent.agent._messages import ToolReturnMessage
from kelpie_agent.llm import LlmRequest, TextBlock, ToolResult
from kelpie_agent.service import AgentService, ServiceError
from kelpie_agent.service import _archives as archives

from ..scenario import WorkloadContext, invariant, workload
from ..shims import HelpfulPolicy, LlmTiming, SimLlmClient, open_kv, sim_ports
from ..shims.llm import Call, Reply
from ..shims.llm._turns import latest_turn
from ._agent_coherence import coherence_options
from ._agent_coherence import memory_matches_storage as memory_matches_storage
from ._agent_memory_checks import (
    BoardOp,
    BoardRead,
    Hit,
    Probe,
    Search,
    Stored,
    check_board,
    check_listed,
    check_probes,
    check_searches,
)
from ._agent_prompt import prompt_blocks
from ._agent_schedules import _FAILURES, OPTIONS, SERVICE, Client

__all__ = ["ProbePolicy", "agent_memory", "memory_consistent"]

KINDS = ("red", "green", "blue")
WORDS = ("kelp", "tide", "otter", "reef", "current")
PROBE = "memprobe"
TOOLS = (
    "archival_memory_insert",
    "archival_memory_search",
    "conversation_search",
    "core_memory_append",
    "memory_rethink",
)
NOTES_LIMIT = 120
DAY = 86_400.0
_PERSONA = re.compile(r"I am memory agent (\d+)\.")
_MESSAGES = re.compile(r"- (\d+) previous messages between you and the user are stored")
_PASSAGES = re.compile(r"- (\d+) total memories you created are stored in archival memory")
_MAX_PROBLEMS = 20


@attrs.define
class MemoryLog:
    stored: list[Stored] = attrs.Factory(list)
    searches: list[Search] = attrs.Factory(list)
    probes: list[Probe] = attrs.Factory(list)
    scope: dict[str, frozenset[str]] = attrs.Factory(dict)  # agent -> itself and its archives
    ids: dict[int, str] = attrs.Factory(dict)  # agent number -> id
    boards: dict[str, tuple[str, str]] = attrs.Factory(dict)  # agent -> (block id, initial)
    board_ops: dict[str, list[BoardOp]] = attrs.Factory(dict)
    board_reads: dict[str, list[BoardRead]] = attrs.Factory(dict)
    inputs: dict[str, list[tuple[float, float | None]]] = attrs.Factory(dict)  # probe sends
    listed: dict[str, list[str]] = attrs.Factory(dict)
    persona: dict[str, tuple[str, str]] = attrs.Factory(dict)  # agent -> (initial, final)
    prompt_problems: list[str] = attrs.Factory(list)
    prompts_checked: int = 0
    first_sent: dict[tuple[str, str], float] = attrs.Factory(dict)  # (agent, input) -> time
    board_prompts: dict[str, list[BoardRead]] = attrs.Factory(dict)  # what the model was shown


class ProbePolicy:
    """The model: a ``memprobe`` input gets the tool call it names; the call's result gets
    "done"; anything else goes to :class:`HelpfulPolicy`. It also checks each prompt's memory
    counts against the database (``check``), when the prompt names a known agent."""

    def __init__(self, log: MemoryLog, store: Any) -> None:
        self.log = log
        self.store = store
        self.fallback = HelpfulPolicy()
        self.calls: dict[tuple[str, str], float] = {}  # (agent, input) -> its last model call

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        self.check(request)
        turn = latest_turn(request)
        if turn.kind == "tool_result":
            return ("probe done",)
        text = turn.text.strip()
        if text.startswith(PROBE + " "):
            try:
                probe = json.loads(text[len(PROBE) + 1 :])
            except ValueError:
                probe = None
            if isinstance(probe, dict) and probe.get("tool") in TOOLS:
                return (Call(probe["tool"], dict(probe.get("args") or {})),)
        return self.fallback.respond(request, rng)

    def check(self, request: LlmRequest) -> None:
        """The prompt's "N previous messages" is the number of messages the database holds
        for the agent, and "N total memories" the number of its own passages."""
        blocks = prompt_blocks(request.system)
        if blocks is None or "persona" not in blocks:
            return
        found = _PERSONA.search(blocks["persona"].value)
        agent_id = self.log.ids.get(int(found.group(1))) if found else None
        if agent_id is None:
            return
        keys = Keys(agent_id)
        try:
            stored = {
                "messages": _count(self.store, keys.messages),
                "passages": _count(self.store, keys.passages),
            }
        except Exception:  # a corrupted frame: nothing to compare with
            return
        self.log.prompts_checked += 1
        self._board_shown(agent_id, blocks, request)
        for what, pattern in (("messages", _MESSAGES), ("passages", _PASSAGES)):
            shown = pattern.search(request.system)
            wrong = shown is not None and int(shown.group(1)) != stored[what]
            if wrong and len(self.log.prompt_problems) < _MAX_PROBLEMS:
                assert shown is not None
                self.log.prompt_problems.append(
                    f"a prompt of {agent_id} says {shown.group(1)} {what} are stored; the "
                    f"database holds {stored[what]}"
                )

    def _board_shown(self, agent_id: str, blocks: Any, request: LlmRequest) -> None:
        """The board a prompt shows, as a read sent when the input it answers was first sent,
        or, for a later step of the run, when this node called the model for its step before
        (the step read the blocks again after that call)."""
        key = (agent_id, _input_text(request))
        sent = self.log.first_sent.get(key)
        if latest_turn(request).kind == "tool_result":
            sent = self.calls.get(key, sent)
        self.calls[key] = _now()
        if sent is not None and "board" in blocks and agent_id in self.log.boards:
            read = BoardRead(blocks["board"].value, sent, _now())
            self.log.board_prompts.setdefault(agent_id, []).append(read)


def _input_text(request: LlmRequest) -> str:
    """The text of the last user message that is not a tool result: the input a step answers."""
    for message in reversed(request.messages):
        if message.role == "user" and not any(isinstance(b, ToolResult) for b in message.content):
            return "".join(b.text for b in message.content if isinstance(b, TextBlock)).strip()
    return ""


def _count(store: Any, prefix: bytes) -> int:
    return len(store._scan(prefix, Keys.prefix_end(prefix), None, False))


def _now() -> float:
    return trio.current_time()


def _day(epoch: float) -> _dt.date:
    return _dt.datetime.fromtimestamp(epoch, _dt.UTC).date()


def _day_bounds(day: _dt.date) -> tuple[float, float]:
    """A whole day in UTC (the agents' time zone): its first and its last instant."""
    start = _dt.datetime.combine(day, _dt.time.min, _dt.UTC).timestamp()
    end = _dt.datetime.combine(day, _dt.time.max, _dt.UTC).timestamp()
    return start, end


def _tags(rng: random.Random) -> tuple[str, ...]:
    return tuple(sorted(rng.sample(KINDS, rng.choice((0, 1, 1, 2)))))


class StickyClient(Client):
    """A client that keeps to one live node (as a real client keeps its connection), moving
    to another now and then (every tenth call or so) or when its node is down."""

    home: AgentService | None = None

    def service(self) -> AgentService | None:
        live = [s for _, s in sorted(self.services.items()) if s.running]
        if not live:
            return None
        if self.home not in live or self.rng.random() < 0.1:
            self.home = self.rng.choice(live)
        return self.home


class Memory:
    """One agent's client."""

    def __init__(
        self, client: Client, log: MemoryLog, number: int, pool: str | None, board: Client
    ) -> None:
        self.client = client
        self.board = board  # the blocks API's client (it does not touch the agent's actor)
        self.log = log
        self.number = number
        self.pool = pool
        self.rng = client.rng
        self.k = 0
        self.agent = ""

    async def make(self) -> None:
        n = self.number
        request = CreateAgent(
            name=f"memory-{n}",
            memory_blocks=(
                BlockCreate("persona", f"I am memory agent {n}.", limit=200, read_only=True),
                BlockCreate("notes", f"Notes of agent {n}.", limit=NOTES_LIMIT),
                BlockCreate("board", f"board-{n}-0", limit=5000),
            ),
            tool_ids=tuple(builtin_id(t) for t in TOOLS),
        )
        view = await self.client.until_done(lambda s: s.create_agent(request))
        self.agent = view.agent.id
        self.log.ids[n] = self.agent
        board = next(b for b in view.blocks if b.label == "board")
        self.log.boards[self.agent] = (board.id, board.value)
        self.log.board_ops[self.agent] = []
        self.log.board_reads[self.agent] = []
        self.log.inputs[self.agent] = []
        self.log.scope[self.agent] = frozenset({self.agent})
        for _ in range(2):
            while not await self.insert():  # no node up, or an unknown outcome: again
                await trio.sleep(self.rng.uniform(0.5, 2.0))

    def _text(self, owner: str) -> str:
        self.k += 1
        words = " ".join(self.rng.choice(WORDS) for _ in range(3))
        return f"note {self.number}.{self.k} of {owner}: {words}"

    async def insert(self) -> bool:
        """Store a passage through the agent (into its pool once one is attached)."""
        owner = self.pool or self.agent
        p = Stored(self._text(owner), frozenset(_tags(self.rng)), owner, _now())
        self.log.stored.append(p)
        try:
            [record] = await self.client.once(
                lambda s: s.insert_passage(self.agent, p.text, tags=sorted(p.tags))
            )
        except _FAILURES:
            return False
        except ServiceError:
            p.failed = True
            return False
        p.acked, p.created_at, p.id = _now(), record.created_at, record.id
        return True

    async def add_to_pool(self) -> None:
        """A passage added to the pool directly, dated up to three days back."""
        assert self.pool is not None
        when = self.client.clock.now() - self.rng.uniform(0, 3 * DAY)
        p = Stored(self._text(self.pool), frozenset(_tags(self.rng)), self.pool, _now())
        self.log.stored.append(p)
        items: list[archives.PassageItem] = [(p.text, tuple(sorted(p.tags)), {}, when)]
        pool = self.pool
        try:
            [record] = await self.client.once(
                lambda s: archives.add_archive_passages(s, pool, items)
            )
        except _FAILURES:
            return
        except ServiceError:
            p.failed = True
            return
        p.acked, p.created_at, p.id = _now(), record.created_at, record.id

    async def delete(self) -> None:
        mine = self.log.scope[self.agent]
        known = [
            p
            for p in self.log.stored
            if p.owner in mine and p.id is not None and p.delete_sent is None
        ]
        own = [p for p in known if p.owner == self.agent]
        if own and self.rng.random() < 0.5:  # the agent's own index is the one it keeps
            known = own
        if not known:
            return
        p = self.rng.choice(known)
        p.delete_sent = _now()
        passage_id = p.id
        assert passage_id is not None
        try:
            if p.owner == self.agent or self.rng.random() < 0.5:
                await self.client.once(lambda s: s.delete_passage(self.agent, passage_id))
            else:
                owner = p.owner
                await self.client.once(
                    lambda s: archives.delete_archive_passage(s, owner, passage_id)
                )
        except (*_FAILURES, ServiceError):
            return
        p.delete_acked = _now()

    def _searched(
        self,
        via: str,
        tags: Sequence[str],
        mode: str,
        top_k: int,
        start: float | None,
        end: float | None,
        sent: float,
        found: tuple[Hit, ...],
    ) -> None:
        """Log one archival search (through the API or the model's tool) and its answer."""
        scope = self.log.scope[self.agent]
        self.log.searches.append(
            Search(
                self.agent, scope, via, tuple(tags), mode, top_k, start, end, sent, _now(), found
            )
        )

    def _filters(self) -> tuple[tuple[str, ...], str, int, _dt.date | None, _dt.date | None]:
        rng = self.rng
        tags = () if rng.random() < 0.4 else tuple(sorted(rng.sample(KINDS, rng.choice((1, 2)))))
        mode = rng.choice(("any", "all"))
        top_k = rng.randint(1, 6)
        first = last = None
        if rng.random() < 0.5:
            today = _day(self.client.clock.now())
            last = today - _dt.timedelta(days=rng.randint(0, 3))
            first = last - _dt.timedelta(days=rng.randint(0, 1))
        return tags, mode, top_k, first, last

    async def search_api(self) -> None:
        tags, mode, top_k, first, last = self._filters()
        start = _day_bounds(first)[0] if first else None
        end = _day_bounds(last)[1] if last else None
        if start is not None and self.rng.random() < 0.5:  # a time of day, not only midnight
            start += self.rng.uniform(0, DAY / 2)
        query = self.rng.choice(WORDS)
        sent = _now()
        try:
            hits = await self.client.once(
                lambda s: s.search_passages(
                    self.agent,
                    query,
                    tags=tags,
                    tag_match_mode=mode,
                    top_k=top_k,
                    start=start,
                    end=end,
                )
            )
        except (*_FAILURES, ServiceError):
            return
        found = tuple(Hit(h.passage.text, frozenset(h.passage.tags)) for h in hits)
        self._searched("api", tags, mode, top_k, start, end, sent, found)

    async def probe(self, tool: str, args: dict[str, Any]) -> tuple[float, str, str] | None:
        """Ask the model for one call of ``tool``: (sent, status, message) of its result, or
        None if the send failed or the call did not run."""
        text = f"{PROBE} " + json.dumps({"tool": tool, "args": args}, sort_keys=True)
        sent = _now()
        entry: tuple[float, float | None] = (sent, None)
        self.log.inputs[self.agent].append(entry)
        self.log.first_sent.setdefault((self.agent, text), sent)
        try:
            result = await self.client.once(
                lambda s: s.send_message(self.agent, (InputMessage("user", text),), max_steps=3)
            )
        except (*_FAILURES, ServiceError):
            return None
        self.log.inputs[self.agent][self.log.inputs[self.agent].index(entry)] = (sent, _now())
        for m in result.messages:
            if isinstance(m, ToolReturnMessage):
                try:
                    packaged = json.loads(m.tool_return)
                    message = str(packaged.get("message"))
                except (ValueError, AttributeError):
                    message = m.tool_return
                return sent, m.status, message
        return None

    async def search_tool(self) -> None:
        tags, mode, top_k, first, last = self._filters()
        args: dict[str, Any] = {"query": self.rng.choice(WORDS), "top_k": top_k}
        if tags:
            args |= {"tags": list(tags), "tag_match_mode": mode}
        if first is not None and last is not None:
            args |= {"start_datetime": first.isoformat(), "end_datetime": last.isoformat()}
        got = await self.probe("archival_memory_search", args)
        if got is None:
            return
        sent, status, message = got
        try:
            rows = json.loads(message) if status == "success" else None
        except ValueError:
            rows = None
        if not isinstance(rows, list):
            self.log.probes.append(
                Probe(self.agent, "archival_memory_search", args, status, message, "ok", sent)
            )
            return
        found = tuple(Hit(str(r.get("content")), frozenset(r.get("tags") or ())) for r in rows)
        start = _day_bounds(first)[0] if first else None
        end = _day_bounds(last)[1] if last else None
        self._searched("tool", tags if tags else (), mode, top_k, start, end, sent, found)

    async def recall_tool(self) -> None:
        """A conversation search for the word every probe input carries: every probe input
        acknowledged before this one is a match."""
        before = sum(1 for _, acked in self.log.inputs[self.agent] if acked is not None)
        limit = self.rng.randint(6, 10)
        args = {"query": PROBE, "limit": limit}
        got = await self.probe("conversation_search", args)
        if got is not None:
            sent, status, message = got
            probe = Probe(
                self.agent, "conversation_search", args, status, message, f"count>={before}", sent
            )
            self.log.probes.append(probe)

    async def rethink(self) -> None:
        roll = self.rng.random()
        if roll < 0.3:
            label, value, expect = "persona", f"I am someone else {self.k}.", "error"
        elif roll < 0.6:
            label, value, expect = "notes", "x" * (NOTES_LIMIT + self.rng.randint(1, 20)), "error"
        else:
            label, value, expect = "notes", f"Rethought {self.k}.", "ok"
        self.k += 1
        args = {"label": label, "new_memory": value}
        got = await self.probe("memory_rethink", args)
        if got is not None:
            sent, status, message = got
            self.log.probes.append(
                Probe(self.agent, "memory_rethink", args, status, message, expect, sent)
            )

    async def append(self) -> None:
        self.k += 1
        line = f"tool-{self.number}-{self.k}"
        op = BoardOp("append", line, _now(), None)
        ops = self.log.board_ops[self.agent]
        ops.append(op)
        got = await self.probe("core_memory_append", {"label": "board", "content": line})
        if got is not None and got[1] == "success":
            ops[ops.index(op)] = attrs.evolve(op, acked=_now())
            await self.read_board()

    async def read_board(self, client: Client | None = None) -> None:
        block_id = self.log.boards[self.agent][0]
        sent = _now()
        try:
            block = await (client or self.client).once(lambda s: s.get_block(block_id))
        except (*_FAILURES, ServiceError):
            return
        self.log.board_reads[self.agent].append(BoardRead(block.value, sent, _now()))

    async def board_writer(self, span: float) -> None:
        """The blocks API, outside the agent's actor: set the board or describe it."""
        block_id = self.log.boards[self.agent][0]
        ops = self.log.board_ops[self.agent]
        deadline = trio.current_time() + span
        j = 0
        while trio.current_time() < deadline:
            j += 1
            if self.rng.random() < 0.4:
                op = BoardOp("set", f"api-{self.number}-{j}", _now(), None)
                changes: dict[str, Any] = {"value": op.value}
            else:
                op = BoardOp("describe", f"described {j}", _now(), None)
                changes = {"description": op.value}
            ops.append(op)
            try:
                await self.board.once(lambda s, c=changes: s.update_block(block_id, **c))  # type: ignore[misc]
            except (*_FAILURES, ServiceError):
                pass
            else:
                ops[ops.index(op)] = attrs.evolve(op, acked=_now())
                await self.read_board(self.board)
            await trio.sleep(self.rng.uniform(0.1, 1.0))

    async def run(self, span: float) -> None:
        deadline = trio.current_time() + span
        rng = self.rng
        while trio.current_time() < deadline:
            roll = rng.random()
            if roll < 0.15:
                await self.insert()
            elif roll < 0.25 and self.pool is not None:
                await self.add_to_pool()
            elif roll < 0.35:
                await self.delete()
            elif roll < 0.5:
                await self.search_api()
            elif roll < 0.65:
                await self.search_tool()
            elif roll < 0.7:
                await self.recall_tool()
            elif roll < 0.75:
                await self.rethink()
            else:
                await self.append()
            await trio.sleep(rng.uniform(0.2, 1.5))

    async def read_back(self) -> None:
        passages = await self.client.until_done(lambda s: s.list_passages(self.agent, limit=1000))
        self.log.listed[self.agent] = [p.text for p in passages]
        await self.read_board_until_done()
        persona = await self.client.until_done(lambda s: s.get_agent_block(self.agent, "persona"))
        self.log.persona[self.agent] = (f"I am memory agent {self.number}.", persona.value)

    async def read_board_until_done(self) -> None:
        block_id = self.log.boards[self.agent][0]
        sent = _now()
        block = await self.client.until_done(lambda s: s.get_block(block_id))
        self.log.board_reads[self.agent].append(BoardRead(block.value, sent, _now()))


def _start_servers(ctx: WorkloadContext, log: MemoryLog) -> dict[str, AgentService]:
    topology = ctx.topology
    db = ctx.sim.add_node(topology.database or "db")
    services: dict[str, AgentService] = {}
    loop = LoopConfig(history_window=int(ctx.params["history_window"]))

    async def server(node: kelpie_dst.Node) -> None:
        policy = ProbePolicy(log, open_kv(db).store)
        async with kelpie_dst_open_node(node, db, policy, loop, ctx) as service:
            services[node.name] = service
            await trio.sleep_forever()

    for name in topology.nodes or ("server-1", "server-2", "server-3"):
        ctx.sim.add_node(name, server)
    return services


def kelpie_dst_open_node(
    node: kelpie_dst.Node, db: kelpie_dst.Node, policy: Any, loop: Any, ctx: WorkloadContext
) -> Any:
    from kelpie_agent.service import open_agent_node

    return open_agent_node(
        open_kv(node, host=db),
        sim_ports(node),
        node_id=node.name,
        llm=SimLlmClient(policy, timing=LlmTiming(ttft_min=0.05, ttft_max=0.3)),
        loop_config=loop,
        dispatcher_options=OPTIONS,
        options=SERVICE,
        observer=kelpie_dst.log,
        **coherence_options(ctx, db),
    )


@workload(
    params={"agents": 3, "span": 60.0, "history_window": 24},
    sizes=("agents",),
    bounds={"agents": (1, 20), "span": (1, 3600), "history_window": (8, 1000)},
)
async def agent_memory(ctx: WorkloadContext) -> None:
    """Archival and recall memory, memory edits racing the blocks API; see the module
    docstring."""
    log = MemoryLog()
    ctx.state["log"] = log
    services = _start_servers(ctx, log)
    client = StickyClient(ctx, services, "memory")
    agents = [
        Memory(
            StickyClient(ctx, services, f"memory-{n}"),
            log,
            n,
            None,
            StickyClient(ctx, services, f"memory-board-{n}"),
        )
        for n in range(int(ctx.params["agents"]))
    ]
    for memory in agents:
        await memory.make()
    pool = await client.until_done(lambda s: archives.create_archive(s, "pool"))
    for memory in agents[::2]:
        await client.until_done(
            lambda s, a=memory.agent: archives.attach_archive(s, a, pool.id)  # type: ignore[misc]
        )
        memory.pool = pool.id
        log.scope[memory.agent] = frozenset({memory.agent, pool.id})
    if agents[::2]:
        for _ in range(4):
            await agents[0].add_to_pool()
    span = float(ctx.params["span"])
    async with trio.open_nursery() as nursery:
        for memory in agents:
            nursery.start_soon(memory.run, span)
            nursery.start_soon(memory.board_writer, span)
    for memory in agents:
        await memory.read_back()
    ctx.metric("memory.searches", len(log.searches))
    ctx.metric("memory.probes", len(log.probes))
    ctx.metric("memory.passages", sum(p.acked is not None for p in log.stored))
    ctx.metric("memory.board_reads", sum(len(r) for r in log.board_reads.values()))
    ctx.metric("memory.prompts_checked", log.prompts_checked)
    ctx.metric("memory.board_prompts", sum(len(r) for r in log.board_prompts.values()))
    sends = [e for v in log.inputs.values() for e in v]
    ctx.metric("memory.sends", len(sends))
    ctx.metric("memory.sends_acked", sum(1 for _, a in sends if a is not None))
    ctx.metric("memory.sends_time", round(sum(a - s for s, a in sends if a is not None), 1))


def check_memory(log: MemoryLog) -> list[str]:
    problems = check_searches(log.searches, log.stored)
    problems += check_probes(log.probes)
    for agent, listed in log.listed.items():
        problems += check_listed(agent, log.scope[agent], listed, log.stored)
    for agent, (block_id, initial) in log.boards.items():
        problems += check_board(
            f"board {block_id} of {agent}", initial, log.board_ops[agent], log.board_reads[agent]
        )
    for agent, reads in log.board_prompts.items():
        block_id, initial = log.boards[agent]
        problems += check_board(
            f"the prompt's board {block_id} of {agent}", initial, log.board_ops[agent], reads
        )
    for agent, (initial, final) in log.persona.items():
        if initial != final:
            problems.append(f"{agent}: the read-only persona became {final!r}")
    return problems + log.prompt_problems


@invariant
def memory_consistent(ctx: WorkloadContext) -> None:
    """Archival and recall search, memory edits and the prompt's counts are what the client's
    model says; see :func:`check_memory`."""
    log: MemoryLog = ctx.state["log"]
    problems = check_memory(log)
    shown = "; ".join(problems[:4]) + (f"; ... ({len(problems)} in all)" if problems[4:] else "")
    assert not problems, shown
