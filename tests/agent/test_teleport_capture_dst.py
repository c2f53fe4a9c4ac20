"""Teleport: a sandbox call whose files cannot be saved leaves no trace in the sandbox.

Found by ``agent_tool_rules`` seed 39 (session 10, rtE): a custom tool ran, then saving the
sandbox's image gave up on a storage read (the previous image's generation), and the call was
reported failed while the live sandbox kept the files it wrote. The agent's next call ran on
them and saved them into the image, so a call reported as failed had taken effect (a model
that repeats a failed call does it twice). A call whose files cannot be saved must be rolled
back to the last image, as one whose snapshot fails is (docs/teleport.md).
"""

from __future__ import annotations

from typing import Any

import pytest

import kelpie_dst
from kelpie_agent.agent import AgentEnv, ToolReturnMessage, ToolStore
from kelpie_agent.agent._teleport import image_key
from kelpie_agent.storage import KV, StorageError
from kelpie_dst.shims import SimLlmClient, open_kv, open_sandbox, sim_ports

from .harness import check_history, create_agent, say
from .test_teleport_dst import NOTE, NotePolicy, check_chain


class ImageReadsFail:
    """A KV whose reads of one agent's image key fail ``fail`` times after ``skip`` pass."""

    def __init__(self, kv: KV) -> None:
        self._kv = kv
        self.key: bytes | None = None
        self.skip = 0
        self.fail = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kv, name)

    async def get(self, key: bytes) -> bytes | None:
        if key == self.key:
            if self.skip:
                self.skip -= 1
            elif self.fail:
                self.fail -= 1
                raise StorageError("injected: the image read fails")
        return await self._kv.get(key)


@pytest.mark.dst(seeds=2, guards="strict")
async def test_a_call_whose_image_cannot_be_saved_leaves_no_files_behind(
    dst: kelpie_dst.Simulation,
) -> None:
    kv = ImageReadsFail(open_kv(dst.current_node()))
    spec = await ToolStore(kv, sim_ports()).create(NOTE)
    env = AgentEnv(
        llm=SimLlmClient(NotePolicy(calls=1)),
        sandbox_factory=lambda r: open_sandbox(network=r.network),
    )
    actor, view = await create_agent(env, kv, tools=[spec.id])
    agent_id = view.agent.id
    # the restore's read of the image passes (there is none yet); saving it then fails
    kv.key, kv.skip, kv.fail = image_key(agent_id), 1, env.config.storage_attempts
    first = await say(actor, "one")
    returns = [m for m in first.messages if isinstance(m, ToolReturnMessage)]
    assert [m.status for m in returns] == ["error"], returns
    assert "AgentStorageError" in returns[0].tool_return
    second = await say(actor, "two")  # the same activation, the same node
    assert [m.status for m in second.messages if isinstance(m, ToolReturnMessage)] == ["success"]
    # the second call must find the sandbox as the last committed call left it: empty
    assert check_chain(await check_history(kv, agent_id)) == [1]
