"""Scheduled messages across crashes, handoffs and storage faults (issue #18).

Server nodes (``topology.nodes``) share the database host ``topology.database``; each runs
the production node (``open_agent_node``), scheduler included. A client on ``main`` creates
agents, then for ``span`` seconds creates one-time schedules (3 to 60 s ahead) and recurring
ones (``* * * * *``, ``*/2 * * * *``) on random live nodes, and deletes some recurring ones;
at the end it deletes every schedule left, waits ``grace`` seconds and reads every agent's
history and pending schedules back. Each create carries a unique text, so a schedule whose
create's outcome was unknown is still recognised by its messages.

The oracle (:func:`check`), on the inputs whose otid is ``sched-<id>-<due µs>``:

- **exactly once**: no occurrence's otid appears twice in an agent's history;
- **not early**: an occurrence's input is stamped no earlier than its due time (minus the
  clocks' ``tolerance``);
- **in order, its own**: a schedule's occurrences appear in due order, carry the text it was
  created with, on the agent it was created for; a one-time schedule fires at its time only;
- **none lost**: every occurrence of an acknowledged schedule due before ``grace`` seconds
  before its delete began (or before the final read) is in the history; for a recurring
  schedule, the occurrences are the cron's from its first due time;
- **none after deletion**: no occurrence due after the delete was acknowledged (plus the
  tolerance) fired;
- **nothing stuck**: no schedule the final read finds pending was due more than ``grace``
  seconds before it.

With ``outage``, every server node goes down at once, once, for 5 to 30 s (a power cut): what
came due meanwhile must be sent once they are back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
import trio

import kelpie_dst
from kelpie_agent.actors import DispatcherOptions
from kelpie_agent.agent import CreateAgent, InputMessage, UserMessage
from kelpie_agent.service import (
    AgentService,
    ServiceError,
    ServiceOptions,
    UnavailableError,
    open_agent_node,
)
from kelpie_agent.service import _schedules as schedules
from kelpie_agent.storage import StorageError

from .._errors import NodeDownError
from ..scenario import WorkloadContext, invariant, workload
from ..shims import HelpfulPolicy, LlmTiming, SimLlmClient, open_kv, sim_ports
from ._agent_coherence import coherence_options
from ._cron_model import cron_model

__all__ = [
    "Created",
    "Fired",
    "Log",
    "agent_schedules",
    "check",
    "check_punctual",
    "scheduled_exactly_once",
]

T = TypeVar("T")
OPTIONS = DispatcherOptions(
    idle_timeout=4.0,  # agents move between nodes often (a handoff per request, nearly)
    lease_duration=6.0,
    renew_every=1.5,
    lease_margin=2.5,
    acquire_timeout=30.0,
    poll_interval=0.5,
    shutdown_timeout=2.0,
)
SERVICE = ServiceOptions(request_timeout=20.0, schedule_rescan=15.0)
CRONS = ("* * * * *", "*/2 * * * *")
# With ``calendar`` (off by default): expressions that restrict the day of the month *and* the
# weekday (a day matching either fires), name weekdays and months, and step through ranges,
# chosen to fire in the first minutes of the simulation's epoch (Thursday 1 January 2026).
CALENDAR_CRONS = ("* * 1 * 5", "* * 2 * 4", "*/2 * * * thu", "1-59/2 0 1 jan *")
# With ``edges`` (off by default, rtV): expressions whose ranges *end* (or start and end) at a
# value the epoch's first minutes take, stepped or not, by number or name: a range that loses
# an end, or a one-value range refused, shows within the span (a refused create is judged).
EDGE_CRONS: tuple[str, ...] = ("0-1 * * * *", "1-3 * * * *", "0-2/2 * * * *", "2-2 * * * *")
EDGE_CRONS += ("* * * * mon-thu", "* * * * 1-4", "* 0-0 * * *")
# what a node that is down, cut off or failing answers (retried; other errors are answers)
_FAILURES = (UnavailableError, StorageError, NodeDownError, ConnectionError, trio.TooSlowError)


@attrs.define
class Created:
    """A create the client made: ``text`` is unique; ``id`` and ``first`` (the first due
    time, epoch seconds) are known once it was acknowledged."""

    agent_id: str
    text: str
    cron: str | None  # None: one-time, due at ``at``
    at: float | None
    id: str | None = None
    first: float | None = None
    delete_started: float | None = None
    delete_acked: float | None = None
    sent: float | None = None  # the client's clock when it sent the create
    acked: float | None = None  # ... and when the create was acknowledged


@attrs.frozen
class Fired:
    """An input the final read found: which schedule's occurrence, and when it was stored."""

    agent_id: str
    schedule_id: str
    due: float
    date: float
    text: str
    otid: str
    after: float = 0.0  # the date of the message stored before it (its agent's last run)


