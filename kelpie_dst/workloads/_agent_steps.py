"""Step records in the agent workload: written with their messages, and read back whole.

Two oracles, kept apart from the simulator:

* :class:`StepCommits` watches every commit to the database (a hook in the journal): the
  first commit that writes a step's record (``step/<id>``) writes every message the record
  names, and the first commit that writes a model-output message of a step (reasoning,
  assistant, tool call, approval request: a message with a ``step_id`` that is not a tool
  return) writes that step's record. A step written in a transaction of its own, before or
  after its messages, is caught at that commit, crash or not. The commit that creates an
  agent is exempt from the second rule: an imported history's messages name steps that were
  never run here, and no step record is made for them (Dlead23-2).
* :func:`check_run_steps`, at read-back, in the database itself: every acknowledged run's
  record lists its steps; each exists, belongs to the run and its agent, is numbered in order
  (0, 1, ...; not by start time: a run resumed on a node whose clock is behind starts its next
  step "earlier"), and their count equals the step count the
  client was given in the run's usage; the agent's step index holds exactly the steps of its
  runs; every stored message of a step names a step of its own run.
* :func:`read_steps`, at read-back, through the SDK: feedback given is stored and filtered on,
  and ``steps.list`` and ``runs.steps.list`` page through exactly what the database holds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import msgpack

from kelpie_agent.agent import Keys, RunRecord, StepRecord
from kelpie_agent.agent._codec import unpack

from ..shims._storage import SimKVStore
from ._agent_checks import Ack

if TYPE_CHECKING:  # the world imports this module: the clients' modules import the world
    from ._agent_client import AgentPlan, Clients

__all__ = ["StepCommits", "check_run_steps", "read_steps"]

_OUTPUT = frozenset(
    ("reasoning_message", "assistant_message", "tool_call_message", "approval_request_message")
)
_LIMIT = 50
_FIRST = b"/" + b"0" * 15 + b"1"  # the key suffix of a history's first message (seq 1)


def _fields(raw: bytes) -> dict[str, Any]:
    try:
        value = msgpack.unpackb(raw, raw=False)
    except Exception:
        return {}
    return value if isinstance(value, dict) else {}


class StepCommits:
    """Checks, commit by commit, that steps and their messages are written together."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.steps = 0  # step records seen written (the first time)
        self._steps: set[str] = set()
        self._messages: set[str] = set()

    def _problem(self, text: str) -> None:
        if len(self.problems) < _LIMIT:
            self.problems.append(text)

    def observe(self, writes: Iterable[tuple[bytes, bytes | None]]) -> None:
        written: dict[str, str | None] = {}  # message id -> its step, for new messages
        steps: dict[str, list[str]] = {}  # step id -> the messages its record names
        created = False  # the commit that creates an agent (its first message, the system's)
        for key, value in writes:
            if value is None:
                continue
            if key.startswith(b"msg/"):
                created = created or key.endswith(_FIRST)
                record = _fields(value)
                mid = record.get("id")
                if isinstance(mid, str) and mid not in self._messages:
                    step = record.get("step_id") if record.get("_t") in _OUTPUT else None
                    written[mid] = step if isinstance(step, str) else None
            elif key.startswith(b"step/"):
                record = _fields(value)
                sid = record.get("id")
                if isinstance(sid, str) and sid not in self._steps:
                    steps[sid] = [str(m) for m in record.get("message_ids") or ()]
        for sid, names in steps.items():
            missing = [m for m in names if m not in written]
            if missing:
                self._problem(f"step {sid} was committed without its messages {missing}")
        for mid, step in written.items():
            if created:  # an imported history: its steps were never run here (Dlead23-2)
                break
            if step is not None and step not in steps and step not in self._steps:
                self._problem(f"message {mid} was committed without its step {step}")
        self.steps += len(steps)
        self._steps.update(steps)
        self._messages.update(written)


def _scan(store: SimKVStore, prefix: bytes) -> list[tuple[bytes, bytes]]:
    rows: list[tuple[bytes, bytes]] = store._scan(prefix, Keys.prefix_end(prefix), None, False)
    return rows


def _get(store: SimKVStore, key: bytes) -> Any:
    rows = store._scan(key, key + b"\x00", None, False)
    return unpack(rows[0][1]) if rows else None


