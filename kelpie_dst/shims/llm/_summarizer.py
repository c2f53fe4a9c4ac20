"""How every simulated model answers a summary request (context compaction).

A request whose system prompt starts with :data:`~kelpie_agent.llm.SUMMARIZER_SYSTEM` is not a
step: whatever the policy, the model answers with a short factual summary of the transcript
(the earlier summary's gist, then what the user said), so compaction gets a summary that
says something checkable about what it replaced.
"""

from __future__ import annotations

from kelpie_agent.llm import SUMMARIZER_SYSTEM, LlmRequest

__all__ = ["is_summary_request", "summarize"]

_USER = "[user] "
_CLIP = 60


def is_summary_request(request: LlmRequest) -> bool:
    return request.system.startswith(SUMMARIZER_SYSTEM) and not request.tools


def summarize(request: LlmRequest) -> str:
    transcript = request.messages[-1].text if request.messages else ""
    lines = transcript.splitlines()
    said = [line[len(_USER) :][:_CLIP] for line in lines if line.startswith(_USER)]
    counted = sum(1 for line in lines if line.startswith("["))
    parts = [f"Summary of {counted} messages."]
    if transcript.startswith("Earlier summary:"):
        parts.append("It continues an earlier summary.")
    if said:
        parts.append("The user said: " + "; ".join(said) + ".")
    return " ".join(parts)
