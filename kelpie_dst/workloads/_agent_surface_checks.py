"""The API SURFACE oracle's pure checks (``surface``, via HTTP; ``_agent_surface`` drives).

What a user of Letta's REST API would state about the areas no other scenario drives, each
judged against the workload's own model or the documented contract (docs/http-api.md), never
against a server helper:

* **An update changes what it gives, and only that.** After every ``PATCH /v1/blocks/{id}``
  and ``PATCH /v1/agents/{id}/core-memory/blocks/{label}`` (its answer and reads after it)
  the block is the model: the fields the update gave have their new values, *falsy ones
  included* (``""``, ``false``, ``{}``), and every omitted field keeps its value. Feedback
  on a step without ``tags`` keeps the step's tags.
* **A delete leaves nothing behind.** A deleted standalone block is a 404, is in no block
  list, and no agent it was attached to lists it any more; a deleted file is a 404 and in no
  file list (the folder's, the agent's); a deleted folder is a 404, in no folder list (all,
  the agent's), and the agent lists none of its files. Folder updates are held to the model as
  block updates are, and ``folders.list(name=...)`` finds the folder under its last name.
* **Every list is ordered by its documented key and paged without loss.** A folder's files
  are listed by upload time (``created_at``, then id): an unpaged read is sorted so, and every
  walk in pages of one or two following ``after`` cursors (or, for an agent's files,
  ``next_cursor`` while ``has_more``), either way, is exactly that reference (reversed for
  ``desc``). A filtered list (steps by ``has_feedback``, ``feedback``, ``tags`` and run, and a
  run's steps; an agent's files by ``is_open``) is the reference filtered by the documented
  predicate over the model; a file the workload closed is listed closed.
* **A stream always says how it ended.** Every stream that the server finished ends with
  ``stop_reason`` and ``usage_statistics``, whatever ``include_return_message_types`` asked
  for, and its message frames are only of the types asked for. A stream the client leaves
  after its first frame stops the stream, not the run: the run is not ``cancelled``, and once
  ``completed`` its messages are in the history.
* **Export then import is an equivalent agent with fresh ids.** The import has a new id, the
  name with ``_copy``, the same blocks (label, value, limit, description, read-only) under ids
  none of which is the source's, the same tool rules (type, tool, children, limit) and the
  same history (message types in order); writing the copy's memory leaves the source's alone.
  An export with ``scrub_messages`` carries no messages; an import with ``name`` and
  ``strip_messages`` is named exactly so and has no history from the file.
* **The HTTP layer is transparent.** A block created with a chunked request body reads back
  with the value sent; a path with percent-encoded letters names what the decoded path names;
  a read sent right after a request whose body the app never read (a 404, a 405), on the same
  node, answers what it asked.
* **Every error answers the documented status and says whether to retry.** A body or query
  the schema refuses is a 422, a well-formed request the state refuses a 400, an unknown id a
  404, an unknown route a 404, a method the path does not serve a 405 whose ``Allow`` names
  the path's methods, and every error carries ``x-should-retry`` (``false`` for all of these).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = [
    "BlockState",
    "ErrorSeen",
    "FileSeen",
    "FolderState",
    "PageWalk",
    "StepSeen",
    "StreamSeen",
    "SurfaceLog",
    "check_surface",
    "want_steps",
]

BLOCK_FIELDS = ("label", "value", "limit", "description", "read_only", "metadata")


@attrs.frozen
class BlockState:
    """A standalone block's fields as the API shows them (``description`` "" is ``None``)."""

    label: str
    value: str
    limit: int
    description: str | None
    read_only: bool
    metadata: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> BlockState:
        return cls(
            str(fields.get("label") or ""),
            str(fields.get("value") or ""),
            int(fields.get("limit") or 0),
            fields.get("description") or None,
            bool(fields.get("read_only")),
            tuple(sorted(dict(fields.get("metadata") or {}).items())),
        )


@attrs.frozen
class FolderState:
    """A folder's fields as the API shows them (``""`` is ``None``)."""

    name: str
    description: str | None
    instructions: str | None
    metadata: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> FolderState:
        return cls(
            str(fields.get("name") or ""),
            fields.get("description") or None,
            fields.get("instructions") or None,
            tuple(sorted(dict(fields.get("metadata") or {}).items())),
        )


@attrs.frozen
class StepSeen:
    id: str
    feedback: str | None
    tags: tuple[str, ...]
    run_id: str = ""


@attrs.frozen
class FileSeen:
    id: str
    name: str
    created_at: float  # epoch seconds, as listed


@attrs.frozen
class PageWalk:
    """A list read in pages: what (area and filter), the order, the page size, the ids."""

    area: str
    params: tuple[tuple[str, Any], ...]
    order: str
    size: int
    got: tuple[str, ...]

    def label(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.params) or "no filter"
        return f"{self.area} ({shown}; {self.order}, pages of {self.size})"