def check_run_steps(
    store: SimKVStore, acks: Sequence[Ack], server_id: Callable[[str], str | None]
) -> list[str]:
    """The acknowledged runs' steps as stored (``server_id``: an acked agent's server id)."""
    problems: list[str] = []
    by_agent: dict[str, list[Ack]] = {}
    for ack in acks:
        by_agent.setdefault(ack.agent, []).append(ack)
    for agent, agent_acks in by_agent.items():
        sid = server_id(agent)
        if sid is None:
            continue
        keys = Keys(sid)
        indexed = [_id(key) for key, _ in _scan(store, keys.steps)]
        found = [_get(store, Keys.run(_id(key))) for key, _ in _scan(store, keys.runs)]
        runs: list[RunRecord] = [r for r in found if r is not None]
        named: dict[str, set[str]] = {}  # run id -> the steps its stored messages name
        for _, value in _scan(store, keys.messages):
            try:
                message = unpack(value)
            except Exception:  # a corrupted value: the read-back reports what it cannot read
                continue
            if message.run_id and message.step_id:
                named.setdefault(message.run_id, set()).add(message.step_id)
        listed = [s for run in runs for s in run.steps]
        if sorted(indexed) != sorted(listed):
            extra = sorted(set(indexed) - set(listed))
            lost = sorted(set(listed) - set(indexed))
            problems.append(f"{agent}: step index differs from its runs (+{extra} -{lost})")
        for ack in agent_acks:
            if ack.run_id:
                problems += _check_run(store, sid, ack, named.get(ack.run_id, set()))
    return problems


def _id(key: bytes) -> str:
    return key.rsplit(b"/", 1)[1].decode()


def _check_run(store: SimKVStore, agent_id: str, ack: Ack, named: set[str]) -> list[str]:
    where = f"{ack.agent} #{ack.index} run {ack.run_id}"
    run: RunRecord | None = _get(store, Keys.run(ack.run_id))
    if run is None:
        return [f"{where}: the run is not stored"]
    problems: list[str] = []
    if ack.steps is not None and len(run.steps) != ack.steps:
        problems.append(
            f"{where}: usage reported {ack.steps} steps, the run lists {len(run.steps)}"
        )
    for number, step_id in enumerate(run.steps):
        step: StepRecord | None = _get(store, Keys.step(step_id))
        if step is None:
            problems.append(f"{where}: step {step_id} is not stored")
            continue
        if step.run_id != run.id or step.agent_id != agent_id:
            problems.append(f"{where}: step {step_id} belongs to {step.agent_id}/{step.run_id}")
        if step.number != number:  # not its start time: nodes' clocks may disagree
            problems.append(f"{where}: step {step_id} is out of order (number {step.number})")
    strangers = sorted(named - set(run.steps))
    if strangers:
        problems.append(f"{where}: its messages name steps it does not list: {strangers}")
    return problems


async def read_steps(clients: Clients, plan: AgentPlan, rng: Any) -> list[str]:
    """Through the SDK (HTTP link only), after the agent's read-back: give feedback on the
    first step of its last acknowledged run, then page through ``steps.list`` (random page
    sizes, every cursor used), its ``has_feedback``/``feedback`` filters and each run's
    ``runs.steps.list``; each must be exactly what the database holds."""
    from ._agent_client import _page_size
    from ._agent_http import HttpLink

    link = clients.link
    sid = link.server_id(plan)
    acks = [a for a in clients.record.acks if a.agent == plan.agent_id and a.run_id]
    if not isinstance(link, HttpLink) or sid is None or not acks:
        return []
    store = clients.world.store()
    stored = [_id(key) for key, _ in _scan(store, Keys(sid).steps)]
    runs = {a.run_id: r for a in acks if (r := _get(store, Keys.run(a.run_id))) is not None}
    state = {"node": rng.choice(clients.world.node_names)}
    where = f"{plan.agent_id} steps"

    async def call(key: str, op: Callable[[Any], Awaitable[Any]]) -> Any:
        async def attempt(node: str, _: int) -> Any:
            return await op(link.sdk(node))

        return await clients._call(f"a{plan.number} {key}", plan.agent_id, attempt, rng, state)

    async def listing(key: str, **filters: Any) -> list[str]:
        size, ids = _page_size(rng), list[str]()
        while True:
            after = ids[-1] if ids else None

            async def page(sdk: Any, after: str | None = after) -> list[str]:
                got = await sdk.steps.list(
                    agent_id=sid, order="asc", after=after, limit=size, **filters
                )
                return [s.id for s in got.items]

            got = await call(key, page)
            ids.extend(got)
            if len(got) < size:
                return ids

    problems: list[str] = []
    chosen = runs.get(acks[-1].run_id)
    liked = [chosen.steps[0]] if chosen is not None and chosen.steps else []
    for step_id in liked:

        async def feedback(sdk: Any, step_id: str = step_id) -> Any:
            return await sdk.steps.feedback.create(step_id, feedback="negative", tags=["wl"])

        await call("feedback", feedback)
    if (listed := await listing("steps")) != stored:
        problems.append(f"{where}: steps.list gave {listed}, the database holds {stored}")
    for key, filters in (("rated", {"has_feedback": True}), ("negative", {"feedback": "negative"})):
        if (rated := await listing(key, **filters)) != liked:
            problems.append(f"{where}: steps.list({filters}) gave {rated}, not {liked}")
    for run_id, run in runs.items():

        async def of_run(sdk: Any, run_id: str = run_id) -> list[str]:
            return [s.id async for s in sdk.runs.steps.list(run_id, limit=1000)]

        if (got := await call(f"{run_id} steps", of_run)) != list(run.steps):
            problems.append(f"{where}: runs.steps.list({run_id}) gave {got}, not {run.steps}")
    return problems
