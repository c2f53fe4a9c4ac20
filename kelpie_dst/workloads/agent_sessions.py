"""Sessions handed from one agent to another (``agent_sessions``, reqK, session 15).

Server nodes (``topology.nodes``) share one database host and a model that answers every
step in plain text. For each of ``pairs`` pairs, a source agent and a target agent are made,
the source is sent ``messages`` messages (each a finished run; for the last ``interrupted``
pairs, the last run is cut by a crash of every server node in the middle of its model call,
and the nodes restart without resuming it: ``LoopConfig.resume_on_activate`` is off), and its
session is handed to the target through the agents' actors (``ExportSession`` on the
source, ``ImportSession`` on the target, each request on a random live node), then imported
a second time. No server route
calls these requests; an embedding application does.

Properties (``sessions_contract``, :func:`check_sessions`, pure):

- **The target holds a copy of the session's messages**, in order, of the same types and
  text, under ids of its own: no message id of the target is one of the source's. An
  unfinished session's copy is followed by the rest of its run (at least the model's answer).
- **An import is done once**: the second import answers the same run and adds no message.
- **Both ends record the move**: the source's session names the target (``transferred_to``),
  the target's names the source (``transferred_from``) and is the session that was exported
  (same run id), finished with the stop reason the export carried; an unfinished session
  goes on at the target and ends as the model ends it (``end_turn``), not ``cancelled``.

With ``run_records`` (off by default; on in ``agent_sessions_records``), once both ends are
idle the client also reads the runs a user can look up (``list_runs`` of each agent, and the
exported run by id):

- **A run's record belongs to the agent that ran it**: every run listed under an agent is
  recorded as that agent's, and the exported run's record names the source, however often
  the session moved or was imported.
- **A run's record is settled once its session is**: the exported run's record exists and
  is not ``running`` after the source handed it over (the source closes what it exports).
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

import kelpie_dst
from kelpie_agent.agent import (
    AgentMessage,
    CreateAgent,
    ExportSession,
    GetSession,
    ImportSession,
    InputMessage,
    UserMessage,
)
from kelpie_agent.agent._config import LoopConfig
from kelpie_agent.llm import LlmRequest
from kelpie_agent.service import AgentService, NotFoundError

from ..scenario import WorkloadContext, invariant, workload
from ..shims import LlmTiming, SimLlmClient, open_kv, sim_ports
from ._agent_coherence import coherence_options
from ._agent_coherence import memory_matches_storage as memory_matches_storage
from ._agent_direct import message_text
from ._agent_schedules import OPTIONS, SERVICE, Client

__all__ = ["SessionLog", "agent_sessions", "check_sessions", "sessions_contract"]

Shape = list[tuple[str, str]]  # (message type, text) in history order
SLOW = 2.0  # seconds the model takes to answer (a crash lands in the middle of a call)


class Plain:
    """The model: a short plain answer naming the step's last user text."""

    def respond(self, request: LlmRequest, rng: Any) -> tuple[str, ...]:
        return (f"noted: {request.messages[-1].text[:40]}",)


@attrs.define
class Pair:
    source: str
    target: str
    exported: Shape = attrs.Factory(list)  # the snapshot's messages
    exported_run: str = ""
    exported_stop: str | None = None
    exported_running: bool = False
    interrupted: bool = False  # its last run was cut: its input is the source's last message
    source_ids: set[str] = attrs.Factory(set)
    target_before: list[str] = attrs.Factory(list)  # the target's message ids before
    target_after: list[tuple[str, str, str]] = attrs.Factory(list)  # (id, type, text)
    target_again: list[str] = attrs.Factory(list)  # ids after the second import
    answers: list[tuple[str, str]] = attrs.Factory(list)  # (run id, stop reason) per import
    source_to: str | None = None
    target_from: str | None = None
    target_run: str | None = None
    # with ``run_records``: (agent listed under, run id, the record's agent, its status), and
    # the exported run's record as (agent id, status), None if it has none
    runs: list[tuple[str, str, str, str]] | None = None
    exported_record: tuple[str, str] | None = None


@attrs.define
class SessionLog:
    pairs: list[Pair] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)


def _shape(messages: list[AgentMessage]) -> list[tuple[str, str, str]]:
    return [(m.id, type(m).__name__, message_text(m)) for m in messages]