@attrs.define
class Log:
    created: list[Created] = attrs.Factory(list)
    fired: list[Fired] = attrs.Factory(list)  # in history order, per agent
    pending: list[tuple[str, str, float]] = attrs.Factory(list)  # (agent, id, next due)
    end: float = 0.0  # when the final read began (the client's clock)
    duplicates: list[str] = attrs.Factory(list)  # otids stored twice
    # (agent, schedule, next due, the client's clock when the read began): the pending
    # recurring schedules read before the final deletes (a pure record: no request added)
    listed: list[tuple[str, str, float, float]] = attrs.Factory(list)
    unknown: int = 0  # creates whose outcome was unknown
    refused: list[str] = attrs.Factory(list)  # (edges) valid creates the server refused


def parse_otid(otid: str) -> tuple[str, float] | None:
    """``(schedule id, due epoch seconds)`` of a scheduled input's otid."""
    if not otid.startswith("sched-"):
        return None
    schedule_id, _, due = otid[len("sched-") :].rpartition("-")
    try:
        return schedule_id, int(due, 16) / 1_000_000
    except ValueError:
        return None


def expected(created: Created, until: float) -> list[float]:
    """The occurrences of an acknowledged schedule due at or before ``until``."""
    if created.first is None or created.first > until:
        return []
    if created.cron is None:
        return [created.first]
    # the oracle's own model of the expression, never the server's cron code (DredC-1)
    cron, out, due = cron_model(created.cron), [], created.first
    while due <= until:
        out.append(due)
        due = cron.next_after(due)
    return out


def _us(epoch: float) -> int:
    return round(epoch * 1_000_000)  # as the otid and the due index have it


def _check_first(created: Created, tolerance: float) -> list[str]:
    """A recurring schedule's first due time is a minute its cron names, and the first such
    minute after it was created (between the create's sending and its acknowledgement, give
    or take the clocks' ``tolerance``)."""
    first = created.first
    if created.cron is None or first is None:
        return []
    model = cron_model(created.cron)
    if not model.fires_at(first):
        return [
            f"schedule {created.id} ({created.cron}) first due at {first}, "
            "a minute its cron does not name"
        ]
    if created.sent is None or created.acked is None:
        return []
    earliest = model.next_after(created.sent - tolerance)
    latest = model.next_after(created.acked + tolerance)
    if earliest <= first <= latest:
        return []
    return [
        f"schedule {created.id} ({created.cron}) created between {created.sent:.3f} and "
        f"{created.acked:.3f} is first due at {first}, not its cron's next minute "
        f"({earliest} to {latest})"
    ]


def check(log: Log, grace: float, tolerance: float) -> list[str]:
    """The oracle's findings (empty: all is well); see the module docstring."""
    problems = [f"occurrence {otid} stored twice" for otid in log.duplicates]
    problems += [f"a valid schedule was refused: {why}" for why in log.refused]
    by_text = {c.text: c for c in log.created}
    by_id = {c.id: c for c in log.created if c.id is not None}
    seen: dict[str, list[Fired]] = {}
    for f in log.fired:
        seen.setdefault(f.schedule_id, []).append(f)
        if f.date < f.due - tolerance:
            problems.append(f"{f.otid} fired early: stored at {f.date:.3f}, due {f.due:.3f}")
        owner = by_text.get(f.text)
        if owner is None or owner.agent_id != f.agent_id:
            problems.append(f"{f.otid}: text {f.text!r} was not scheduled for {f.agent_id}")
        elif owner.id is not None and owner.id != f.schedule_id:
            problems.append(f"{f.otid}: text {f.text!r} belongs to schedule {owner.id}")
    for schedule_id, occurrences in seen.items():
        dues = [f.due for f in occurrences]
        if dues != sorted(dues):
            problems.append(f"schedule {schedule_id} fired out of order: {dues}")
        created = by_id.get(schedule_id)
        if created is None:
            continue
        if created.cron is None and [_us(d) for d in dues] != [_us(created.first or 0)]:
            problems.append(f"one-time schedule {schedule_id} fired at {dues}, due {created.first}")
        if created.cron is not None:
            model = cron_model(created.cron)
            wrong = [d for d in dues if not model.fires_at(d)]
            if wrong:
                problems.append(f"schedule {schedule_id} ({created.cron}) fired for {wrong}")
        if created.delete_acked is not None:
            late = [d for d in dues if d > created.delete_acked + tolerance]
            if late:
                problems.append(f"schedule {schedule_id} fired after its delete: due {late}")
    for created in log.created:
        if created.id is None:
            continue
        problems += _check_first(created, tolerance)
        stop = created.delete_started if created.delete_started is not None else log.end
        got = {_us(f.due) for f in seen.get(created.id, [])}
        missing = [d for d in expected(created, stop - grace) if _us(d) not in got]
        if missing:
            problems.append(f"schedule {created.id} ({created.text}) never sent due {missing}")
    for agent_id, schedule_id, due in log.pending:
        if due < log.end - grace:
            problems.append(f"schedule {schedule_id} of {agent_id} still pending, due {due:.3f}")
    problems += _check_moved_on(log, seen, tolerance)
    return problems


