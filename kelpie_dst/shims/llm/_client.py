"""``SimLlmClient``: the LLM port implemented directly by a SimLLM policy (no network).

Latency is virtual (``trio.sleep``); faults are decided for the calling node. Outside a
simulation it still works (for offline demos): it draws from its own seeded streams, sleeps
in real time (use ``LlmTiming.instant()`` for none) and injects no faults.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import trio

from kelpie_agent.llm import (
    ChunkStream,
    LlmRequest,
    LlmResponse,
    LlmServerError,
    LlmStreamCutError,
    StreamChunk,
)

from ..._nodes import Node
from ..._public import current_simulation
from ..._sim import Simulation
from ._engine import LlmObserver, LlmTiming, Plan, SimLlmEngine, StreamShape
from ._faults import Failure
from ._turns import Policy

__all__ = ["SimLlmClient"]


async def _sleep(seconds: float) -> None:
    if seconds > 0:
        await trio.sleep(seconds)
    else:
        await trio.lowlevel.checkpoint()


class SimLlmClient:
    """A deterministic model behind the LLM port: ``policy`` decides what it says."""

    def __init__(
        self,
        policy: Policy,
        *,
        timing: LlmTiming | None = None,
        seed: int = 0,
        observer: LlmObserver | None = None,
        shape: StreamShape | None = None,
    ) -> None:
        self.engine = SimLlmEngine(policy, timing, seed, observer, shape)

    @property
    def policy(self) -> Policy:
        return self.engine.policy

    def _plan(self, request: LlmRequest, streaming: bool) -> tuple[Plan | Failure, Node | None]:
        if not isinstance(request, LlmRequest):
            raise TypeError(f"expected an LlmRequest, got {type(request).__name__}")
        sim: Simulation | None = current_simulation()
        node = sim.current_node() if sim is not None else None
        if node is not None:
            node.check_alive()
        name = node.name if node is not None else None
        return self.engine.plan(request, streaming=streaming, sim=sim, node=name), node

    async def complete(self, request: LlmRequest) -> LlmResponse:
        plan, node = self._plan(request, streaming=False)
        if isinstance(plan, Failure):
            await _sleep(plan.delay)
            raise plan.exception()
        await _sleep(plan.duration)
        if node is not None:
            node.check_alive()
        if plan.partial is not None:  # llm.answer_cut: what AnthropicLlm makes of such a body
            raise LlmServerError(f"answer {plan.response.id} has no stop reason")
        return plan.response

    def stream(self, request: LlmRequest) -> ChunkStream:
        return ChunkStream(self._chunks(request))

    async def _chunks(self, request: LlmRequest) -> AsyncGenerator[StreamChunk, None]:
        plan, node = self._plan(request, streaming=True)
        if isinstance(plan, Failure):
            await _sleep(plan.delay)
            raise plan.exception()
        for i, (delay, chunk) in enumerate(plan.steps):
            await _sleep(delay + (plan.stall if i == plan.stall_at else 0.0))
            if node is not None:
                node.check_alive()
            if i == plan.cut_after:
                raise LlmStreamCutError(f"injected llm.stream_cut after {i} chunks")
            yield chunk
