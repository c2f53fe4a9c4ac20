"""Values at the documented limits, through the production server's defaults (``limits``, rtN).

Session 18's blind test planted a default ``max_body_bytes`` of 16 KiB (docs/http-server.md:
16 MiB) and a block label pattern one character short of Letta's 1-100; no scenario sent a
body over 16 KiB to a server with the default options (``agent_http_wire`` runs its own small
limits) or a label of 100 characters. With ``limits`` on (via http), once the agents' clients
are done (the faults go on), one more client, on random nodes, hopping after failures:

- makes a standalone block whose label has :data:`LABEL_MAX` characters and whose value is
  :data:`VALUE_CHARS` characters (the default block limit, Letta's
  ``CORE_MEMORY_BLOCK_CHAR_LIMIT``), non-ASCII among them, so its body is several times 16 KiB;
- makes an agent with a memory block of the same label and value, and reads that block back by
  its label through the agent's core-memory route, and the standalone one by its id;
- asks for a block whose label has one character more, and for one whose label starts with
  ``.`` (both outside Letta's pattern).

The property (``limits_accepted``): what is at a documented limit is accepted and reads back
exactly as sent (label, value); what is one over is refused with a 4xx and made nothing. The
server's defaults are what ``kelpie serve`` runs (the agents workload's nodes override only
timeouts), so a default that differs from the documented one shows here.
"""

from __future__ import annotations

from typing import Any

import letta_client

from ._agent_walker import SdkWalker

__all__ = ["LABEL_MAX", "VALUE_CHARS", "LimitsLog", "LimitsWalker", "check_limits"]

MARK = "mark-a908"
"""The walker's marker (``_agent_prompt.AGENT_MARK``); no planned agent has number 908."""
LABEL_MAX = 100  # Letta: a block label is 1-100 characters
VALUE_CHARS = 20_000  # Letta's CORE_MEMORY_BLOCK_CHAR_LIMIT, the default block limit
AGENT = "limits-agent"


def _label(n: int, head: str = "lim_") -> str:
    return (head + "x" * n)[:n]


def _value() -> str:
    """:data:`VALUE_CHARS` characters, a third of them three UTF-8 bytes each."""
    unit = "kelp 海 tide "  # 12 characters
    text = (f"{MARK} " + unit * (VALUE_CHARS // len(unit) + 1))[:VALUE_CHARS]
    assert len(text) == VALUE_CHARS
    return text


class LimitsLog:
    def __init__(self) -> None:
        self.problems: list[str] = []
        # (route, label sent, label shown, value shown)
        self.shown: list[tuple[str, str, str, str]] = []
        self.refused: list[tuple[str, int | None, bool]] = []  # (what, status, made)


def check_limits(log: LimitsLog) -> list[str]:
    """The findings: what the walker recorded (a refusal of a value at a limit ends its phase)
    and every read-back compared with what was sent."""
    problems = list(log.problems)
    value = _value()
    for route, label, shown_label, shown_value in log.shown:
        if shown_label != label:
            problems.append(f"{route}: label {shown_label[:20]!r}... is not the one sent")
        if shown_value != value:
            problems.append(
                f"{route}: value of {len(shown_value)} characters is not the {len(value)} sent"
            )
    for what, status, made in log.refused:
        if status is None or not 400 <= status < 500:
            problems.append(f"{what}: answered {status}, not a 4xx refusal")
        if made:
            problems.append(f"{what}: refused, yet a block with its label exists")
    return problems


class LimitsWalker(SdkWalker):
    """See the module docstring."""

    PREFIX = "limits"

    def __init__(self, clients: Any, rng: Any) -> None:
        super().__init__(clients, rng)
        self.log = LimitsLog()
        self.problems = self.log.problems

    async def run(self) -> None:
        await self._phases((self._standalone, self._agent, self._over), lambda _: True)

    async def _find_block(self, sdk: Any, label: str) -> Any:
        page = await sdk.blocks.list(label=label, limit=10)
        found = [b for b in page.items if b.label == label]
        return found[0] if found else None

    async def _standalone(self) -> None:
        label, value = _label(LABEL_MAX), _value()

        async def make(sdk: Any) -> Any:
            return await sdk.blocks.create(label=label, value=value)

        made = await self._create("block at the limits", lambda s: self._find_block(s, label), make)
        block = await self._sdk("blocks.retrieve", made.id)
        self.log.shown.append(("blocks.retrieve", label, str(block.label), str(block.value)))

    async def _agent(self) -> None:
        label, value = _label(LABEL_MAX, "mem_"), _value()

        async def find(sdk: Any) -> Any:
            page = await sdk.agents.list(name=AGENT, limit=1, order="asc")
            return page.items[0] if page.items else None

        async def make(sdk: Any) -> Any:
            return await sdk.agents.create(
                name=AGENT,
                include_base_tools=False,
                memory_blocks=[
                    {"label": "human", "value": f"The limits walker ({MARK}).", "limit": 4000},
                    {"label": label, "value": value},
                ],
            )

        agent = await self._create("agent with a block at the limits", find, make)
        block = await self._sdk("agents.blocks.retrieve", label, agent_id=agent.id)
        shown = ("agents.blocks.retrieve", label, str(block.label), str(block.value))
        self.log.shown.append(shown)

    async def _over(self) -> None:
        for what, label in (
            ("a label of 101 characters", _label(LABEL_MAX + 1)),
            ("a label starting with '.'", "." + _label(LABEL_MAX - 1)[1:]),
        ):
            status: int | None = None

            async def attempt(sdk: Any, _: int, label: str = label) -> int | None:
                try:
                    await sdk.blocks.create(label=label, value="over")
                except letta_client.APIStatusError as error:
                    if self.clients.link.retryable(error):
                        raise
                    return int(error.status_code)
                return 200

            status = await self._call(f"block with {what}", attempt)
            made = await self._sdk("blocks.list", limit=1000)  # (a label filter over the
            # pattern is itself refused)
            exists = any(b.label == label for b in made.items)
            self.log.refused.append((what, status, exists))
