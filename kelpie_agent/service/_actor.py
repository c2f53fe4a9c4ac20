"""ServiceAgentActor: the ``agent`` actor a service node runs.

It is the agent core's :class:`AgentActor` whose transactions keep the service's agent index
in step (``_records.RecordingContext``): whenever the core writes or deletes the agent's
record, the index entry is written or deleted in the same transaction. Everything else,
exactly-once messages included (the core records the ``otid`` of every run's first input and
answers a retried request with the run it started), is the agent core's.
"""

from __future__ import annotations

from kelpie_agent.agent import AgentActor, AgentEnv
from kelpie_agent.agent._config import ActorContextLike

from ._records import RecordingContext

__all__ = ["ServiceAgentActor"]


class ServiceAgentActor:
    """An :class:`AgentActor` whose transactions keep the service's agent index."""

    def __init__(self, env: AgentEnv) -> None:
        self.inner = AgentActor(env)
        self.env = env

    async def activate(self, ctx: ActorContextLike) -> None:
        await self.inner.activate(RecordingContext(ctx))

    async def handle(self, message: object) -> object:
        return await self.inner.handle(message)

    async def deactivate(self) -> None:
        await self.inner.deactivate()
