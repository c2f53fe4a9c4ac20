"""The handover client's contract (``handover_contract``), as pure checks over its log.

What a user of the API may state, whatever node each request reached and whatever the service
retried on its own (docs/service.md, "Retries inside the service"; docs/oracles.md):

* **A missing thing is a 404.** Detaching a tool or a block the agent does not have, or
  deleting a passage that does not exist, answers 404. The one exception is documented: after
  an attempt whose outcome is unknown (a lost lease, storage giving up mid-way), the service
  retries a detach or a delete and takes "not found" as its earlier attempt's success. So a
  200 is excused only if the server logged a retry of its own (``service.retry``) while the
  request was under way.
* **A tool run through the API runs once per request that reached the server.** The ``notes``
  block holds each run's tag at most as many times as the client sent that run (its own
  retries first look for the tag and stop), and at least once if a run was answered.
* **A retried send is answered by its own run.** Sending again a message with the ``otid`` of
  an earlier send answers exactly what the first send was answered: the same messages, by id
  and type, in order, whatever runs came in between.
* **A run the client was given exists.** ``runs.retrieve`` of the run ``create_async``
  answered finds it at once (on another node), and it ends.
* **An agent file's history survives import and export.** The copy's export holds the
  document's messages (system aside) in order: roles, content parts (type and text), each
  step's calls in one assistant message (id, name, arguments), each result under its call's id
  with its status; the copy's history lists every result with the status the file gave it.
* **A sandbox's files follow its agent.** A file an answered ``run_code`` wrote, read on
  other nodes (the agent moved, its sandbox restored from the stored image), is whole in every
  read that succeeds, and no read fails to restore the image (the world has no sandbox faults
  and no storage corruption, so nothing can damage it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

__all__ = [
    "FileRoundTrip",
    "HandoverLog",
    "Missing",
    "Replay",
    "TagRun",
    "check_handover",
    "message_shape",
]

Shape = tuple[Any, ...]
BIG = 300_001  # the big file's size (_agent_handover.BIG)


@attrs.frozen
class Missing:
    """A request for something that is not there: its answer (404, or 200) and its window."""

    what: str
    status: int
    started: float
    ended: float


@attrs.define
class TagRun:
    """``core_memory_append`` of ``tag``, run through the API: the runs the client sent and
    its answer (a status; "found" when a retry found the tag already there)."""

    tag: str
    sent: int = 0
    answer: str | None = None


@attrs.frozen
class Replay:
    """A send and the same send again (its otid): each answer's messages (id, type)."""

    what: str
    first: tuple[tuple[str, str], ...]
    again: tuple[tuple[str, str], ...]


@attrs.frozen
class FileRoundTrip:
    """The history the client wrote into an agent file, the copy's export of it, and the
    statuses of the copy's tool results (tool_call_id, status) as its history lists them."""

    what: str
    written: tuple[Shape, ...]
    exported: tuple[Shape, ...]
    statuses: tuple[tuple[str, str], ...]


@attrs.define
class HandoverLog:
    missing: list[Missing] = attrs.field(factory=list)
    tag_runs: list[TagRun] = attrs.field(factory=list)
    notes: Any = None  # the notes block's value at the end
    replays: list[Replay] = attrs.field(factory=list)
    runs_seen: list[tuple[str, str, str | None]] = attrs.field(factory=list)
    files: list[FileRoundTrip] = attrs.field(factory=list)
    sandbox: list[tuple[str, str, str]] = attrs.field(factory=list)  # (write/read, status, text)
    problems: list[str] = attrs.field(factory=list)


def _parts(content: object) -> tuple[tuple[str, str], ...]:
    if isinstance(content, str):
        return (("text", content),) if content else ()
    out = []
    for part in content if isinstance(content, list) else ():
        if isinstance(part, Mapping):
            kind = str(part.get("type"))
            out.append((kind, str(part.get("reasoning" if kind == "reasoning" else "text", ""))))
    return tuple(out)


def message_shape(message: Mapping[str, Any]) -> Shape:
    """What a user reads in one message of an agent file: its role, its content parts, its
    calls (id, name, arguments), for a result the call it answers and its status, and for an
    approval response each decision (type, call, approve, reason, status)."""
    calls = tuple(
        (str(c.get("id")), str(c["function"].get("name")), str(c["function"].get("arguments")))
        for c in message.get("tool_calls") or ()
    )
    returns = tuple(
        (str(r.get("tool_call_id")), str(r.get("status")))
        for r in message.get("tool_returns") or ()
    )
    approvals = tuple(
        tuple(str(a.get(k)) for k in ("type", "tool_call_id", "approve", "reason", "status"))
        for a in message.get("approvals") or ()
    )
    return (
        str(message.get("role")),
        _parts(message.get("content")),
        calls,
        message.get("tool_call_id"),
        returns,
        approvals,
    )


def _retried_between(retries: Iterable[float], start: float, end: float) -> bool:
    return any(start <= t <= end for t in retries)


def check_handover(log: HandoverLog, retries: Iterable[float] = ()) -> list[str]:
    """Every broken promise of the log (module docstring); ``retries``: when a server logged
    a retry of its own (``service.retry``)."""
    times = sorted(retries)
    problems = list(log.problems)
    for m in log.missing:
        if m.status != 404 and not _retried_between(times, m.started, m.ended):
            problems.append(
                f"{m.what}: answered {m.status}, not 404 (no retry of the server's own "
                f"between {m.started:.3f} and {m.ended:.3f} s)"
            )
    notes = str(log.notes or "")
    for run in log.tag_runs:
        found = notes.count(run.tag)
        if found > run.sent:
            problems.append(
                f"core_memory_append {run.tag}: in the notes block {found} times, but the "
                f"client sent the run {run.sent} time(s): a run was repeated behind its back"
            )
        if run.answer is not None and found == 0:
            problems.append(
                f"core_memory_append {run.tag}: answered {run.answer!r} but not in the notes block"
            )
    for r in log.replays:
        if r.first != r.again:
            problems.append(
                f"{r.what}: answered {list(r.again)}, not the first answer {list(r.first)}"
            )
    for run_id, when, status in log.runs_seen:
        if status is None:
            problems.append(f"runs.retrieve({run_id}) {when}: 404 for a run create_async answered")
        elif when == "at the end" and status in ("created", "running"):
            problems.append(f"run {run_id} still {status} at the end")
    for f in log.files:
        if f.written != f.exported:
            problems.append(
                f"{f.what}: the copy's export holds {list(f.exported)}, not the document's "
                f"{list(f.written)}"
            )
        wanted = tuple(ret for shape in f.written if shape[0] == "tool" for ret in shape[4])
        if f.statuses != wanted:
            problems.append(
                f"{f.what}: the copy's history lists its tool results as {list(f.statuses)}, "
                f"not {list(wanted)}"
            )
    big = f"size {BIG}"
    for kind, status, text in log.sandbox:
        if kind != "read":
            continue
        if status == "success" and big not in text:
            problems.append(f"run_code read the big file back as {text[:120]!r}, not {big!r}")
        if "SandboxRestoreError" in text or "could not be restored" in text:
            problems.append(f"run_code could not restore the agent's sandbox: {text[:200]!r}")
    return problems
