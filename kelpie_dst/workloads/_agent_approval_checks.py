"""The approvals workload's plan, log, model policy and oracle (kept apart from the workload).

Properties, judged from the simulated external service's record of executions and what the
clients were answered:

- an approved request's call took effect: it executed at least once, and never after the
  client had the answer's result (a re-run after its result was committed is a double effect);
- a denied request's call never executed;
- no call executed before the client sent its answer (the approval request ran nothing);
- the asking run ended ``requires_approval`` with one approval request for that call, the
  answered run ``end_turn`` with the call's result (``paid K``, or the denial);
- an approval for an unknown call, and an answer replayed under a new ``otid``, are refused.
"""

from __future__ import annotations

import random
import re

import attrs

from kelpie_agent.llm import LlmRequest

from ..shims.llm import Call, Reply
from ..shims.llm._turns import latest_turn

__all__ = ["SCHEMA", "ApprovalLog", "ApprovalPolicy", "Request", "check", "paired"]

SCHEMA = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}
_PAY = re.compile(r"\bpay (a\d+r\d+)\b")


@attrs.define
class ApprovalPolicy:
    """``pay K`` calls the pay tool for ``K`` (for every other request, with a ``note`` call
    that needs no approval in the same step); after a result it answers in plain text."""

    tool: str
    note: str

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        turn = latest_turn(request)
        if turn.kind == "tool_result":
            return ("Done.",)
        ask = _PAY.search(turn.text)
        if ask is None or request.tool(self.tool) is None:
            return ("Nothing to pay.",)
        key = ask.group(1)
        pay = Call(self.tool, {"key": key})
        return (pay, Call(self.note, {"key": key})) if paired(key) else (pay,)


def paired(key: str) -> bool:
    """Whether the step of request ``key`` also calls ``note`` (odd request numbers)."""
    return int(key.rsplit("r", 1)[1]) % 2 == 1


@attrs.define
class Request:
    key: str
    agent_id: str
    approve: bool
    probe: bool  # also send an unknown approval first, and replay the answer after
    phase: str = "ask"  # ask, answer, done
    call_id: str = ""
    probed: bool = False
    sent_at: float | None = None  # the answer's first attempt
    acked_at: float | None = None
    nodes: list[str] = attrs.Factory(list)  # the node of each attempt, in order
    ran_ok: bool = True  # False: the approved call's result was a tool error (it may not run)
    note_ok: bool = True  # ... and the same for the note call
    request_id: str = ""  # the approval request message's id (the legacy answer names it)


@attrs.define
class ApprovalLog:
    tool: str = ""
    note: str = ""
    legacy: float = 0.0  # the share of answers in Letta's legacy form (approve=...)
    agents: list[str] = attrs.Factory(list)
    requests: list[Request] = attrs.Factory(list)
    held: dict[str, Request] = attrs.Factory(dict)  # node -> the request it is working on
    executed: list[tuple[str, float]] = attrs.Factory(list)  # (key, time) per execution
    failures: list[str] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)
    refusals: int = 0
    turn: int = 0

    def take(self, node: str) -> Request | None:
        """The next step of some agent no other node works on (agents take turns)."""
        busy = {r.agent_id for r in self.held.values()}
        for offset in range(len(self.agents)):
            agent = self.agents[(self.turn + offset) % len(self.agents)]
            if agent in busy:
                continue
            step = next(
                (r for r in self.requests if r.agent_id == agent and r.phase != "done"), None
            )
            if step is not None:
                self.turn += offset + 1
                self.held[node] = step
                step.nodes.append(node)
                return step
        return None

    def release(self, node: str) -> None:
        self.held.pop(node, None)

    def moved(self) -> int:
        """Requests whose steps ran on more than one node (a crash, or a client's pick)."""
        return sum(1 for r in self.requests if len(set(r.nodes)) > 1)

    def finished(self) -> bool:
        return all(r.phase == "done" for r in self.requests)


def check(log: ApprovalLog) -> list[str]:
    """The oracle's findings (empty: all is well)."""
    problems = list(log.problems)
    runs: dict[str, list[float]] = {}
    for key, at in log.executed:
        runs.setdefault(key, []).append(at)
    planned = {r.key: r for r in log.requests}
    for key in sorted(runs):
        if key.removeprefix("note:") not in planned:
            problems.append(f"pay ran for {key}, which no client asked for")
    for req in log.requests:
        problems += _check_request(req, runs.get(req.key, []), runs.get(f"note:{req.key}", []))
    return problems


def _check_request(req: Request, times: list[float], notes: list[float]) -> list[str]:
    problems: list[str] = []
    if req.sent_at is None:
        if times or notes:
            problems.append(f"{req.key}: pay or note ran before any answer was sent")
        return problems
    early = [t for t in times + notes if t < req.sent_at]
    if early:
        problems.append(f"{req.key}: a call ran at t={early[0]:.3f}, before the answer")
    if not req.approve and times:
        problems.append(f"{req.key}: denied, yet pay ran {len(times)} time(s)")
    if req.acked_at is None:
        return problems
    if req.approve and req.ran_ok and not times:
        problems.append(f"{req.key}: approved and answered, yet pay never ran")
    if paired(req.key) and req.note_ok and not notes:
        problems.append(f"{req.key}: answered, yet note (no approval needed) never ran")
    late = [t for t in times + notes if t > req.acked_at]
    if late:
        problems.append(
            f"{req.key}: a call ran again at t={late[0]:.3f}, after its answer was "
            f"acknowledged at t={req.acked_at:.3f}"
        )
    return problems
