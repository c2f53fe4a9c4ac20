"""The agent world's model, reached one of two ways (``topology.llm.transport``).

* ``"direct"``: each server node's LLM port is a :class:`~kelpie_dst.shims.SimLlmClient`, the
  simulated model called in-process.
* ``"anthropic_api"``: the model is served as Anthropic's Messages API by a simulated host node
  (``api.anthropic.com``, :func:`~kelpie_dst.shims.llm.start_anthropic_host`), and each server
  node's LLM port is the production adapter, :class:`kelpie_agent.llm.AnthropicLlm`, on the real
  ``anthropic`` SDK, talking to the host over the simulated network. The adapter's request
  building, SSE parsing, stop reasons, usage and error mapping, and the SDK's own retries, then
  run inside the simulation, under the network's faults as well as the ``llm.*`` faults (which
  the host turns into Anthropic's error statuses, broken tool JSON and cut SSE streams).

Either way the same policy answers and the same observer (the prompt auditor) sees every
request; through the API host it sees the request as it arrived on the wire. Through the host,
the adapter's contract is checked too (:mod:`._agent_llm_checks`): every call of each node's
port is recorded, and :meth:`ModelLink.problems` compares what the agent got with what the
model said.
"""

from __future__ import annotations

import contextlib
import ssl

from kelpie_agent.llm import LlmClient

from .._sim import Simulation
from ..shims import LlmTiming, SimLlmClient, StreamShape
from ..shims.llm import AnthropicApiHost, LlmObserver, Policy, start_anthropic_host
from ._agent_llm_checks import ModelAnswers, PortCall, RecordingLlm, check_port, check_requests

__all__ = ["TRANSPORTS", "ModelLink"]

TRANSPORTS = ("direct", "anthropic_api")
SDK_RETRIES = 2
"""The SDK's own retries (its default): 429, 5xx, connection errors and timeouts. A node in
``bare_nodes`` (workload parameter ``bare_sdk_nodes``) runs with none, as a deployment that
leaves retrying to the agent loop does: every transient failure then reaches the adapter's
error mapping and the loop's own backoff, which the SDK's retries otherwise mostly absorb."""
SDK_TIMEOUT = 25.0
"""Seconds per SDK attempt: under the agent loop's own ``llm_timeout`` (30 s)."""

_SSL: ssl.SSLContext | None = None


def _ssl_context() -> ssl.SSLContext:
    """One TLS context per process: httpx builds one per client otherwise (loading the CA
    store each time), and the host speaks plain HTTP anyway."""
    global _SSL
    if _SSL is None:
        _SSL = ssl.create_default_context()
    return _SSL


class ModelLink:
    """How the server nodes reach the model: :meth:`setup` once on the main node, then
    :meth:`open` on every server node boot."""

    def __init__(
        self,
        sim: Simulation,
        policy: Policy,
        observer: LlmObserver,
        transport: str = "direct",
        shape: StreamShape | None = None,
        bare_nodes: frozenset[str] = frozenset(),
        gateway_errors: float = 0.0,
    ) -> None:
        if transport not in TRANSPORTS:
            raise ValueError(f"unknown transport {transport!r} (allowed: {', '.join(TRANSPORTS)})")
        self.sim, self.policy, self.observer, self.transport = sim, policy, observer, transport
        self.shape = shape  # how the model cuts its streams (stream_escapes)
        self.bare_nodes = bare_nodes  # their adapters run with the SDK's own retries off
        self.gateway_errors = gateway_errors  # failures answered as a gateway does (plain)
        self.host: AnthropicApiHost | None = None
        self.answers = ModelAnswers(observer)
        self.calls: list[PortCall] = []

    async def setup(self) -> None:
        if self.transport == "anthropic_api":
            self.host = await start_anthropic_host(
                self.sim,
                self.policy,
                timing=LlmTiming(),
                observer=self.answers,
                shape=self.shape,
                gateway_errors=self.gateway_errors,
            )

    def problems(self) -> list[str]:
        """Where the adapter broke the port's contract (nothing to check when direct)."""
        if self.host is None:
            return []
        return check_port(self.calls, self.answers) + check_requests(self.calls, self.answers)

    async def open(self, stack: contextlib.AsyncExitStack, node: str) -> LlmClient:
        """Node ``node``'s LLM port, closed with ``stack``."""
        if self.host is None:
            return SimLlmClient(
                self.policy, timing=LlmTiming(), observer=self.observer, shape=self.shape
            )
        import anthropic  # only this transport needs the SDK

        from kelpie_agent.llm import AnthropicLlm

        http = anthropic.DefaultAsyncHttpxClient(verify=_ssl_context())
        llm = AnthropicLlm(
            base_url=self.host.base_url,
            api_key="sim",
            max_retries=0 if node in self.bare_nodes else SDK_RETRIES,
            timeout=SDK_TIMEOUT,
            http_client=http,
        )
        return RecordingLlm(await stack.enter_async_context(llm), node, self.calls)
