"""Teleport: a sandbox image that shrinks leaves no chunk of its larger past behind.

Noticed in session 11 (sbxF): an image is stored in 256 KiB chunks, and saving a smaller
image wrote its own chunks and left the old last ones in the database; deleting the agent
then deleted only the current image's chunks, so a deleted agent's old sandbox bytes stayed
stored for good. Saving an image now deletes the chunks past its own in the same commit.
"""

from __future__ import annotations

import random
from typing import Any

import attrs
import pytest

import kelpie_dst
from kelpie_agent.agent import AgentEnv, DeleteAgent, ToolReturnMessage, ToolStore
from kelpie_agent.agent._teleport import CHUNK, chunk_prefix
from kelpie_agent.llm import LlmRequest, ToolResult
from kelpie_dst.shims import SimLlmClient, open_kv, open_sandbox, sim_ports
from kelpie_dst.shims.llm import Call, Reply

from .harness import create_agent, say

FILL = '''
def fill(size: int) -> str:
    """Write size bytes that do not compress to blob.bin."""
    import hashlib
    out, block = bytearray(), b"seed"
    while len(out) < size:
        block = hashlib.sha256(block).digest()
        out += block
    with open("blob.bin", "wb") as f:
        f.write(bytes(out[:size]))
    return f"wrote {size}"
'''


@attrs.define
class FillPolicy:
    """Each turn calls ``fill`` once with the next size, then answers."""

    sizes: list[int]

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        last = request.messages[-1]
        if last.role == "user" and not any(isinstance(b, ToolResult) for b in last.content):
            return (Call("fill", {"size": self.sizes.pop(0)}),)
        return ("done",)


async def _chunks(kv: Any, agent_id: str) -> int:
    return len(await kv.scan_prefix(chunk_prefix(agent_id)))


@pytest.mark.dst(seeds=2, guards="strict")
async def test_a_shrinking_image_and_a_deleted_agent_leave_no_chunks(
    dst: kelpie_dst.Simulation,
) -> None:
    kv = open_kv(dst.current_node())
    spec = await ToolStore(kv, sim_ports()).create(FILL)
    env = AgentEnv(
        llm=SimLlmClient(FillPolicy([3 * CHUNK, 10])),
        sandbox_factory=lambda r: open_sandbox(network=r.network),
    )
    actor, view = await create_agent(env, kv, tools=[spec.id])
    agent_id = view.agent.id
    for text in ("grow", "shrink"):
        turn = await say(actor, text)
        returns = [m for m in turn.messages if isinstance(m, ToolReturnMessage)]
        assert [m.status for m in returns] == ["success"], returns
        if text == "grow":
            assert await _chunks(kv, agent_id) >= 3
    assert await _chunks(kv, agent_id) == 1  # the small image's one chunk, and nothing else
    await actor.handle(DeleteAgent())
    assert await _chunks(kv, agent_id) == 0
