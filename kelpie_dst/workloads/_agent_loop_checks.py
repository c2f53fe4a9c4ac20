"""The agent loop's properties, judged at its boundaries (``agent_loop``, loopH).

Pure functions over what the workload recorded: the client's sends and streams, the agents'
histories read back at the end, and what the simulated model saw. Each states what a user of
the loop may rely on (Letta's loop contract, docs/agent.md), never how Kelpie computes it.

* **A run ends as its last answer did** (:func:`check_endings`): a run told ``end_turn`` ends
  with the model's whole answer; a run told ``max_tokens_exceeded`` ends with a cut one.
* **Budgets are kept exactly** (:func:`check_endings`): a run that stopped with ``max_steps``
  made exactly the ``max_steps`` model calls the request allowed; one that stopped with
  ``invalid_llm_response`` made ``max_empty_responses + 1`` (the model was reminded
  ``max_empty_responses`` times); one that stopped with ``no_tool_call`` made
  ``no_tool_call_nudges + 1``.
* **Streamed pieces add up to what is stored** (:func:`check_token_streams`): for every stored
  message whose pieces were streamed, the pieces under its id are of its kind and concatenate
  to its text (a tool call: its name and its arguments).
* **A stream shows only what is stored** (:func:`check_streams_stored`): a message a stream
  without token streaming showed the client (a step's text and calls, a tool's result) is in
  the agent's history at the end, whether the request then succeeded or failed.
* **A tool's failure is reported as one** (:func:`check_mcp_verdicts`): the result of a call
  of an MCP tool whose server answers every call with ``isError`` is stored failed, whatever
  the words of the error.
* **A well-formed call is never refused** (:func:`check_valid_calls_run`): the model calls
  only tools it was given, with arguments its schema accepts, so a call whose stored arguments
  are a JSON object is never answered with an ``invalid_tool_call`` refusal (the world's only
  broken calls are those ``max_tokens`` cut, whose arguments do not parse).
* **Every call gets one result** (:func:`check_one_result_per_call`): no tool call has two
  stored results, and every stored result answers a stored call (a resumed run never runs a
  finished call again).
* The model-side properties (the run's input in view, the prompt within the context window,
  retry-after kept) are checked as the model is called and arrive here as problems.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs

__all__ = [
    "Piece",
    "Send",
    "Stored",
    "check_endings",
    "check_mcp_verdicts",
    "check_one_result_per_call",
    "check_streams_stored",
    "check_token_streams",
    "check_valid_calls_run",
]


@attrs.frozen
class Piece:
    """One streamed message event: its id, kind (``message_type``) and text (a tool call's
    arguments piece; ``name`` is the tool's name when the piece carries it)."""

    id: str
    kind: str
    text: str
    name: str | None = None


@attrs.frozen
class Stored:
    """A stored message as the history shows it."""

    id: str
    kind: str
    text: str
    name: str | None = None
    status: str | None = None  # a tool return's
    call_id: str | None = None  # a tool call's or a tool return's tool_call_id
    run: str | None = None  # its run_id (the budgets of _agent_budgets)
    step: str | None = None  # its step_id
    agent: str | None = None  # the agent whose history holds it


@attrs.define
class Send:
    """One send of the client and what it was told."""

    agent: str
    shape: str
    tag: str
    max_steps: int
    mode: str  # "send", "stream" (no token streaming) or "tokens"
    marker: str = ""  # the end of the model's whole answer (shape long)
    acked: bool = False
    stop_reason: str | None = None
    steps: int | None = None
    reply: str | None = None  # the run's last assistant text
    pieces: list[Piece] = attrs.Factory(list)
    failed: str | None = None
    seen: int = -1  # model attempts observed when it was acknowledged (_agent_budgets)
    run: str | None = None  # the run it was answered with


_LOOP_ENDINGS = frozenset(
    ("end_turn", "max_steps", "no_tool_call", "invalid_llm_response", "max_tokens_exceeded")
)
"""Stop reasons the loop chooses itself (not a failure of the model, the storage or a tool)."""
_BUDGET_ENDINGS = frozenset(("end_turn", "max_steps"))
"""What a memgpt run whose model never calls a tool must not end with (it ends no_tool_call);
``max_tokens_exceeded`` (a cut answer, a fault of the model) and ``invalid_llm_response`` (an
answer that came back empty) may end any run."""


def check_endings(
    sends: Iterable[Send], *, max_empty_responses: int, no_tool_call_nudges: int
) -> list[str]:
    problems: list[str] = []
    for s in sends:
        if not s.acked:
            continue
        where = f"{s.agent} {s.shape} {s.tag} (max_steps {s.max_steps})"
        if s.shape in ("long", "chat") and s.reply is not None and s.marker:
            whole = s.reply.rstrip().endswith(s.marker)
            if s.stop_reason == "end_turn" and not whole:
                problems.append(
                    f"{where}: told end_turn, but the reply is cut ({s.reply[-40:]!r} lacks the "
                    f"answer's end {s.marker!r})"
                )
            if s.stop_reason == "max_tokens_exceeded" and whole:
                problems.append(f"{where}: told max_tokens_exceeded, but the reply is whole")
        if s.stop_reason == "max_steps" and s.steps != s.max_steps:
            problems.append(f"{where}: stopped with max_steps after {s.steps} model calls")
        if s.stop_reason == "invalid_llm_response" and s.steps != max_empty_responses + 1:
            problems.append(
                f"{where}: stopped with invalid_llm_response after {s.steps} model calls; "
                f"{max_empty_responses} reminders allow {max_empty_responses + 1}"
            )
        allowed = min(no_tool_call_nudges + 1, s.max_steps)  # a nudge needs a step after it
        if s.stop_reason == "no_tool_call" and s.steps != allowed:
            problems.append(
                f"{where}: stopped with no_tool_call after {s.steps} model calls; "
                f"{no_tool_call_nudges} nudge(s) allow {allowed}"
            )
        if s.shape == "thoughts" and s.stop_reason in _BUDGET_ENDINGS:
            problems.append(
                f"{where}: a model that never calls a tool ended the run {s.stop_reason}, "
                f"not no_tool_call"
            )
        if s.shape == "required" and s.stop_reason in _LOOP_ENDINGS:
            # text, a reminder, the required tool (again while it fails), then a reply: a run
            # may end before the tool succeeded only at its last step (a reminder needs a step
            # after it), so with max_steps 1 the text ends it
            early = s.stop_reason == "end_turn" and s.steps is not None and s.steps < s.max_steps
            if early and s.reply != f"done {s.tag}":
                problems.append(
                    f"{where}: ended end_turn after {s.steps} model calls with an uncalled "
                    f"required_before_exit tool (last reply {s.reply!r})"
                )
            if s.max_steps == 1 and s.stop_reason == "max_steps":
                problems.append(
                    f"{where}: ended {s.stop_reason} after {s.steps} model calls; a text answer "
                    "at the last step ends the run end_turn (no reminder fits)"
                )
        never = s.shape == "empty" and s.max_steps > max_empty_responses + 1
        if never and s.stop_reason in ("end_turn", "max_steps"):
            problems.append(f"{where}: a model that never answers ended the run {s.stop_reason}")
    return problems


def _joined(pieces: Sequence[Piece]) -> tuple[set[str], str, str | None]:
    kinds = {p.kind for p in pieces}
    text = "".join(p.text for p in pieces)
    name = next((p.name for p in pieces if p.name), None)
    return kinds, text, name


def check_token_streams(sends: Iterable[Send], stored: Mapping[str, Stored]) -> list[str]:
    problems: list[str] = []
    for s in sends:
        if s.mode != "tokens":
            continue
        by_id: dict[str, list[Piece]] = {}
        for piece in s.pieces:
            by_id.setdefault(piece.id, []).append(piece)
        for mid, pieces in by_id.items():
            message = stored.get(mid)
            if message is None:  # an attempt that failed, or a blank text never stored
                continue
            kinds, text, name = _joined(pieces)
            where = f"{s.agent} {s.tag}: message {mid}"
            if kinds != {message.kind}:
                problems.append(f"{where} is stored as {message.kind}, streamed as {sorted(kinds)}")
            elif text != message.text:
                problems.append(f"{where}: streamed {text!r}, stored {message.text!r}")
            elif message.name is not None and name != message.name:
                problems.append(f"{where}: streamed as a call of {name}, stored of {message.name}")
    return problems


SHOWN = ("assistant_message", "reasoning_message", "tool_call_message", "tool_return_message")


def check_streams_stored(sends: Iterable[Send], stored: Mapping[str, Stored]) -> list[str]:
    problems: list[str] = []
    for s in sends:
        if s.mode != "stream":
            continue
        for piece in s.pieces:
            if piece.kind in SHOWN and piece.id not in stored:
                state = "acknowledged" if s.acked else f"failed: {s.failed}"
                problems.append(
                    f"{s.agent} {s.tag} ({state}): the stream showed {piece.kind} {piece.id} "
                    f"({piece.text[:40]!r}), which is not stored"
                )
    return problems


def check_mcp_verdicts(stored: Mapping[str, Stored], failing_tool: str) -> list[str]:
    return [
        f"a call of {failing_tool} (its server answers isError) is stored as {m.status}: "
        f"{m.text[:60]!r}"
        for m in stored.values()
        if m.kind == "tool_return_message" and m.name == failing_tool and m.status != "error"
    ]


def check_valid_calls_run(
    stored: Mapping[str, Stored], exempt: Callable[[Stored, Stored], bool] | None = None
) -> list[str]:
    calls: dict[str | None, Stored] = {
        m.call_id: m for m in stored.values() if m.kind == "tool_call_message"
    }
    problems = []
    for m in stored.values():
        if m.kind != "tool_return_message" or m.status != "error":
            continue
        if "invalid_tool_call" not in m.text or m.call_id is None:
            continue
        call = calls.get(m.call_id)
        if call is None or (exempt is not None and exempt(call, m)):
            continue
        try:
            args = json.loads(call.text)
        except ValueError:
            continue  # a call cut at max_tokens: refused rightly
        if isinstance(args, dict):
            problems.append(
                f"a well-formed call of {call.name} ({call.text[:60]}) was refused: "
                f"{m.text[:120]!r}"
            )
    return problems


def check_one_result_per_call(stored: Mapping[str, Stored]) -> list[str]:
    calls = {m.call_id for m in stored.values() if m.kind == "tool_call_message"}
    seen: dict[str, str] = {}
    problems = []
    for m in stored.values():
        if m.kind != "tool_return_message" or m.call_id is None:
            continue
        if m.call_id in seen:
            problems.append(
                f"tool call {m.call_id} ({m.name}) has two results: {seen[m.call_id]} and {m.id}"
            )
        seen[m.call_id] = m.id
        if m.call_id not in calls:
            problems.append(f"result {m.id} ({m.name}) answers no stored call ({m.call_id})")
    return problems