@attrs.frozen
class StreamSeen:
    """A stream the server finished (the SDK's iteration ended): the types asked for and
    the ``message_type`` of every frame, in order."""

    what: str
    asked: tuple[str, ...]
    frames: tuple[str, ...]


@attrs.frozen
class ErrorSeen:
    """A request made to fail: the status the contract names, the one answered, and the
    ``x-should-retry`` header (``None``: absent)."""

    what: str
    want: int
    status: int
    retry: str | None
    allow: str | None = None  # the ``Allow`` header (of a 405)


@attrs.define
class SurfaceLog:
    """What the workload did and read (``_agent_surface``); the checks judge it."""

    block_updates: list[tuple[str, BlockState, BlockState]] = attrs.Factory(list)
    folder_updates: list[tuple[str, FolderState, FolderState]] = attrs.Factory(list)
    folder_name: tuple[str, str] | None = None  # (folder, its name after the updates)
    named_folders: list[tuple[str, tuple[str, ...]]] = attrs.Factory(list)  # folders.list(name=)
    deleted_block: str | None = None  # acknowledged delete
    deleted_reads: list[tuple[str, bool]] = attrs.Factory(list)  # (read, lists the block)
    steps_ref: list[StepSeen] = attrs.Factory(list)  # the agent's steps, asc, read last
    steps_model: dict[str, tuple[str | None, tuple[str, ...]]] = attrs.Factory(dict)
    steps_read: list[StepSeen] = attrs.Factory(list)  # each rated step, retrieved
    step_walks: list[PageWalk] = attrs.Factory(list)
    step_history: list[tuple[str, str, str | None]] = attrs.Factory(list)  # id, type, step
    step_messages: dict[str, tuple[tuple[str, str], ...]] = attrs.Factory(dict)  # listed
    folders_ref: list[FileSeen] = attrs.Factory(list)  # every folder, asc, one page
    folder_walks: list[PageWalk] = attrs.Factory(list)
    uploaded: list[str] = attrs.Factory(list)  # acknowledged uploads (file ids)
    files_ref: list[FileSeen] = attrs.Factory(list)  # the folder's files, asc, one page
    open_ref: dict[str, bool] = attrs.Factory(dict)  # the agent's files: id -> is_open
    closed: list[str] = attrs.Factory(list)  # files the workload closed (acknowledged)
    file_walks: list[PageWalk] = attrs.Factory(list)
    streams: list[StreamSeen] = attrs.Factory(list)
    left_runs: list[tuple[str, str, str | None, int]] = attrs.Factory(list)  # run, status,
    # stop reason, messages stored: a run whose stream the client left after its first frame
    copies: list[str] = attrs.Factory(list)  # problems of the export/import round trip
    http: list[str] = attrs.Factory(list)  # problems of the HTTP layer (chunked, encoded)
    errors: list[ErrorSeen] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)  # found while driving (a failed request, ...)


def _check_blocks(log: SurfaceLog) -> list[str]:
    problems = []
    for what, seen, model in log.block_updates:
        if seen != model:
            changed = [
                f"{f}={getattr(seen, f)!r} (want {getattr(model, f)!r})"
                for f in BLOCK_FIELDS
                if getattr(seen, f) != getattr(model, f)
            ]
            problems.append(f"{what}: {', '.join(changed)}")
    for what, seen_folder, model_folder in log.folder_updates:
        if seen_folder != model_folder:
            problems.append(f"{what}: {seen_folder}, want {model_folder}")
    if log.folder_name is not None:
        folder, name = log.folder_name
        for asked, got in log.named_folders:
            want = (folder,) if asked == name else ()
            if got != want:
                problems.append(f"folders.list(name={asked!r}): got {list(got)}, want {list(want)}")
    for what, listed in log.deleted_reads:
        if listed:
            problems.append(f"deleted, but {what} shows it")
    return problems


def _keep_step(
    step: StepSeen,
    params: Mapping[str, Any],
    model: Mapping[str, tuple[str | None, tuple[str, ...]]],
) -> bool:
    feedback, tags = model.get(step.id, (None, ()))
    return (
        ("run_id" not in params or step.run_id == params["run_id"])
        and ("trace_ids" not in params or step.run_id in params["trace_ids"])
        and ("has_feedback" not in params or (feedback is not None) == params["has_feedback"])
        and ("feedback" not in params or feedback == params["feedback"])
        and all(t in tags for t in params.get("tags", ()))
    )