def check_punctual(log: Log, within: float) -> list[str]:
    """(``punctual``, for a world without crashes or storage failures.) Every occurrence is
    stored within ``within`` seconds after it was due, or after its agent's previous run ended
    (the message stored before it: an agent runs one input at a time). A node's scheduler
    sleeps until the earliest due occurrence, not until its next rescan
    (``ServiceOptions.schedule_rescan``, a backstop for schedules other nodes create), so a
    late fire is a scheduler that lost track of what is due."""
    if not within:
        return []
    return [
        f"{f.otid} fired late: stored at {f.date:.3f}, due {f.due:.3f}, its agent free from "
        f"{f.after:.3f} ({f.date - max(f.due, f.after):.1f} s)"
        for f in log.fired
        if f.date > max(f.due, f.after) + within
    ]


def _check_moved_on(log: Log, seen: dict[str, list[Fired]], tolerance: float) -> list[str]:
    """A schedule moves past what it sent: a recurring schedule listed (read from the time
    ``read``) as next due at ``due`` has sent no occurrence due at or after ``due`` that was
    stored before ``read`` (give or take the clocks' ``tolerance``). An occurrence's input and
    the schedule's advance commit together, so once the input is stored the schedule's next
    time is past it."""
    problems = []
    for agent_id, schedule_id, due, read in log.listed:
        behind = [
            f.due
            for f in seen.get(schedule_id, [])
            if f.agent_id == agent_id and f.date < read - tolerance and _us(f.due) >= _us(due)
        ]
        if behind:
            problems.append(
                f"schedule {schedule_id} listed as next due at {due} (read at {read:.3f}) after "
                f"its occurrence(s) {behind} were sent"
            )
    return problems


class Client:
    """The workload's client: calls the live nodes' services, retrying what is safe."""

    def __init__(
        self, ctx: WorkloadContext, services: dict[str, AgentService], rng: str = "schedules"
    ) -> None:
        self.ctx = ctx
        self.services = services
        self.rng = ctx.rng(rng)
        main = ctx.sim.current_node()
        assert main is not None
        self.clock = sim_ports(main).clock

    def service(self) -> AgentService | None:
        live = [s for _, s in sorted(self.services.items()) if s.running]
        return self.rng.choice(live) if live else None

    async def once(self, call: Callable[[AgentService], Awaitable[T]]) -> T:
        """One attempt on a random live node (``NodeDownError`` if none)."""
        service = self.service()
        if service is None:
            raise NodeDownError("no server node is up")
        with trio.fail_after(60):
            return await call(service)

    async def until_done(self, call: Callable[[AgentService], Awaitable[T]]) -> T:
        """Retried until it succeeds (only for calls that are safe to repeat)."""
        while True:
            try:
                return await self.once(call)
            except _FAILURES:
                await trio.sleep(self.rng.uniform(0.5, 2.0))


async def _create(client: Client, log: Log, agent_id: str, number: int) -> None:
    rng, now = client.rng, client.clock.now()
    text = f"scheduled {agent_id} #{number}"
    spec: dict[str, object]
    if rng.random() < 0.6:
        at = now + rng.uniform(3, 60)
        created, spec = Created(agent_id, text, None, at), {"scheduled_at": at * 1000}
    else:
        pool = CRONS + CALENDAR_CRONS if client.ctx.params.get("calendar") else CRONS
        cron = rng.choice(EDGE_CRONS if client.ctx.params.get("edges") else pool)
        created = Created(agent_id, text, cron, None, sent=now)
        spec = {"type": "recurring", "cron_expression": cron}
    log.created.append(created)
    messages = (InputMessage("user", text),)
    try:
        record = await client.once(
            lambda s: schedules.create_schedule(s, agent_id, messages, spec, max_steps=2)
        )
    except _FAILURES as error:
        if getattr(error, "outcome_unknown", True):
            log.unknown += 1
        return
    except ServiceError as error:  # every expression here is valid: a refusal is a bug
        if not client.ctx.params.get("edges"):
            raise
        log.refused.append(f"{created.cron or spec}: {error}")
        return
    created.id, created.first = record.id, record.next_at
    created.acked = client.clock.now()


