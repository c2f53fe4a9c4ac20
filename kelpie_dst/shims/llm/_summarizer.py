"""How every simulated model answers a summary request (context compaction).

A request whose system prompt starts with :data:`~kelpie_agent.llm.SUMMARIZER_SYSTEM` is not a
step: whatever the policy, the model answers with a short factual summary of the transcript
(how many messages, then every user message quoted, clipped, in order, the earlier
summary's quotes first), so compaction gets a summary that says something checkable about
what it replaced: an oracle can tell whether every evicted input is accounted for.
"""

from __future__ import annotations

import re

from kelpie_agent.llm import SUMMARIZER_SYSTEM, LlmRequest

__all__ = ["is_summary_request", "summarize"]

_USER = "[user] "
_CLIP = 60
_QUOTE = re.compile(r"«([^»]*)»")


def is_summary_request(request: LlmRequest) -> bool:
    return request.system.startswith(SUMMARIZER_SYSTEM) and not request.tools


def summarize(request: LlmRequest) -> str:
    transcript = request.messages[-1].text if request.messages else ""
    lines = transcript.splitlines()
    earlier = transcript.split("Messages to summarize:", 1)[0]
    said = _QUOTE.findall(earlier)
    said += [
        line[len(_USER) :][:_CLIP].replace("«", "").replace("»", "")
        for line in lines
        if line.startswith(_USER)
    ]
    counted = sum(1 for line in lines if line.startswith("["))
    parts = [f"Summary of {counted} messages."]
    if said:
        parts.append("The user said: " + " ".join(f"«{s}»" for s in said))
    return " ".join(parts)
