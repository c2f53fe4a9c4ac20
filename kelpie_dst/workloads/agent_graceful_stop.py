"""A request cut by a graceful stop of its node (coreJ, session 14).

Crashes take a node's callers down with its dispatcher, so no scenario ever showed a caller
what the service answers when the node stops *gracefully* (``kelpie serve`` on SIGTERM: the
dispatcher stops, fails the request in progress with ``ActorStoppedError`` and releases its
leases) while the caller is still there to hear it (docs/service.md). The contract
(``UnavailableError``): nothing was done, or, with ``outcome_unknown``, it may have been; then
``retryable`` only for a request that cannot apply twice, and a message without an ``otid`` can.

The workload: a database host and a server node ``n1`` whose production node
(``open_agent_node``) runs inside a cancel scope the workload owns, with a model that takes 2
to 3 s to answer. A client on ``main`` makes one agent, then ``rounds`` times sends it a message
*without* an otid through ``n1``'s service and, once the model has seen that message (so the
run had started: its input is committed before the first model call), stops the node
gracefully (cancels the scope; the node then starts a new production node, as a restarted
process would). Sometimes (a coin per round) the stop comes before the model saw it.

The property (``stops_report_unknown_outcomes``): **a send the agent had started, cut by a
graceful stop, is answered ``UnavailableError`` with ``outcome_unknown`` and not retryable**
(repeating it could run the message twice); a send whose answer came is not judged, nor one
that failed otherwise before the model saw it.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

import kelpie_dst
from kelpie_agent.agent import CreateAgent, InputMessage
from kelpie_agent.llm import LlmRequest, TextBlock
from kelpie_agent.service import AgentService, ServiceError, UnavailableError, open_agent_node

from .._nodes import Node
from ..scenario import WorkloadContext, invariant, workload
from ..shims import LlmTiming, SimLlmClient, open_kv, sim_ports
from ._agent_world import OPTIONS

__all__ = ["agent_graceful_stop", "check_stops", "stops_report_unknown_outcomes"]

PROBE = "stopprobe"


@attrs.define
class Cut:
    """One send and how it ended: ``seen``: the model saw its input before the answer;
    ``error``: the service error it got (None: answered), with its flags."""

    text: str
    seen: bool = False
    answered: bool = False
    error: str | None = None
    outcome_unknown: bool = False
    retryable: bool = True


@attrs.define
class StopLog:
    seen: set[str] = attrs.Factory(set)  # probe texts the model was shown
    cuts: list[Cut] = attrs.Factory(list)
    stops: int = 0


def check_stops(log: StopLog) -> list[str]:
    problems = []
    for cut in log.cuts:
        if cut.answered or not cut.seen or cut.error is None:
            continue
        if cut.error != "UnavailableError" or not cut.outcome_unknown or cut.retryable:
            problems.append(
                f"{cut.text!r}: started (the model saw it), then cut by a graceful stop: "
                f"answered {cut.error} (outcome_unknown={cut.outcome_unknown}, "
                f"retryable={cut.retryable}); a message without an otid that may have run must "
                "be an UnavailableError with an unknown outcome, not retryable"
            )
    return problems


class _Policy:
    """Answers in plain text and notes every probe it is shown."""

    def __init__(self, log: StopLog) -> None:
        self.log = log

    def respond(self, request: LlmRequest, rng: Any) -> tuple[str, ...]:
        for message in request.messages:
            for block in message.content:
                if isinstance(block, TextBlock) and block.text.startswith(PROBE):
                    self.log.seen.add(block.text)
        return ("noted",)


@workload(params={"rounds": 6}, bounds={"rounds": (1, 100)})
async def agent_graceful_stop(ctx: WorkloadContext) -> None:
    """Sends cut by graceful stops of their node; see the module docstring."""
    sim = ctx.sim
    log = StopLog()
    ctx.state["stops"] = log
    db = sim.add_node(ctx.topology.database or "db")
    current: dict[str, Any] = {}  # the running service and the scope that stops it
    llm = SimLlmClient(_Policy(log), timing=LlmTiming(2.0, 3.0, 400.0))

    async def node_main(node: Node) -> None:
        while True:  # each pass a production node; a graceful stop starts the next
            with trio.CancelScope() as scope:
                async with open_agent_node(
                    open_kv(node, host=db),
                    sim_ports(node),
                    node_id=node.name,
                    llm=llm,
                    dispatcher_options=OPTIONS,
                    observer=kelpie_dst.log,
                ) as service:
                    current.update(service=service, scope=scope)
                    await trio.sleep_forever()
            current.clear()
            await trio.sleep(0.5)

    sim.add_node("n1", node_main)
    rng = ctx.rng("stops")

    async def up() -> AgentService:
        while "service" not in current:
            await trio.sleep(0.1)
        service: AgentService = current["service"]
        return service

    agent_id = ""
    while not agent_id:
        try:
            agent_id = (await (await up()).create_agent(CreateAgent(name="stopper"))).agent.id
        except ServiceError:
            await trio.sleep(0.5)

    for r in range(int(ctx.params["rounds"])):
        service = await up()
        cut = Cut(f"{PROBE} {r}")
        log.cuts.append(cut)
        early = rng.random() < 0.25  # stop before the model saw it, now and then

        async def send(service: AgentService = service, cut: Cut = cut) -> None:
            try:
                await service.send_message(agent_id, [InputMessage("user", cut.text)])
                cut.answered = True
            except ServiceError as error:
                cut.error = type(error).__name__
                if isinstance(error, UnavailableError):
                    cut.outcome_unknown = error.outcome_unknown
                    cut.retryable = error.retryable
            cut.seen = cut.text in log.seen

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send)
            if early:
                await trio.sleep(rng.uniform(0.0, 0.05))
            else:
                while cut.text not in log.seen and not cut.answered:
                    await trio.sleep(0.05)
                await trio.sleep(rng.uniform(0.1, 1.5))  # the model is still answering
            scope = current.get("scope")
            if scope is not None:
                scope.cancel()
                log.stops += 1
        await trio.sleep(2.0)
    ctx.metric("stops.stops", log.stops)
    ctx.metric("stops.judged", sum(c.seen and not c.answered for c in log.cuts))


@invariant
def stops_report_unknown_outcomes(ctx: WorkloadContext) -> None:
    """A started send cut by a graceful stop is answered as possibly applied, not retryable."""
    problems = check_stops(ctx.state["stops"])
    assert not problems, "; ".join(problems[:4])
