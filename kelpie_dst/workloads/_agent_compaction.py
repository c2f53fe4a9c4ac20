"""The oracle of context compaction (``scenarios/agent_compaction.toml``).

When an agent's context fills up, its oldest messages are summarized into a summary message
and leave the prompt; the summary stands in for them. What must hold, whichever line a bug is
on, is seen in the prompts themselves: **once the model has been shown an input, every later
prompt of that agent shows it again**, as a turn still in context or quoted in the summary (the
simulated summarizer quotes every user message it summarizes, earlier summaries' quotes
first). A summary that drops a message, a summary missing from the prompt, a context cut
without a summary, a compaction that loses its summary in a crash: each makes an input vanish
from the prompt. Whether the evicted messages stay searchable is checked by the workload's
``conversation`` directives (a search for an earlier input must find it, ``tool_outcomes_correct``),
and whether they stay stored by ``no_acknowledged_message_lost``.

:class:`ContextAuditor` is fed by the :class:`~._agent_oracles.PromptAuditor` (it sees every
request the model gets); :func:`check_summaries` reads the stored histories (a compaction
stored twice); both ``check_*`` are pure, for tests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from kelpie_agent.llm import LlmRequest, TextBlock, ToolCall, ToolResult

from ._agent_checks import Msg

__all__ = ["ContextAuditor", "check_context", "check_summaries"]

_INPUT = re.compile(r"^(tag-a\d+-(?:(c\d+f?)-)?m\d+) ")
_EVICTED = re.compile(r"prior messages \((\d+) of \d+ total messages\) have been hidden")
_MAX_PROBLEMS = 50


def _texts(request: LlmRequest) -> Iterable[str]:
    for message in request.messages:
        for block in message.content:
            if isinstance(block, TextBlock):
                yield block.text
            elif isinstance(block, ToolCall):
                yield block.arguments
            elif isinstance(block, ToolResult):
                yield block.content


def check_context(shown: Iterable[str], prompt: str, agent: int) -> list[str]:
    """The inputs of ``shown`` (tags already shown to agent ``agent``'s model) that
    ``prompt`` no longer shows."""
    return [
        f"a{agent}'s prompt lost input {t} (neither in context nor in the summary)"
        for t in sorted(shown)
        if t not in prompt
    ]


def check_summaries(histories: Mapping[str, Sequence[Msg]]) -> list[str]:
    """Each stored summary takes *more* messages out of context than the one before it (the
    count of evicted messages it states grows): two summaries of the same messages mean a
    compaction was stored twice (its summary committed apart from its context window, and
    done again after a crash)."""
    problems = []
    for agent, history in histories.items():
        before: tuple[int, str] | None = None
        for m in history:
            found = _EVICTED.search(m.text) if m.type == "user_message" else None
            if found is None:
                continue
            evicted = int(found.group(1))
            if before is not None and evicted <= before[0]:
                problems.append(
                    f"{agent}: summary {m.id} evicts {evicted} messages, no more than summary "
                    f"{before[1]} before it ({before[0]}): a compaction was stored twice"
                )
            before = (evicted, m.id)
    return problems


class ContextAuditor:
    """Per agent, the inputs its model has been shown; every later step request must show
    them all. Counts the summary requests too."""

    def __init__(self) -> None:
        self.shown: dict[tuple[int, str], set[str]] = {}
        self.summaries: dict[int, int] = {}
        self.problems: list[str] = []

    def summary(self, agent: int) -> None:
        self.summaries[agent] = self.summaries.get(agent, 0) + 1

    def step(self, request: LlmRequest, agent: int, where: str) -> None:
        texts = list(_texts(request))
        prompt = "\n".join(texts)
        inputs = [
            found
            for message in request.messages
            if message.role == "user"
            for block in message.content
            if isinstance(block, TextBlock)
            for found in [_INPUT.match(block.text)]
            if found is not None
        ]
        # each thread (the agent's own history, or a conversation: _agent_threads) has its
        # own context; the newest input says which thread the step runs in
        thread = (inputs[-1].group(2) or "") if inputs else ""
        shown = self.shown.setdefault((agent, thread), set())
        for problem in check_context(shown, prompt, agent):
            if len(self.problems) < _MAX_PROBLEMS:
                self.problems.append(f"{where}: {problem}")
        shown.update(found.group(1) for found in inputs)

    def metrics(self) -> Mapping[str, int]:
        return {
            "compaction.summaries": sum(self.summaries.values()),
            "compaction.agents": len(self.summaries),
        }
