"""The blocked-tasks report of a liveness failure: where each of the program's tasks waits.

The simulator's own tasks (the run's root, node incarnation wrappers with nothing of the user's
on their stack, the process, clock and network nemeses, scheduled restarts and resumes) are left
out, and so are tasks that only wait for their children: what remains are the user's tasks, each
with the innermost frame of the user's code it is awaiting in.
"""

from __future__ import annotations

import linecache
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

import trio

from ._nodes import NODE
from ._trace import sanitize

if TYPE_CHECKING:
    from ._sim import Simulation

__all__ = ["blocked_tasks_report"]

_RUN: Any = trio._core._run
# The simulator's core: tasks whose stacks hold nothing else are machinery.
_SIMULATOR = ("/kelpie_dst/_", "/kelpie_dst/net/", "/kelpie_dst/threads/")
_MACHINERY = ("/trio/", "/outcome/", *_SIMULATOR)
# Also skipped when looking for the user's await location (a shim is not the user's code).
_NOT_USER = (*_MACHINERY, "/kelpie_dst/shims/")
_TRIO = ("/trio/", "/outcome/")
_WRAPPER = "/kelpie_dst/_nodes.py"  # _in_node: the wrapper of every node.start_soon task


def _walk(task: trio.lowlevel.Task) -> Iterator[trio.lowlevel.Task]:
    yield task
    for nursery in task.child_nurseries:
        for child in sorted(nursery.child_tasks, key=lambda t: t._counter):
            yield from _walk(child)


def _in(frame: FrameType, places: tuple[str, ...]) -> bool:
    filename = frame.f_code.co_filename.replace("\\", "/")
    return any(place in filename for place in places)


def _waits_for_children(frame: FrameType) -> bool:
    code = frame.f_code
    return code.co_name == "__aexit__" and code.co_filename.replace("\\", "/").endswith(
        "trio/_core/_run.py"
    )


def _is_machinery(frames: list[FrameType]) -> bool:
    """True for the simulator's own tasks: its outermost frame (past the node wrapper) is the
    simulator's, and no frame is the user's."""
    outer = [f for f in frames if f.f_code.co_name != "_in_node" or not _in(f, (_WRAPPER,))]
    return bool(outer) and _in(outer[0], _SIMULATOR)


def blocked_tasks_report(sim: Simulation) -> str:
    """One entry per blocked user task: its name, its node, and the user's line it waits at."""
    runner = getattr(_RUN.GLOBAL_RUN_CONTEXT, "runner", None)
    if runner is None or runner.init_task is None:
        return "(the run has already ended)"
    lines = []
    for task in _walk(runner.init_task):
        if task.name.startswith("<"):  # trio's own system tasks
            continue
        awaiting = list(task.iter_await_frames())
        frames = [frame for frame, _ in awaiting]
        if any(_waits_for_children(frame) for frame in frames):
            continue
        user = [(f, line) for f, line in awaiting if not _in(f, _NOT_USER)]
        if not user:
            if not awaiting or _is_machinery(frames):
                continue
            # a shim's own task, or a task that is trio.sleep_forever itself
            user = [(f, line) for f, line in awaiting if not _in(f, _MACHINERY)]
            user = user or [(f, n) for f, n in awaiting if not _in(f, _TRIO)] or awaiting[-1:]
        node = task.context.get(NODE, None)
        frame, lineno = user[-1]
        code = frame.f_code
        where = f"{code.co_filename}:{lineno} in {code.co_name}"
        source = linecache.getline(code.co_filename, lineno).strip()
        if source:
            where += f": {source}"
        state = " (node paused)" if node is not None and node.paused else ""
        node_name = node.name if node is not None else "-"
        lines.append(f"  task {sanitize(task.name)!r} on node {node_name!r}{state}\n    at {where}")
    threads = sim.threads.threads_report()
    if not lines and not threads:
        return "  (no user tasks are alive)"
    if threads:
        lines += ["  simulated threads:", *threads]
    return "\n".join(lines)