def want_steps(log: SurfaceLog, walk: PageWalk) -> list[str]:
    """What a walk of the agent's steps must list: the reference filtered by the model."""
    params = dict(walk.params)
    want = [s.id for s in log.steps_ref if _keep_step(s, params, log.steps_model)]
    return want[::-1] if walk.order == "desc" else want


def _check_steps(log: SurfaceLog) -> list[str]:
    problems = []
    for seen in [*log.steps_read, *log.steps_ref]:
        model = log.steps_model.get(seen.id)
        if model is not None and (seen.feedback, tuple(sorted(seen.tags))) != (
            model[0],
            tuple(sorted(model[1])),
        ):
            problems.append(
                f"step {seen.id}: feedback {seen.feedback!r}, tags {list(seen.tags)}; want "
                f"{model[0]!r}, {list(model[1])} (feedback without tags keeps the tags)"
            )
    for walk in log.step_walks:
        want = want_steps(log, walk)
        if list(walk.got) != want:
            problems.append(f"{walk.label()}: got {list(walk.got)}, want {want}")
    for step, listed in log.step_messages.items():
        own = tuple(sorted({(m, kind) for m, kind, owner in log.step_history if owner == step}))
        if listed != own:
            problems.append(
                f"steps.messages.list({step}): {list(listed)}, but the history shows the "
                f"step's messages as {list(own)}"
            )
    return problems


def _check_files(log: SurfaceLog) -> list[str]:
    problems = []
    ref = [f.id for f in log.files_ref]
    keys = [(f.created_at, f.id) for f in log.files_ref]
    if keys != sorted(keys):
        shown = [(f.name, f.created_at) for f in log.files_ref]
        problems.append(f"the folder's files (asc) are not by upload time: {shown}")
    for file_id in log.uploaded:
        if ref.count(file_id) != 1:
            problems.append(f"uploaded file {file_id} is listed {ref.count(file_id)} times")
    for file_id in log.closed:
        if log.open_ref.get(file_id) is not False:
            problems.append(f"file {file_id} was closed, but the agent's files show it open")
    keys = [(f.created_at, f.id) for f in log.folders_ref]
    if keys != sorted(keys):
        problems.append(f"the folders (asc) are not by creation: {log.folders_ref}")
    folders = [f.id for f in log.folders_ref]
    for walk in log.folder_walks:
        want = folders[::-1] if walk.order == "desc" else folders
        if list(walk.got) != want:
            problems.append(f"{walk.label()}: got {list(walk.got)}, want {want}")
    for walk in log.file_walks:
        params = dict(walk.params)
        want = [
            f for f in ref if "is_open" not in params or log.open_ref.get(f) is params["is_open"]
        ]
        if walk.order == "desc":
            want.reverse()
        if list(walk.got) != want:
            problems.append(f"{walk.label()}: got {list(walk.got)}, want {want}")
    return problems


_FINAL = ("stop_reason", "usage_statistics")


def _check_streams(log: SurfaceLog) -> list[str]:
    problems = []
    for stream in log.streams:
        tail = tuple(f for f in stream.frames if f in _FINAL)
        if tail != _FINAL or stream.frames[-2:] != _FINAL:
            problems.append(
                f"{stream.what}: the finished stream does not end with stop_reason then "
                f"usage_statistics (frames {list(stream.frames)})"
            )
        extra = sorted({f for f in stream.frames if f not in (*_FINAL, "ping", *stream.asked)})
        if extra:
            problems.append(f"{stream.what}: asked for {list(stream.asked)}, got {extra} too")
    for run, status, stop, stored in log.left_runs:
        if stop == "cancelled" or (status == "completed" and not stored):
            problems.append(
                f"run {run}, whose stream the client left: {status} ({stop}) with {stored} "
                "message(s) stored; a disconnect stops the stream, not the run"
            )
    return problems


def _check_errors(log: SurfaceLog) -> list[str]:
    problems = []
    for error in log.errors:
        if error.status != error.want:
            problems.append(
                f"{error.what}: answered {error.status}, the contract says {error.want}"
            )
        if error.want == 405 and not (
            error.allow is not None
            and {"GET", "POST"} <= {m.strip() for m in error.allow.split(",")}
            and "DELETE" not in error.allow
        ):
            problems.append(f"{error.what}: Allow is {error.allow!r}, want the path's GET, POST")
        if error.retry != "false":
            problems.append(
                f"{error.what}: x-should-retry is {error.retry!r}, the contract says 'false' "
                "(letta-client would resend it)"
            )
    return problems


def check_surface(log: SurfaceLog) -> list[str]:
    """Every property of the module docstring, against ``log``."""
    return [
        *log.problems,
        *_check_blocks(log),
        *_check_steps(log),
        *_check_files(log),
        *_check_streams(log),
        *log.copies,
        *log.http,
        *_check_errors(log),
    ]
