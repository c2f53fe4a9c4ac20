"""Clients that poll their agents while the sends run (``poll_interval``, via HTTP).

letta-client users read their agent's state while it works (``agents.retrieve``), and the SDK
does not retry a 500. Those reads are served straight from storage (the service's retrying
reader, not the agent's actor), so under a storage outage the server's own retries can give up
mid-request: the answer must then be a retryable 503, never a 500. Each poll is an ordinary
client request (``_agent_client.Clients._call``: retried on another node after a 503, a cut
connection or a timeout, recorded as failed after anything else), so ``every_request_completed``
flags a poll that was refused for good. What a poll returns is checked too: the agent it names,
its memory carrying that agent's marker and no other agent's, and its blocks within their
limits (the state a client is shown mid-run is one agent's, whatever storage did).

With ``poll_interval = 0`` (the default) nothing here runs and no random draw moves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import trio

from ._agent_client import AgentPlan, Clients

__all__ = ["Poller"]


class Poller:
    """Polls a random live agent every ``interval * U[0.5, 1.5)`` seconds until stopped."""

    def __init__(self, clients: Clients, plans: Sequence[AgentPlan], interval: float) -> None:
        self.clients = clients
        self.plans = list(plans)
        self.interval = interval
        self.problems: list[str] = []
        self.polls, self.seen = 0, list[tuple[str, str, tuple[str, ...]]]()  # agent, poll, ids
        self._stopped = False

    def stop(self) -> None:
        """No new poll starts (one in flight finishes)."""
        self._stopped = True

    async def run(self) -> None:
        rng = self.clients.ctx.rng("polls")
        state = {"node": rng.choice(self.clients.world.node_names)}
        while True:
            await trio.sleep(self.interval * (0.5 + rng.random()))
            if self._stopped:
                return
            live = [p for p in self.plans if self.clients.link.server_id(p) is not None]
            if not live:
                continue
            plan = rng.choice(live)
            self.polls += 1
            try:
                await self._poll(plan, rng, state, self.polls)
            except Exception:
                return  # recorded as a failed request (every_request_completed)

    async def _poll(self, plan: AgentPlan, rng: Any, state: dict[str, str], n: int) -> None:
        link = self.clients.link
        server_id = link.server_id(plan)
        sdk = getattr(link, "sdk", None)
        assert sdk is not None and server_id is not None

        async def attempt(node: str, _: int) -> Any:
            return await sdk(node).agents.retrieve(server_id)

        got = await self.clients._call(
            f"a{plan.number} poll {n}", plan.agent_id, attempt, rng, state
        )
        self.problems += check_polled(got, server_id, plan, self.plans, f"poll {n}")
        ids = tuple(str(i) for i in getattr(got, "message_ids", None) or ())
        self.seen.append((plan.agent_id, f"a{plan.number} poll {n}", ids))


def check_polled(
    got: Any, server_id: str, plan: AgentPlan, plans: Sequence[AgentPlan], what: str
) -> list[str]:
    """Problems with an ``AgentState`` a poll of ``plan``'s agent returned."""
    where = f"a{plan.number} {what}"
    if got.id != server_id:
        return [f"{where}: asked for {server_id}, got agent {got.id}"]
    problems = []
    blocks = list(getattr(got.memory, "blocks", None) or got.blocks or [])
    values = {b.label: b.value or "" for b in blocks}
    if plan.marker not in values.get("persona", ""):
        problems.append(f"{where}: the persona block lacks the agent's marker {plan.marker}")
    for other in plans:
        if other is not plan and any(other.marker in v for v in values.values()):
            problems.append(f"{where}: the memory shows agent a{other.number}'s marker")
    for b in blocks:
        if b.limit is not None and len(b.value or "") > b.limit:
            problems.append(f"{where}: block {b.label} is over its limit {b.limit}")
    return problems


def check_polled_order(
    seen: Sequence[tuple[str, str, Sequence[str]]], histories: Mapping[str, Sequence[Any]]
) -> list[str]:
    """Problems with the order of the ``message_ids`` each poll showed (agent, poll, ids),
    checked against the final read-back (session 12, coreH): an ``AgentState``'s
    ``message_ids`` are the agent's in-context messages *in history order*, so the ids the
    agent's final history (``Msg`` lists) holds must come in the order of their places there
    (a message keeps its place for good: the stored system message is rewritten in place).
    Places are positions in the read-back listing (``Msg.seq`` counts within a page), a
    message shown as several (a reasoning and a tool call under one id) by its first. A pure
    check, run at the end (``polls_consistent``); no request."""
    problems = []
    for agent, what, ids in seen:
        position: dict[str, int] = {}
        for place, m in enumerate(histories.get(agent, ())):
            position.setdefault(m.id, place)
        placed = [(position[i], i) for i in ids if i in position]
        for k in range(1, len(placed)):
            (before, first), (after, second) = placed[k - 1], placed[k]
            if before >= after:
                problems.append(
                    f"{what}: message_ids lists {first} (listed {before} in the history) "
                    f"before {second} (listed {after})"
                )
                break
    return problems
