"""Pure checks of ``agent_run_records`` (convI): runs, their messages and steps, the runs and
conversations lists, approvals and every prompt's thread, judged against the client's own
record of what it sent and was told (tested on hand-made data in
``tests/workloads/test_agent_run_records.py``).

Nothing here reads kelpie_agent's code: the inputs are what the client was acknowledged
(:class:`Run`, :class:`Answer`) and what the service's read API answered at the end
(:class:`Listed`, the thread listings), and the model's view of every prompt
(:class:`ThreadWatch`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence

import attrs

__all__ = [
    "FAILED",
    "Answer",
    "Compacted",
    "Listed",
    "Run",
    "Shown",
    "ThreadWatch",
    "check_answers",
    "check_calls_answered",
    "check_compactions",
    "check_completion_order",
    "check_filters",
    "check_last_message_order",
    "check_message_runs",
    "check_runs",
    "expected_status",
    "tags_in",
]

# Letta's run status of a finished run, by its stop reason (Letta's StopReasonType.run_status,
# docs/agent.md "Stop reasons"): a run that stopped on an error, on the model's failure or an
# unusable answer, or out of tokens failed; a cancelled one was cancelled; one that ended its
# turn, ran out of steps, ended on a tool rule or waits for an approval completed. Written
# out here, not imported, so the oracle does not share the server's table.
FAILED = (
    "error",
    "llm_api_error",
    "invalid_llm_response",
    "invalid_tool_call",
    "no_tool_call",
    "max_tokens_exceeded",
)
COMPLETED = ("end_turn", "max_steps", "tool_rule", "requires_approval")
TAG = re.compile(r"\bL(\d+)(o|c\d+)-(\d+)\b")
DENIED = "request to call tool denied"
TRUNCATED = "... [truncated]"  # what a clipped summary ends with (docs/http-api.md)


def expected_status(stop_reason: str) -> str | None:
    """The status a run that stopped this way must report (None: not judged here)."""
    if stop_reason == "cancelled":
        return "cancelled"
    if stop_reason in FAILED:
        return "failed"
    if stop_reason in COMPLETED:
        return "completed"
    return None


def tags_in(text: str) -> set[str]:
    return {m.group(0) for m in TAG.finditer(text)}


def thread_of_tag(tag: str) -> str:
    """``L3c1-7`` -> ``L3c1`` (the agent and thread the input was sent to)."""
    return tag.rsplit("-", 1)[0]


@attrs.define
class Run:
    """A run the client was told about: its id, the thread it was sent to (``conversation``
    None: the agent's own history), how it stopped and its usage."""

    run_id: str
    agent_id: str
    conversation: str | None
    stop_reason: str
    usage: tuple[int, int, int]  # prompt tokens, completion tokens, steps
    tag: str
    answer: str | None = None  # the text its reply must hold when it ends end_turn


@attrs.define
class Listed:
    """A run as the service's read API gave it."""

    run_id: str
    agent_id: str
    thread_id: str | None
    status: str
    stop_reason: str | None
    usage: tuple[int, int, int]
    completed_at: float | None
    created_at: float


@attrs.define
class Shown:
    """A message of a thread's listing: id, run, type, tool call id, status and text."""

    id: str
    run_id: str | None
    kind: str
    call_id: str | None = None
    status: str | None = None
    text: str = ""


@attrs.define
class Answer:
    """The client's decision on one call awaiting approval: ``approve``, ``deny`` (with
    ``text`` as the reason) or ``client`` (its own result ``text`` with ``status``)."""

    agent_id: str
    conversation: str | None
    call_id: str
    kind: str
    text: str = ""
    status: str = "success"
    acked: bool = False


def check_runs(
    runs: Iterable[Run],
    records: Mapping[str, Listed | None],
    run_messages: Mapping[str, Sequence[Shown]],
    threads: Mapping[tuple[str, str | None], Sequence[Shown]],
    steps: Mapping[str, Sequence[tuple[int, int]]],
) -> list[str]:
    """Each acknowledged run reads back as it was told: its record (``runs.retrieve``) has
    its agent, thread, stop reason, the status that stop reason means and the usage the
    client got; its messages (``runs.messages.list``) are exactly the messages of its thread
    that carry its run id, in the thread's order, and a run that ended ``end_turn`` holds the
    model's whole reply; its steps are ``usage.step_count`` and add up to its tokens."""
    problems: list[str] = []
    for run in runs:
        rid = run.run_id
        record = records.get(rid)
        if record is None:
            problems.append(f"run {rid} ({run.tag}) was acknowledged but runs.retrieve has none")
            continue
        if record.agent_id != run.agent_id:
            problems.append(f"run {rid} ({run.tag}) is recorded for agent {record.agent_id}")
        if record.thread_id != run.conversation:
            problems.append(
                f"run {rid} ({run.tag}) was sent to {run.conversation or 'the agent itself'} "
                f"but is recorded in {record.thread_id or 'the agent itself'}"
            )
        if record.stop_reason != run.stop_reason:
            problems.append(
                f"run {rid} ({run.tag}) stopped {run.stop_reason} but is recorded "
                f"{record.stop_reason}"
            )
        status = expected_status(run.stop_reason)
        if status is not None and record.status != status:
            problems.append(
                f"run {rid} ({run.tag}) stopped {run.stop_reason}: its status is "
                f"{record.status}, not {status}"
            )
        if record.usage != run.usage:
            problems.append(
                f"run {rid} ({run.tag}) had usage {run.usage} (prompt, completion, steps) "
                f"but is recorded with {record.usage}"
            )
        thread = threads.get((run.agent_id, run.conversation), ())
        mine = [m.id for m in thread if m.run_id == rid]
        ids = {m.id for m in thread}  # the listing leaves hidden turns out; so does this
        listed = [m.id for m in run_messages.get(rid, ()) if m.id in ids or m.run_id != rid]
        if listed != mine:
            problems.append(
                f"run {rid} ({run.tag}): runs.messages.list gives {len(listed)} message(s), "
                f"its thread holds {len(mine)} of the run ({listed[:3]} vs {mine[:3]})"
            )
        if run.answer is not None and run.stop_reason == "end_turn":
            replies = [m.text for m in run_messages.get(rid, ()) if m.kind == "assistant_message"]
            if not any(run.answer in text for text in replies):
                problems.append(
                    f"run {rid} ({run.tag}) ended end_turn with the reply {run.answer!r}, but "
                    f"runs.messages.list holds no such reply"
                )
        stepped = steps.get(rid)
        if stepped is not None:
            prompt = sum(p for p, _ in stepped)
            completion = sum(c for _, c in stepped)
            if (prompt, completion, len(stepped)) != run.usage:
                problems.append(
                    f"run {rid} ({run.tag}): its steps add up to "
                    f"{(prompt, completion, len(stepped))}, its usage is {run.usage}"
                )
    return problems


def check_filters(
    agent_id: str,
    every: Sequence[Listed],
    filtered: Mapping[str, Sequence[str]],
    runs: Iterable[Run],
) -> list[str]:
    """``runs.list`` with a filter lists exactly the runs of the unfiltered list that the
    filter's own field selects, in the same order (``filtered`` keys: ``conversation:<id>``,
    ``stop_reason:<reason>``, ``status:<status>``), and every acknowledged run it selects."""
    problems: list[str] = []
    told = {r.run_id: r for r in runs if r.agent_id == agent_id}
    for key, got in filtered.items():
        field, _, value = key.partition(":")
        if field == "conversation":
            want = [r.run_id for r in every if r.thread_id == value]
            acked = {rid for rid, r in told.items() if r.conversation == value}
        elif field == "stop_reason":
            want = [r.run_id for r in every if r.stop_reason == value]
            acked = {rid for rid, r in told.items() if r.stop_reason == value}
        elif field == "status":
            want = [r.run_id for r in every if r.status == value]
            acked = {rid for rid, r in told.items() if expected_status(r.stop_reason) == value}
        else:
            continue
        if list(got) != want:
            problems.append(
                f"agent {agent_id}: runs.list({field}={value}) lists {len(got)} run(s), the "
                f"unfiltered list has {len(want)} such ({list(got)[:3]} vs {want[:3]})"
            )
        missing = sorted(acked - set(got))
        if missing:
            problems.append(
                f"agent {agent_id}: runs.list({field}={value}) misses acknowledged run(s) "
                f"{missing[:3]}"
            )
    return problems


def check_completion_order(
    agent_id: str, every: Sequence[Listed], listed: Sequence[str], descending: bool
) -> list[str]:
    """``conversations.list(order_by=last_run_completion)``: the conversations with a
    finished run come in the order of their latest run's ``completed_at`` (then id), as
    the runs list reports it."""
    latest: dict[str, float] = {}
    for run in every:
        if run.thread_id is not None and run.completed_at is not None and run.status != "running":
            latest[run.thread_id] = max(latest.get(run.thread_id, 0.0), run.completed_at)
    shown = [c for c in listed if c in latest]
    want = sorted(shown, key=lambda c: (latest[c], c), reverse=descending)
    if shown != want:
        way = "desc" if descending else "asc"
        return [
            f"agent {agent_id}: conversations by last_run_completion ({way}) come as {shown}, "
            f"their latest runs completed as {[(c, latest[c]) for c in want]}"
        ]
    return []


def check_last_message_order(
    agent_id: str,
    every: Sequence[Listed],
    pairs: Sequence[tuple[str, float | None]],
    descending: bool,
    run_messages: Mapping[str, Sequence[Shown]],
) -> list[str]:
    """``conversations.list(order_by=last_message_at)``: ordered by the ``last_message_at``
    each conversation shows (then id), those without one last, either way (Letta's nulls
    last). ``last_message_at`` is the moment of the latest input (docs/http-api.md): an input
    is committed with the run it starts, which has that moment as its ``created_at``, so a
    conversation shows at least the start of its latest run that began with the client's
    input (``run_messages``: the runs read back; a run the client never heard of may be
    later, and a run an approval answer started is no input's)."""
    way = "desc" if descending else "asc"
    problems: list[str] = []
    dated = [(at, c) for c, at in pairs if at is not None]
    undated = [c for c, at in pairs if at is None]
    want = [c for _, c in sorted(dated, reverse=descending)] + sorted(undated, reverse=descending)
    got = [c for c, _ in pairs]
    if got != want:
        problems.append(
            f"agent {agent_id}: conversations by last_message_at ({way}) come as {got}, by the "
            f"dates they show {want}"
        )
    latest: dict[str, float] = {}
    for run in every:
        first = run_messages.get(run.run_id)
        if run.thread_id is not None and first and first[0].kind == "user_message":
            latest[run.thread_id] = max(latest.get(run.thread_id, 0.0), run.created_at)
    shown = dict(pairs)
    for c in sorted(latest):
        at = shown.get(c, latest[c])
        if at is None:
            problems.append(f"agent {agent_id}: conversation {c} has inputs but no last_message_at")
        elif at < latest[c] - 1e-3:
            problems.append(
                f"agent {agent_id}: conversation {c} shows last_message_at {at}, before its "
                f"input that started a run at {latest[c]} ({way})"
            )
    return problems


def check_answers(
    answers: Iterable[Answer], threads: Mapping[tuple[str, str | None], Sequence[Shown]]
) -> list[str]:
    """Each call answered (acknowledged) has exactly one result in its thread, the one its
    decision gives: an approved call ran (not denied), a denied one returned the denial with
    the client's reason, a call the client ran itself returned the client's text with the
    client's status."""
    problems: list[str] = []
    for answer in answers:
        if not answer.acked:
            continue
        shown = threads.get((answer.agent_id, answer.conversation), ())
        results = [
            m for m in shown if m.kind == "tool_return_message" and m.call_id == answer.call_id
        ]
        where = f"call {answer.call_id} ({answer.kind})"
        if len(results) != 1:
            problems.append(f"{where}: {len(results)} result(s) in its thread")
            continue
        result = results[0]
        if answer.kind == "approve":
            if DENIED in result.text:
                problems.append(f"{where}: approved, but it returned {result.text[:120]!r}")
        elif answer.kind == "deny":
            if result.status != "error" or DENIED not in result.text:
                problems.append(f"{where}: denied, but it returned {result.text[:120]!r}")
            elif f"User reason: {answer.text}" not in result.text:
                problems.append(
                    f"{where}: denied with reason {answer.text!r}, the model was told "
                    f"{result.text[:120]!r}"
                )
        elif answer.kind == "client" and (
            not _returned(answer.text, result.text) or result.status != answer.status
        ):
            problems.append(
                f"{where}: the client returned {answer.text!r} ({answer.status}), the "
                f"thread holds {result.text[:120]!r} ({result.status})"
            )
    return problems


def _returned(said: str, stored: str) -> bool:
    """Whether a stored tool result carries exactly the client's text: the ``message`` of
    Letta's packaged result (``{"status", "message", "time"}``), else the text contains it.
    Exact, so an empty result ("") is judged too: ``"" in`` anything is always true."""
    try:
        packaged = json.loads(stored)
    except ValueError:
        return said in stored
    if isinstance(packaged, dict) and isinstance(packaged.get("message"), str):
        return bool(packaged["message"] == said)
    return said in stored


def check_message_runs(
    threads: Mapping[tuple[str, str | None], Sequence[Shown]],
    every: Mapping[str, Sequence[Listed]],
) -> list[str]:
    """Every message of a thread that names a run names one the runs list has, of that
    agent and that thread: a message is never stored without the run it belongs to (an input
    or an approval answer committed apart from its run leaves one that names a run no one
    can read)."""
    problems: list[str] = []
    for (agent, conv), shown in threads.items():
        runs = {r.run_id: r for r in every.get(agent, ())}
        for m in shown:
            if m.run_id is None:
                continue
            run = runs.get(m.run_id)
            if run is None:
                problems.append(
                    f"thread {conv or agent}: {m.kind} {m.id} names run {m.run_id}, which the "
                    "runs list does not have"
                )
            elif run.thread_id != conv:
                problems.append(
                    f"thread {conv or agent}: {m.kind} {m.id} names run {m.run_id}, a run of "
                    f"thread {run.thread_id or agent}"
                )
    return problems


def check_calls_answered(
    threads: Mapping[tuple[str, str | None], Sequence[Shown]],
    every: Mapping[str, Sequence[Listed]],
    answers: Iterable[Answer],
) -> list[str]:
    """Every tool call of a thread has exactly one result there, and every result answers a
    call of the thread. Excused: the calls of a run still running, and those of a run that
    stopped for approval when none of its calls was answered (they wait)."""
    problems: list[str] = []
    runs = {r.run_id: r for listed in every.values() for r in listed}
    answered = {a.call_id for a in answers if a.acked}
    for (agent, conv), shown in threads.items():
        where = f"thread {conv or agent}"
        calls = [m for m in shown if m.kind in ("tool_call_message", "approval_request_message")]
        results: dict[str, int] = {}
        for m in shown:
            if m.kind == "tool_return_message" and m.call_id is not None:
                results[m.call_id] = results.get(m.call_id, 0) + 1
        by_run: dict[str | None, list[Shown]] = {}
        for call in calls:
            by_run.setdefault(call.run_id, []).append(call)
        ids = {c.call_id for c in calls}
        for run_id, mine in by_run.items():
            run = runs.get(run_id or "")
            if run is not None and run.status == "running":
                continue
            waiting = run is not None and run.stop_reason == "requires_approval"
            if waiting and not any(c.call_id in answered for c in mine):
                continue
            for call in mine:
                count = results.get(call.call_id or "", 0)
                if count != 1:
                    problems.append(
                        f"{where}: call {call.call_id} of run {run_id} has {count} result(s)"
                    )
        strays = sorted(c for c in results if c not in ids)
        if strays:
            problems.append(f"{where}: result(s) {strays[:3]} answer no call of the thread")
    return problems


@attrs.define
class Compacted:
    """An acknowledged on-demand compaction (``messages.compact``) and its answer. ``idle``:
    no run of the thread was open (the client's last send there was answered)."""

    thread: str
    mode: str
    clip: int | None
    percentage: float
    idle: bool
    before: int
    after: int
    summary: str
    stored: int | None = None  # the context's size in the database when the answer came (idle)


def check_compactions(compactions: Iterable[Compacted], history_window: int) -> list[str]:
    """What an on-demand compaction answers: never more messages in context after than
    before; when it compacted (the count changed), a summary clipped to ``clip_chars`` is
    exactly that long plus the truncation mark (every summary of this world is longer); on an
    idle thread ``all`` leaves the summary alone in context, and ``sliding_window`` keeps at
    most ``max(1, int(history_window * percentage))`` messages besides the summary."""
    problems: list[str] = []
    for c in compactions:
        where = f"compaction of {c.thread} ({c.mode}, clip {c.clip}, {c.percentage})"
        if c.after > c.before:
            problems.append(f"{where}: {c.before} messages before, {c.after} after")
        if c.stored is not None and c.stored != c.after:
            problems.append(
                f"{where}: answered num_messages_after={c.after}, the stored context holds "
                f"{c.stored} messages"
            )
        if c.before == c.after:
            continue
        if c.clip is not None and (
            len(c.summary) != c.clip + len(TRUNCATED) or not c.summary.endswith(TRUNCATED)
        ):
            problems.append(
                f"{where}: a summary of {len(c.summary)} characters "
                f"(ending {c.summary[-20:]!r}) for clip_chars {c.clip}"
            )
        if not c.idle:
            continue
        if c.mode == "all" and c.after != 1:
            problems.append(f"{where}: {c.after} messages in context after it, not the summary")
        keep = max(1, int(history_window * c.percentage))
        if c.mode == "sliding_window" and c.after - 1 > keep:
            problems.append(
                f"{where}: keeps {c.after - 1} messages besides the summary, more than {keep}"
            )
    return problems


@attrs.define
class ThreadWatch:
    """The model's view of every prompt: a prompt belongs to the thread of its run's input
    (the last probe in it); it must show no input of another thread, and every input of its
    thread that an earlier prompt showed (verbatim, or quoted in a summary)."""

    seen: dict[str, set[str]] = attrs.Factory(dict)
    problems: list[str] = attrs.Factory(list)
    prompts: int = 0

    def problem(self, text: str) -> None:
        if len(self.problems) < 20:
            self.problems.append(text)

    def forget(self, thread: str) -> None:
        """A compaction with ``clip_chars`` may cut quotes out of the summary: the thread's
        inputs count again from its next prompt on."""
        self.seen.pop(thread, None)

    def prompt(self, thread: str, inputs: Iterable[str], text: str) -> None:
        """``thread``: the run input's thread; ``inputs``: the tags of the inputs the prompt
        shows as messages; ``text``: everything the prompt shows."""
        self.prompts += 1
        tags = tags_in(text)
        foreign = sorted(t for t in tags if thread_of_tag(t) != thread)
        if foreign:
            self.problem(f"a prompt of thread {thread} shows {foreign[:3]} of another thread")
        known = self.seen.setdefault(thread, set())
        lost = sorted(known - tags)
        if lost:
            self.problem(
                f"a prompt of thread {thread} no longer shows input(s) {lost[:3]} that an "
                "earlier prompt showed (neither in context nor in the summary)"
            )
        known.update(t for t in inputs if thread_of_tag(t) == thread)
