"""What a refused request changed is never seen (failR, session 21): an attach refused
because its target does not exist leaves the agent as it was, in memory and in storage, and the
agent's next write does not store it either."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from kelpie_agent.agent import AttachShared, GetAgent, Keys, ResourceNotFoundError, UpdateAgent
from kelpie_agent.agent._codec import unpack
from kelpie_dst.shims import ScriptedPolicy

from .harness import create_agent, make_env, node_kv


@pytest.mark.dst(seeds=2, guards="strict")
@pytest.mark.parametrize("kind", ["archive", "identity"])
async def test_a_refused_attach_is_never_seen(kind: Literal["archive", "identity"]) -> None:
    kv = node_kv()
    actor, view = await create_agent(make_env(ScriptedPolicy()), kv)
    before = view.agent
    with pytest.raises(ResourceNotFoundError):
        await actor.handle(AttachShared(kind, f"{kind}-missing"))
    field = f"{kind}_ids"
    assert getattr(actor.rt.require(), field) == getattr(before, field)  # not in memory
    await actor.handle(UpdateAgent({"description": "after the refusal"}))  # the next write
    raw = await kv.get(Keys(before.id).agent)
    assert raw is not None
    stored = unpack(raw)
    assert stored.description == "after the refusal"
    assert getattr(stored, field) == getattr(before, field)
    shown: Any = await actor.handle(GetAgent())
    assert getattr(shown.agent, field) == getattr(before, field)
