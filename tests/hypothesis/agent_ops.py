"""Requests sent at the same time, for the agent server machine's ``concurrently`` rule.

Races need concurrency: two or three requests to one agent, each from its own client task,
through the servers they name (one agent's requests through different servers make its lease
move while they run). The model then allows any order among them: any acknowledged edit of a
block may be the one that stuck, and a request overlapping a delete may find the agent gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import hypothesis.strategies as st
import trio

from kelpie_dst.hypothesis import Outcome

from .agent_drivers import BLOCKS, Reply

if TYPE_CHECKING:
    from .agent_machine import AgentServerMachine

SERVERS = ("n1", "n2", "n3")
NODES = st.sampled_from(SERVERS)
LABELS = st.sampled_from(sorted(BLOCKS))
VALUES = st.sampled_from(["Ada", "Bo", "Cy"])


@attrs.frozen
class Send:
    node: str
    stream: bool = False


@attrs.frozen
class Edit:
    node: str
    label: str
    value: str


@attrs.frozen
class Insert:
    node: str


@attrs.frozen
class Delete:
    node: str


Op = Send | Edit | Insert | Delete
OPS = st.lists(
    st.one_of(
        st.builds(Send, NODES, st.booleans()),
        st.builds(Edit, NODES, LABELS, VALUES),
        st.builds(Insert, NODES),
        st.builds(Delete, NODES),
    ),
    min_size=2,
    max_size=3,
)


async def run_concurrently(machine: AgentServerMachine, agent_id: str, ops: list[Op]) -> None:
    """Send ``ops`` to the agent at once, then record every reply in the model."""
    model = machine.model
    agent = model.agents[agent_id]
    driver = machine.driver
    names = [model.fresh("m" if isinstance(op, Send) else "p") for op in ops]
    for op, name in zip(ops, names, strict=True):
        if isinstance(op, Send):
            agent.texts[name] = f"note {name}"
    replies: list[Reply[Any]] = [Reply(Outcome.UNKNOWN)] * len(ops)

    async def one(i: int) -> None:
        op, name = ops[i], names[i]

        async def request(node: str) -> Reply[Any]:
            if isinstance(op, Send):
                text = agent.texts[name]
                return await driver.send_message(node, agent_id, text, name, op.stream)
            if isinstance(op, Edit):
                return await driver.update_block(node, agent_id, op.label, op.value)
            if isinstance(op, Insert):
                return await driver.insert_passage(node, agent_id, f"kelp fact {name}")
            return await driver.delete_agent(node, agent_id)

        replies[i] = await machine._request(type(op).__name__.lower(), op.node, None, request)

    before = (agent.deleting, agent.gone)
    if any(isinstance(op, Delete) for op in ops) and agent.live:
        agent.deleting = True  # while the batch runs, the others may find it gone
    async with trio.open_nursery() as nursery:
        for i in range(len(ops)):
            nursery.start_soon(one, i)
    done = list(zip(ops, names, replies, strict=True))
    # What was served first: every request that found the agent...
    found = [(op, name, r) for op, name, r in done if r.status != 404]
    for op, name, reply in found:
        if isinstance(op, Send):
            model.sent(agent, name, reply)
        elif isinstance(op, Insert):
            model.inserted(agent, f"kelp fact {name}", reply)
    for label in sorted({op.label for op in ops if isinstance(op, Edit)}):
        edits = [(op.value, r) for op, _, r in found if isinstance(op, Edit) and op.label == label]
        model.edited(agent, label, edits)
    # ...then the deletes, then the requests that found the agent gone.
    deletes = [r for op, _, r in done if isinstance(op, Delete)]
    if deletes:
        landed = any(r.outcome is Outcome.OK for r in deletes)
        maybe = any(r.outcome is Outcome.UNKNOWN for r in deletes) or before[0]
        missing = any(r.status == 404 for r in deletes)
        assert not missing or landed or maybe or before[1], f"delete: {agent_id} not found"
        if landed or missing:
            agent.gone, agent.deleting = True, False
        elif not agent.gone:
            agent.deleting = maybe
    for op, _, reply in done:
        if reply.status == 404:
            model.answered(agent, reply, f"{type(op).__name__.lower()} (with others)")