async def _history(client: Client, agent_id: str) -> list[AgentMessage]:
    return await client.until_done(lambda s: s.list_messages(agent_id, limit=1000, order="asc"))


async def _interrupt(client: Client, nodes: list[Any], source: str, text: str) -> None:
    """Send ``text`` and crash every server node while its run waits for the model."""
    ctx = client.ctx

    async def send() -> None:
        try:
            await client.once(lambda s: s.send_message(source, [InputMessage("user", text)]))
        except Exception:  # the crash cuts it: the run stays interrupted
            pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send)
        await trio.sleep(SLOW / 2)
        for node in nodes:
            ctx.sim.crash(node)
    for node in nodes:
        ctx.sim.restart(node, after=1.0)
    await trio.sleep(2.0)


async def _run_records(client: Client, pair: Pair) -> None:
    """What a user reads of the pair's runs once both ends are idle (``run_records``)."""
    pair.runs = []
    for agent in (pair.source, pair.target):
        runs = await client.until_done(
            lambda s, a=agent: s.list_runs(agent_ids=[a], limit=100)  # type: ignore[misc]
        )
        pair.runs += [(agent, r.id, r.agent_id, r.status) for r in runs]
    try:
        record = await client.until_done(lambda s: s.get_run(pair.exported_run))
    except NotFoundError:
        return
    pair.exported_record = (record.agent_id, record.status)


async def _pair(
    client: Client, log: SessionLog, number: int, messages: int, nodes: list[Any] | None
) -> None:
    def create(name: str) -> Any:
        request = CreateAgent(name=name)
        return lambda s: s.create_agent(request, include_base_tools=False)

    source = (await client.until_done(create(f"session-src-{number}"))).agent.id
    target = (await client.until_done(create(f"session-dst-{number}"))).agent.id
    pair = Pair(source, target)
    log.pairs.append(pair)
    for k in range(messages):
        text = f"pair {number} message {k}"
        if nodes is not None and k == messages - 1:
            await _interrupt(client, nodes, source, text)
            continue
        await client.until_done(
            lambda s, t=text: s.send_message(source, [InputMessage("user", t)])  # type: ignore[misc]
        )
    before = await _history(client, source)
    pair.source_ids = {m.id for m in before}
    # cut for sure: its input is stored and nothing after it (the crash may have come early)
    last = before[-1] if before else None
    pair.interrupted = (
        nodes is not None
        and isinstance(last, UserMessage)
        and last.content == f"pair {number} message {messages - 1}"
    )
    pair.target_before = [m.id for m in await _history(client, target)]
    snapshot = await client.once(lambda s: s._request(source, ExportSession(target)))
    pair.exported = [(type(m).__name__, message_text(m)) for m in snapshot.messages]
    pair.exported_run = snapshot.checkpoint.session_id
    pair.exported_stop = snapshot.checkpoint.stop_reason
    pair.exported_running = snapshot.checkpoint.running  # a metric: the model is the workload's
    for _ in range(2):
        result = await client.once(lambda s: s._request(target, ImportSession(snapshot)))
        pair.answers.append((result.run_id, result.stop_reason))
        if not pair.target_after:
            pair.target_after = _shape(await _history(client, target))
        else:
            pair.target_again = [m.id for m in await _history(client, target)]
    source_cp = await client.once(lambda s: s._request(source, GetSession()))
    target_cp = await client.once(lambda s: s._request(target, GetSession()))
    pair.source_to = source_cp.transferred_to if source_cp is not None else None
    pair.target_from = target_cp.transferred_from if target_cp is not None else None
    pair.target_run = target_cp.session_id if target_cp is not None else None


def _check_runs(p: Pair, where: str) -> list[str]:
    """The ``run_records`` properties of the module docstring, for one pair."""
    out = []
    for listed, run, owner, _ in p.runs or ():
        if owner != listed:
            out.append(f"{where}: run {run}, listed under {listed}, is recorded as {owner}'s")
    if p.exported_record is None:
        out.append(f"{where}: the exported run {p.exported_run} has no record")
    elif p.exported_record[0] != p.source:
        out.append(
            f"{where}: the exported run {p.exported_run} is recorded as "
            f"{p.exported_record[0]}'s, not its source's"
        )
    elif p.exported_record[1] == "running":
        out.append(f"{where}: the exported run {p.exported_run} is recorded as still running")
    return out


