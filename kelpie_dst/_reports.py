"""Human-readable reports: blocked tasks on a deadlock, failure classes, trimmed tracebacks."""

from __future__ import annotations

import linecache
import traceback
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import trio

from ._errors import FailureKind, LivenessError, NondeterminismError
from ._nodes import NODE
from ._trace import sanitize

if TYPE_CHECKING:
    from ._sim import Simulation

__all__ = ["blocked_tasks_report", "classify", "format_exception", "leaf_exceptions"]

_RUN: Any = trio._core._run
# Frames from these files are machinery, not the user's program.
_HIDDEN = (
    "/trio/",
    "/outcome/",
    "/kelpie_dst/_runner.py",
    "/kelpie_dst/_run.py",
    "/kelpie_dst/_stepping.py",
    "/kelpie_dst/_nodes.py",
    "/kelpie_dst/_guards.py",
    "/kelpie_dst/pytest_plugin.py",
    "/kelpie_dst/scenario/_runtime.py",
    "/kelpie_dst/scenario/_workload.py",
)


def _walk(task: trio.lowlevel.Task) -> Iterator[trio.lowlevel.Task]:
    yield task
    for nursery in task.child_nurseries:
        for child in sorted(nursery.child_tasks, key=lambda t: t._counter):
            yield from _walk(child)


def blocked_tasks_report(sim: Simulation) -> str:
    """One line per leaf task (a task without open nurseries): its node and where it waits."""
    runner = getattr(_RUN.GLOBAL_RUN_CONTEXT, "runner", None)
    if runner is None or runner.init_task is None:
        return "(the run has already ended)"
    lines = []
    for task in _walk(runner.init_task):
        if task.name.startswith("<") or task.name == "kelpie_dst._run._root":
            continue
        frames = list(task.iter_await_frames())
        if any(_waits_for_children(frame) for frame, _ in frames):
            continue
        user = [f for f in frames if not any(h in f[0].f_code.co_filename for h in _HIDDEN)]
        if not user:
            user = frames[-1:]
        if not user:
            continue
        node = task.context.get(NODE, None)
        frame, lineno = user[-1]
        code = frame.f_code
        where = f"{code.co_filename}:{lineno} in {code.co_name}"
        source = linecache.getline(code.co_filename, lineno).strip()
        if source:
            where += f": {source}"
        state = ""
        if node is not None and node.paused:
            state = " (node paused)"
        node_name = node.name if node is not None else "-"
        lines.append(f"  task {sanitize(task.name)!r} on node {node_name!r}{state}\n    at {where}")
    if not lines:
        return "  (no user tasks are alive)"
    return "\n".join(lines)


def _waits_for_children(frame: Any) -> bool:
    code = frame.f_code
    return bool(code.co_name == "__aexit__" and code.co_filename.endswith("trio/_core/_run.py"))


def leaf_exceptions(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from leaf_exceptions(inner)
    else:
        yield error


def _is_cancel(error: BaseException) -> bool:
    return isinstance(error, trio.Cancelled)


def classify(error: BaseException) -> tuple[FailureKind, BaseException]:
    """The failure class of ``error`` and the leaf exception that best explains it."""
    leaves = [e for e in leaf_exceptions(error) if not _is_cancel(e)] or [error]
    for kind, types in (
        (FailureKind.NONDETERMINISM, (NondeterminismError,)),
        (FailureKind.INVARIANT, (AssertionError,)),
        (FailureKind.LIVENESS, (LivenessError,)),
    ):
        for leaf in leaves:
            if isinstance(leaf, types):
                return kind, leaf
    return FailureKind.CRASH, leaves[0]


def _trim(te: traceback.TracebackException) -> None:
    kept = [f for f in te.stack if not any(h in f.filename for h in _HIDDEN)]
    te.stack = traceback.StackSummary.from_list(kept)
    for inner in getattr(te, "exceptions", None) or ():
        _trim(inner)
    if te.__cause__ is not None:
        _trim(te.__cause__)
    if te.__context__ is not None:
        _trim(te.__context__)


def format_exception(error: BaseException) -> str:
    """The tracebacks of the leaf exceptions of ``error`` (nursery groups unwrapped, cancellations
    dropped), without the simulator's and trio's own frames."""
    leaves = [e for e in leaf_exceptions(error) if not _is_cancel(e)] or [error]
    parts = []
    for leaf in leaves[:5]:
        te = traceback.TracebackException.from_exception(leaf, capture_locals=False)
        _trim(te)
        parts.append("".join(te.format()).rstrip())
    if len(leaves) > 5:
        parts.append(f"... and {len(leaves) - 5} more exceptions")
    return "\n\n".join(parts)
