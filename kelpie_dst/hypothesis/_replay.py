"""Replay lines for failing examples, and the environment variable that replays one.

A failing example is identified by Hypothesis's choice sequence (what ``@reproduce_failure``
encodes): the simulation seed is one of those choices, so the blob pins the seed, every step
and every argument. ``KELPIE_HYPOTHESIS_REPRODUCE='Machine:VERSION:BLOB'`` makes
:func:`~kelpie_dst.hypothesis.run_machine` (and ``Machine.TestCase``) run exactly that example,
without editing the test.
"""

from __future__ import annotations

import os

import hypothesis
from hypothesis.control import current_build_context

from .._errors import UsageError

__all__ = ["REPRODUCE_ENV", "replay_note", "reproduction_for"]

REPRODUCE_ENV = "KELPIE_HYPOTHESIS_REPRODUCE"


def _current_blob() -> str | None:
    try:
        from hypothesis.core import encode_failure
    except ImportError:  # pragma: no cover - a Hypothesis release that moved it
        return None
    return encode_failure(current_build_context().data.choices).decode("ascii")


def _pytest_target() -> str | None:
    current = os.environ.get("PYTEST_CURRENT_TEST")
    if not current:
        return None
    return current.rsplit(" (", 1)[0]


def replay_note(machine: type) -> str:
    """The line that replays the example being run (call it during the final, failing run)."""
    blob = _current_blob()
    target = _pytest_target()
    if blob is None:
        return "kelpie_dst: replay: run the test again (Hypothesis replays it from its database)"
    value = f"{machine.__qualname__}:{hypothesis.__version__}:{blob}"
    if target is None:
        return f"kelpie_dst: replay: run this machine again with {REPRODUCE_ENV}='{value}'"
    return f"kelpie_dst: replay: {REPRODUCE_ENV}='{value}' python -m pytest '{target}'"


def reproduction_for(machine: type) -> tuple[str, bytes] | None:
    """``(version, blob)`` from the environment when it names ``machine``, else ``None``."""
    text = os.environ.get(REPRODUCE_ENV, "").strip()
    if not text:
        return None
    name, _, rest = text.partition(":")
    version, _, blob = rest.partition(":")
    if not (name and version and blob):
        raise UsageError(f"{REPRODUCE_ENV} must look like 'Machine:VERSION:BLOB', got {text!r}")
    if name != machine.__qualname__:
        return None
    return version, blob.encode("ascii")
