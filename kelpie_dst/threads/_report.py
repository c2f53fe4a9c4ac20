"""Where a thread is: the user's frame on its stack, for deadlock and watchdog reports.

A thread blocked on a simulated primitive sits in kelpie_dst's code, under ``threading`` or
``queue``, under the user's call. Reports name the innermost frame of the user's code (not the
standard library, site-packages, trio or kelpie_dst), with its source line.
"""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
from collections.abc import Iterator
from types import FrameType

__all__ = ["describe_frame", "is_library", "site_key", "stack_of", "task_frames", "user_frame"]

_KELPIE_DST = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# kelpie_dst's sample programs and workloads are written as users write theirs
_USER_PARTS = tuple(_KELPIE_DST + part + os.sep for part in ("examples", "workloads"))


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    dirs |= {os.path.dirname(os.__file__)}
    return tuple(sorted(os.path.abspath(d) + os.sep for d in dirs))


_LIBRARY = _library_dirs()
_CACHE: dict[str, bool] = {}


def is_library(filename: str) -> bool:
    """True for code that is not the user's: the standard library, site-packages, frozen or
    generated code, and kelpie_dst itself (but not its example programs and workloads)."""
    known = _CACHE.get(filename)
    if known is not None:
        return known
    path = os.path.abspath(filename)
    if filename.startswith("<"):
        result = True
    elif path.startswith(_USER_PARTS):
        result = False
    else:
        result = path.startswith(_KELPIE_DST) or any(path.startswith(d) for d in _LIBRARY)
        result = result or f"{os.sep}site-packages{os.sep}" in path
    _CACHE[filename] = result
    return result


def stack_of(ident: int | None) -> list[FrameType]:
    """The frames of thread ``ident``, outermost first (empty if it is gone)."""
    if ident is None:
        return []
    frame: FrameType | None = sys._current_frames().get(ident)
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    frames.reverse()
    return frames


def _inner_to_outer(frames: list[FrameType]) -> Iterator[FrameType]:
    return reversed(frames)


def user_frame(frames: list[FrameType]) -> FrameType | None:
    """The innermost frame of the user's code; failing that (a thread whose target is a
    library function, such as ``queue.Queue.get``), the outermost frame of what the thread
    runs; failing that, the innermost frame."""
    for frame in _inner_to_outer(frames):
        if not is_library(frame.f_code.co_filename):
            return frame
    body = task_frames(frames)
    return body[0] if body else (frames[-1] if frames else None)


def task_frames(frames: list[FrameType]) -> list[FrameType]:
    """The frames of what runs, without the machinery around it: a thread's bootstrap
    (``threading``, kelpie_dst), or the trio loop's host, run loop and task step."""
    start = 0
    for index, frame in enumerate(frames):
        code = frame.f_code
        file = code.co_filename.replace("\\", "/")
        bootstrap = file.endswith("/threading.py") and code.co_name in _BOOTSTRAP
        if bootstrap or (file.endswith("/trio/_core/_run.py") and code.co_name == "unrolled_run"):
            start = index + 1
    return [f for f in frames[start:] if not _is_kelpie(f) and not _is_outcome(f)]


_BOOTSTRAP = ("_bootstrap", "_bootstrap_inner", "run")


def _is_outcome(frame: FrameType) -> bool:
    return frame.f_code.co_filename.replace("\\", "/").endswith("/outcome/_impl.py")


def _is_kelpie(frame: FrameType) -> bool:
    path = os.path.abspath(frame.f_code.co_filename)
    return path.startswith(_KELPIE_DST) and not path.startswith(_USER_PARTS)


def describe_frame(frame: FrameType | None) -> str:
    """``file:line in function: source``."""
    if frame is None:
        return "(unknown: the thread has no Python frames)"
    code = frame.f_code
    where = f"{code.co_filename}:{frame.f_lineno} in {code.co_name}"
    source = linecache.getline(code.co_filename, frame.f_lineno).strip()
    return f"{where}: {source}" if source else where


def site_key(frame: FrameType | None) -> str:
    """``module:line``, the same on every machine (for trace events)."""
    if frame is None:
        return "?"
    return f"{frame.f_globals.get('__name__', '?')}:{frame.f_lineno}"