def check_sessions(log: SessionLog) -> list[str]:
    """The properties of the module docstring, against ``log``."""
    out = list(log.problems)
    for p in log.pairs:
        where = f"session of {p.source} handed to {p.target}"
        if not p.target_after:
            continue
        new = [m for m in p.target_after if m[0] not in p.target_before]
        shared = sorted({m[0] for m in p.target_after} & p.source_ids)
        if shared:
            out.append(f"{where}: the target has the source's message ids {shared[:5]}")
        gained = [(t, text) for _, t, text in new]
        # an unfinished session goes on at the target: its copy, then the rest of the run
        copied = gained[: len(p.exported)] if p.interrupted else gained
        if copied != p.exported or (p.interrupted and len(gained) == len(p.exported)):
            out.append(f"{where}: the target gained {new}, the session held {p.exported}")
        if p.target_again and p.target_again != [m[0] for m in p.target_after]:
            out.append(f"{where}: a second import changed the target's history")
        want = (p.exported_run, "end_turn" if p.interrupted else p.exported_stop)
        if any(a != want for a in p.answers):
            out.append(f"{where}: imports answered {p.answers}, want {want}")
        if p.source_to != p.target:
            out.append(f"{where}: the source's session names {p.source_to!r} as its target")
        if (p.target_from, p.target_run) != (p.source, p.exported_run):
            out.append(
                f"{where}: the target's session is {p.target_run} from {p.target_from!r}, "
                f"want {p.exported_run} from {p.source}"
            )
        if p.runs is not None:
            out += _check_runs(p, where)
    return out


@workload(
    params={"pairs": 2, "messages": 2, "interrupted": 0, "run_records": False},
    bounds={"pairs": (1, 20), "messages": (1, 20), "interrupted": (0, 20)},
)
async def agent_sessions(ctx: WorkloadContext) -> None:
    """Sessions handed between agents; see the module docstring."""
    log = SessionLog()
    ctx.state["sessions"] = log
    db = ctx.sim.add_node(ctx.topology.database or "db")
    services: dict[str, AgentService] = {}

    async def server(node: kelpie_dst.Node) -> None:
        from kelpie_agent.service import open_agent_node

        async with open_agent_node(
            open_kv(node, host=db),
            sim_ports(node),
            node_id=node.name,
            llm=SimLlmClient(Plain(), timing=LlmTiming(ttft_min=SLOW, ttft_max=SLOW)),
            loop_config=LoopConfig(resume_on_activate=False),
            dispatcher_options=OPTIONS,
            options=SERVICE,
            observer=kelpie_dst.log,
            **coherence_options(ctx, db),
        ) as service:
            services[node.name] = service
            await trio.sleep_forever()

    nodes = [ctx.sim.add_node(n, server) for n in ctx.topology.nodes or ("server-1", "server-2")]
    client = Client(ctx, services, "sessions")
    pairs, cut = int(ctx.params["pairs"]), int(ctx.params["interrupted"])
    for number in range(pairs):
        try:
            crash = nodes if number >= pairs - cut else None
            await _pair(client, log, number, int(ctx.params["messages"]), crash)
        except Exception as error:  # a request refused for good: named, the next pair goes on
            log.problems.append(f"pair {number}: {type(error).__name__}: {error}")
    if ctx.params["run_records"]:  # read after every pair, so the pairs run as without them
        for pair in log.pairs:
            await _run_records(client, pair)
    ctx.metric("sessions.pairs", len(log.pairs))
    ctx.metric("sessions.moved", sum(len(p.exported) for p in log.pairs))
    ctx.metric("sessions.running", sum(p.exported_running for p in log.pairs))
    ctx.metric("sessions.interrupted", sum(p.interrupted for p in log.pairs))


@invariant
def sessions_contract(ctx: WorkloadContext) -> None:
    """A session handed to another agent is copied there once, under ids of its own, and both
    ends record the move (:func:`check_sessions`)."""
    log = ctx.state.get("sessions")
    if isinstance(log, SessionLog):
        problems = check_sessions(log)
        assert not problems, "sessions broke their contract: " + "; ".join(problems[:5])
