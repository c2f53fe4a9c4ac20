"""Human-readable reports: failure classes and trimmed tracebacks (deadlocks: _blocked.py)."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from typing import TYPE_CHECKING

import trio

from ._errors import FailureKind, LivenessError, NondeterminismError

if TYPE_CHECKING:
    pass

__all__ = ["classify", "format_exception", "leaf_exceptions"]

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