async def _delete(client: Client, created: Created) -> None:
    assert created.id is not None
    created.delete_started = client.clock.now()
    with contextlib.suppress(ServiceError):  # gone already: NotFoundError, retried or not
        await client.until_done(
            lambda s: schedules.delete_schedule(s, created.agent_id, created.id or "")
        )
    created.delete_acked = client.clock.now()


async def _agent_client(client: Client, log: Log, agent_id: str, span: float) -> None:
    rng, number = client.rng, 0
    deadline = trio.current_time() + span
    while trio.current_time() < deadline:
        number += 1
        recurring = [c for c in log.created if c.agent_id == agent_id and c.cron and c.id]
        live = [c for c in recurring if c.delete_started is None]
        if live and rng.random() < 0.2:
            chosen = rng.choice(live)
            if rng.random() < 0.5:  # cancel it just as it fires (the cron's next minute)
                assert chosen.cron is not None
                fires = cron_model(chosen.cron).next_after(client.clock.now())
                wait = fires - client.clock.now() + rng.uniform(-0.5, 1.5)
                if client.ctx.params.get("edges"):  # an edge cron's next time may be hours away
                    wait = min(wait, 30.0)
                await trio.sleep(max(0.0, wait))
            await _delete(client, chosen)
        else:
            await _create(client, log, agent_id, number)
        await trio.sleep(rng.uniform(2, 12))


async def _stuck(client: Client) -> None:
    """(``stuck``, svcW) One more agent, whose every scheduled fire fails: its replies
    (``send_message``) wait for an approval nobody gives, so each fire's message is refused
    (409) and its node's scheduler holds the occurrence back and tries again later, forever.
    Its schedule is the client's own, never judged; the other agents' schedules must fire on
    time meanwhile (``punctual``): one agent's failing fires hold back no one else's."""
    request = CreateAgent(name="sched-stuck", agent_type="memgpt_agent")
    view = await client.until_done(lambda s: s.create_agent(request))
    agent_id = view.agent.id
    await client.until_done(lambda s: s.set_tool_approval(agent_id, "send_message", True))
    asked = (InputMessage("user", "Reply when you can.", otid="sched-stuck-ask"),)
    with contextlib.suppress(ServiceError):  # a repeat after an unknown outcome: refused
        await client.until_done(lambda s: s.send_message(agent_id, asked))
    spec = {"type": "recurring", "cron_expression": "* * * * *"}
    never = (InputMessage("user", "stuck: never sent"),)
    await client.until_done(lambda s: schedules.create_schedule(s, agent_id, never, spec))


async def _outage(ctx: WorkloadContext, nodes: list[kelpie_dst.Node], span: float) -> None:
    """Every server node down at once (a power cut), back after 5 to 30 s: the occurrences
    that came due meanwhile are sent by whichever node comes back first."""
    rng = ctx.rng("outage")
    await trio.sleep(rng.uniform(0.2, 0.7) * span)
    ctx.sim.trace_event("workload.outage", nodes=len(nodes))
    for node in nodes:
        ctx.sim.crash(node)
        ctx.sim.restart(node, after=rng.uniform(5, 30))


def _history(agent_id: str) -> Callable[[AgentService], Awaitable[list[Any]]]:
    return lambda s: s.list_messages(agent_id, limit=1000, order="asc")


def _pending(agent_id: str) -> Callable[[AgentService], Awaitable[tuple[list[Any], bool]]]:
    return lambda s: schedules.list_schedules(s, agent_id)


async def _read_back(client: Client, log: Log, agent_ids: list[str]) -> None:
    texts = {c.text for c in log.created}
    for agent_id in agent_ids:
        history = await client.until_done(_history(agent_id))
        seen: set[str] = set()
        previous = 0.0
        for m in history:
            previous, before = m.date, previous
            if not isinstance(m, UserMessage) or m.otid is None:
                continue
            parsed = parse_otid(m.otid)
            if parsed is None:
                continue
            if m.otid in seen:
                log.duplicates.append(m.otid)
            seen.add(m.otid)
            text = m.content if m.content in texts else m.content[:80]
            log.fired.append(Fired(agent_id, parsed[0], parsed[1], m.date, text, m.otid, before))
        pending, _ = await client.until_done(_pending(agent_id))
        log.pending += [(agent_id, r.id, r.next_at) for r in pending]


