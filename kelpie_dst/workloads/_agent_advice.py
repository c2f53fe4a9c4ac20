"""A client that sends what it cannot make idempotent, and follows the server's retry advice
(``retry_advice``, via HTTP).

With ``retry_advice`` on, once the agents' clients are done (the faults go on), one more client
makes an agent of its own and sends it messages **without an otid**, and inserts archival
passages (the API has no idempotency key for them), each text once. It retries a request only
when the server's answer says ``x-should-retry: true`` (docs/http-api.md: a 503 whose outcome
is unknown is retryable exactly when repeating the same body cannot apply it twice), on another
node, at most ``TRIES`` times; a request that got no answer (a cut connection, a timeout) or
any other error is given up: the client cannot know whether it landed. After ``SETTLE`` virtual
seconds it reads the agent's history and passages back (retried reads).

:func:`check_advice` (``retry_advice_honest``) judges what a careful client sees: each text is
stored at most once (a client that follows the advice never gets a message or a passage twice:
the server neither retried a non-idempotent request behind its back after an unknown outcome,
nor told the client to), and each text whose request was answered with success is stored.
"""

from __future__ import annotations

from typing import Any

import attrs
import httpx
import letta_client
import trio

from ._agent_readback import _items
from ._agent_walker import SdkWalker

__all__ = ["AdviceLog", "AdviceWalker", "check_advice"]

AGENT = "advice-agent"
MARK = "mark-a909"  # no planned agent has number 909
SENDS = 6
INSERTS = 8
TRIES = 4
SETTLE = 12.0  # virtual seconds before the read-back: a run cut off may still finish
WORDS = ("plover", "dunlin", "knot", "sanderling", "curlew", "whimbrel", "godwit", "redshank")


@attrs.define
class Sent:
    kind: str  # "message" or "passage"
    text: str
    answers: list[str] = attrs.field(factory=list)  # per attempt: "ok", "503 retry=true", ...
    acked: bool = False


@attrs.define
class AdviceLog:
    sent: list[Sent] = attrs.field(factory=list)
    stored: dict[str, dict[str, int]] = attrs.field(factory=dict)  # kind -> text -> count
    problems: list[str] = attrs.field(factory=list)


def check_advice(log: AdviceLog) -> list[str]:
    """Each text stored at most once; an acknowledged one stored."""
    out = list(log.problems)
    for sent in log.sent:
        stored = log.stored.get(sent.kind)
        if stored is None:  # never read back
            continue
        count = stored.get(sent.text, 0)
        trail = ", ".join(sent.answers)
        if count > 1:
            out.append(
                f"{sent.kind} {sent.text!r} stored {count} times; the client sent it "
                f"{len(sent.answers)} time(s), retrying only when told to ({trail})"
            )
        if sent.acked and count == 0:
            out.append(f"{sent.kind} {sent.text!r} acknowledged but not stored ({trail})")
    return out


class AdviceWalker(SdkWalker):
    """Non-idempotent requests sent once, retried on advice only (see the module docstring)."""

    PREFIX = "advice"

    def __init__(self, clients: Any, rng: Any) -> None:
        super().__init__(clients, rng)
        self.log = AdviceLog()
        self.problems = self.log.problems
        self.agent = ""

    async def run(self) -> None:
        await self._phases(
            (self._make, self._send_all, self._read_back),
            lambda phase: phase == self._make or bool(self.agent),
        )

    async def _make(self) -> None:
        async def find(sdk: Any) -> Any:
            page = await sdk.agents.list(name=AGENT, limit=1, order="asc")
            return page.items[0] if page.items else None

        async def make(sdk: Any) -> Any:
            return await sdk.agents.create(
                name=AGENT,
                include_base_tools=False,
                memory_blocks=[
                    {"label": "human", "value": f"The advice walker ({MARK}).", "limit": 4000}
                ],
            )

        made = await self._create(f"agent {AGENT}", find, make)
        self.agent = str(made.id)

    async def _send_all(self) -> None:
        plan = [("message", n) for n in range(SENDS)] + [("passage", n) for n in range(INSERTS)]
        self.rng.shuffle(plan)
        for kind, n in plan:
            text = f"{MARK} {kind} {n}: the {WORDS[n % len(WORDS)]} on the mudflat"
            await self._once(Sent(kind, text))

    async def _once(self, sent: Sent) -> None:
        """Send until answered with success, retrying only on ``x-should-retry: true``."""
        self.log.sent.append(sent)
        nodes = self.clients.world.node_names
        for _ in range(TRIES):
            self.requests += 1
            sdk = self.clients.link.sdk(self.state["node"])
            try:
                with trio.fail_after(self.clients.timeout):
                    if sent.kind == "message":
                        await sdk.agents.messages.create(
                            self.agent, messages=[{"role": "user", "content": sent.text}]
                        )
                    else:
                        await sdk.agents.passages.create(self.agent, text=sent.text)
            except letta_client.APIStatusError as error:
                advice = error.response.headers.get("x-should-retry")
                sent.answers.append(f"{error.status_code} x-should-retry={advice}")
                if advice != "true":
                    return
            except (trio.TooSlowError, letta_client.APIConnectionError, httpx.TransportError) as e:
                sent.answers.append(f"no answer ({type(e).__name__})")
                return
            else:
                sent.answers.append("ok")
                sent.acked = True
                return
            if len(nodes) > 1:
                self.state["node"] = self.rng.choice([x for x in nodes if x != self.state["node"]])
            await trio.sleep(0.5 + self.rng.random())

    async def _read_back(self) -> None:
        await trio.sleep(SETTLE)
        history = await self._sdk("agents.messages.list", self.agent, order="asc", limit=1000)
        messages: dict[str, int] = {}
        for m in _items(history):
            if m.message_type == "user_message" and isinstance(m.content, str):
                messages[m.content] = messages.get(m.content, 0) + 1
        passages: dict[str, int] = {}
        for p in _items(await self._sdk("agents.passages.list", self.agent, limit=1000)):
            passages[str(p.text)] = passages.get(str(p.text), 0) + 1
        self.log.stored = {"message": messages, "passage": passages}
