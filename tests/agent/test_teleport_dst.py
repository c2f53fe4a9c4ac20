"""Teleport: an agent's sandbox files follow it across node crashes and moves, under the
sandbox's snapshot and restore faults. Oracle (at the sandbox boundary): a note tool reports
the checksum of the notes file it found and the one it left; each call whose result was
committed must have found exactly what the previous committed call left."""

from __future__ import annotations

import json
import random
from typing import Any

import attrs
import pytest
import trio

import kelpie_dst
from kelpie_agent.agent import (
    AgentEnv,
    GetSession,
    LoopConfig,
    ToolReturnMessage,
    ToolStore,
)
from kelpie_agent.agent._teleport import image_key
from kelpie_agent.llm import LlmRequest, ToolResult
from kelpie_dst.shims import LlmTiming, SimLlmClient, open_kv, open_sandbox, sim_ports
from kelpie_dst.shims.llm import Call, Reply

from .harness import activate, check_history, create_agent, say, stored_session

NOTE = '''
def note(n: int) -> str:
    """Append line n to notes.txt; report its checksum before and after."""
    import hashlib
    try:
        with open("notes.txt") as f:
            before = f.read()
    except FileNotFoundError:
        before = ""
    with open("notes.txt", "a") as f:
        f.write(f"line {n}\\n")
    with open("notes.txt") as f:
        after = f.read()
    digest = lambda text: hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"{digest(before)}>{digest(after)}>{after.count(chr(10))}"
'''
FAULTS = [
    "sandbox.snapshot_fail=0.3",
    "sandbox.snapshot_corrupt=0.2",
    "sandbox.restore_fail=0.4",
    "sandbox.crash=0.05",
]


@attrs.define
class NotePolicy:
    """Calls ``note`` with n = 1.. (one per step, ``calls`` per turn), then answers."""

    calls: int
    counter: list[int] = attrs.field(factory=lambda: [0])

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        made = 0  # calls made since the turn's input (the last user turn without results)
        for message in reversed(request.messages):
            if message.role == "user" and not any(
                isinstance(b, ToolResult) for b in message.content
            ):
                break
            made += message.role == "assistant"
        if made >= self.calls:
            return ("noted",)
        self.counter[0] += 1
        return (Call("note", {"n": self.counter[0]}),)


def check_chain(messages: list[Any]) -> list[int]:
    """The oracle: committed note results chain (each found what the previous one left)."""
    left = None
    counts = []
    for m in messages:
        if isinstance(m, ToolReturnMessage) and m.name == "note" and m.status == "success":
            before, after, count = json.loads(m.tool_return)["message"].split(">")
            empty = "e3b0c44298fc1c14"
            assert before == (left if left is not None else empty), (
                f"{m.tool_call_id} found {before}, the previous acknowledged call left {left}"
            )
            left = after
            counts.append(int(count))
    return counts


@pytest.mark.dst(seeds=8, guards="strict", faults=FAULTS)
async def test_files_of_acknowledged_calls_follow_the_agent_across_crashes(
    dst: kelpie_dst.Simulation,
) -> None:
    db = dst.add_node("db")
    kv = open_kv(dst.current_node(), host=db)  # type: ignore[arg-type]
    spec = await ToolStore(kv, sim_ports()).create(NOTE)
    policy = NotePolicy(calls=3)
    env0 = AgentEnv(
        llm=SimLlmClient(policy), sandbox_factory=lambda r: open_sandbox(network=r.network)
    )
    _, view = await create_agent(env0, kv, tools=[spec.id])
    agent_id = view.agent.id
    turns = 6
    sent: list[str] = []

    async def server(node: kelpie_dst.Node) -> None:
        timing = LlmTiming(0.2, 0.6, 50.0)
        env = AgentEnv(
            llm=SimLlmClient(policy, timing=timing),
            sandbox_factory=lambda r: open_sandbox(node, name=f"sb-{node.name}", network=r.network),
            config=LoopConfig(tool_timeout=5),
        )
        actor = await activate(env, open_kv(node, host=db), agent_id, sim_ports(node))
        while len(sent) < turns:
            session = await actor.handle(GetSession())
            if session is not None and session.running:
                await trio.sleep(0.1)
                continue
            sent.append(node.name)
            await say(actor, f"turn {len(sent)}")
        await trio.sleep_forever()

    nodes = [dst.add_node("a", server)]
    await trio.sleep(dst.rng("test/crash").uniform(1.0, 6.0))
    dst.crash(nodes[0])
    nodes.append(dst.add_node("b", server))  # the agent moves to another node
    await trio.sleep(dst.rng("test/crash").uniform(1.0, 6.0))
    dst.crash(nodes[1])
    dst.restart(nodes[0], after=0.5)
    while True:
        session = await stored_session(kv, agent_id)
        if len(sent) >= turns and session is not None and not session.running:
            break
        await trio.sleep(1.0)
    messages = await check_history(kv, agent_id)
    counts = check_chain(messages)
    assert counts, "no note call succeeded"
    assert await kv.get(image_key(agent_id)) is not None


@pytest.mark.dst(seeds=3, guards="strict")
async def test_a_restore_that_keeps_failing_is_reported_never_an_empty_sandbox(
    dst: kelpie_dst.Simulation,
) -> None:
    """When every restore fails, the tool fails with SandboxRestoreError; it never runs in an
    empty sandbox in place of the agent's files."""
    kv = open_kv(dst.current_node())  # type: ignore[arg-type]
    spec = await ToolStore(kv, sim_ports()).create(NOTE)
    policy = NotePolicy(calls=1)
    env = AgentEnv(
        llm=SimLlmClient(policy), sandbox_factory=lambda r: open_sandbox(network=r.network)
    )
    actor, view = await create_agent(env, kv, tools=[spec.id])
    await say(actor, "one")  # saved an image with one line
    later = await activate(env, kv, view.agent.id)  # a new activation: a fresh sandbox
    now = dst.now()
    dst.faults.enable(kelpie_dst.Fault("sandbox.restore_fail", 1.0, start=now, end=now + 60))
    result = await say(later, "two")
    failed = [m for m in result.messages if isinstance(m, ToolReturnMessage)]
    assert failed and all(m.status == "error" for m in failed)
    assert "SandboxRestoreError" in failed[0].tool_return
    await trio.sleep(60)  # the fault's window ends
    ok = await say(later, "three")
    check_chain(await check_history(kv, view.agent.id))
    assert [m.status for m in ok.messages if isinstance(m, ToolReturnMessage)] == ["success"]