def start_servers(ctx: WorkloadContext) -> tuple[dict[str, AgentService], list[kelpie_dst.Node]]:
    """The database host and the server nodes of ``ctx.topology`` (each an agent service with
    the helpful model), booted on every (re)start: the live services by node name, and the
    nodes. Shared by the workloads that drive ``AgentService`` directly (schedules, admin)."""
    topology = ctx.topology
    db = ctx.sim.add_node(topology.database or "db")
    services: dict[str, AgentService] = {}

    async def server(node: kelpie_dst.Node) -> None:
        async with open_agent_node(
            open_kv(node, host=db),
            sim_ports(node),
            node_id=node.name,
            llm=SimLlmClient(HelpfulPolicy(), timing=LlmTiming()),
            dispatcher_options=OPTIONS,
            options=SERVICE,
            observer=kelpie_dst.log,
            **coherence_options(ctx, db),
        ) as service:
            services[node.name] = service
            await trio.sleep_forever()

    names = topology.nodes or ("server-1", "server-2", "server-3")
    return services, [ctx.sim.add_node(name, server) for name in names]


@workload(
    params={
        "agents": 3,
        "span": 120.0,
        "grace": 60.0,
        "tolerance": 5.0,
        "outage": True,
        "calendar": False,
        "edges": False,
        "punctual": 0.0,
        "stuck": False,
    },
    sizes=("agents",),
    bounds={
        "agents": (1, 50),
        "span": (1, 3600),
        "grace": (1, 3600),
        "tolerance": (0, 60),
        "punctual": (0, 3600),
    },
)
async def agent_schedules(ctx: WorkloadContext) -> None:
    """Create, fire and delete schedules under faults; see the module docstring."""
    log = Log()
    ctx.state["log"] = log
    services, nodes = start_servers(ctx)
    client = Client(ctx, services)
    agent_ids = []
    for number in range(int(ctx.params["agents"])):
        request = CreateAgent(name=f"sched-{number}")
        view = await client.until_done(lambda s, r=request: s.create_agent(r))  # type: ignore[misc]
        agent_ids.append(view.agent.id)
    span = float(ctx.params["span"])
    if ctx.params["stuck"]:
        await _stuck(client)
    async with trio.open_nursery() as nursery:
        for agent_id in agent_ids:
            nursery.start_soon(_agent_client, client, log, agent_id, span)
        if ctx.params["outage"]:
            nursery.start_soon(_outage, ctx, nodes, span)
    # the end: delete what is left (including schedules whose create's outcome was unknown)
    for agent_id in agent_ids:
        read = client.clock.now()
        pending, _ = await client.until_done(_pending(agent_id))
        known = {c.id: c for c in log.created if c.id is not None}
        for record in pending:
            if record.cron is None:
                continue
            log.listed.append((agent_id, record.id, record.next_at, read))
            created = known.get(record.id)
            if created is None:  # an unknown outcome that took effect
                text = record.messages[0].content
                created = next((c for c in log.created if c.text == text), None)
                if created is None:
                    continue
                created.id, created.first = record.id, None
            if created.delete_started is None:
                await _delete(client, created)
    await trio.sleep(float(ctx.params["grace"]) + 5)
    log.end = client.clock.now()
    await _read_back(client, log, agent_ids)
    ctx.metric("schedules.created", sum(c.id is not None for c in log.created))
    ctx.metric("schedules.unknown", log.unknown)
    ctx.metric("schedules.fired", len(log.fired))
    ctx.metric("schedules.deleted", sum(c.delete_acked is not None for c in log.created))


@invariant
def scheduled_exactly_once(ctx: WorkloadContext) -> None:
    """Every due occurrence fired exactly once, none early, none after its delete, in order;
    see :func:`check`."""
    params = ctx.params
    problems = check(ctx.state["log"], float(params["grace"]), float(params["tolerance"]))
    problems += check_punctual(ctx.state["log"], float(params["punctual"]))
    shown = "; ".join(problems[:5]) + (
        f"; ... ({len(problems)} in all)" if len(problems) > 5 else ""
    )
    assert not problems, shown
