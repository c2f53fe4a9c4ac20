"""The ``PYTHONHASHSEED`` a process runs under (replay lines name it; D13)."""

from __future__ import annotations

import os
import sys

__all__ = ["current_hashseed"]


def current_hashseed() -> str | None:
    """The ``PYTHONHASHSEED`` this process runs under, or ``None`` when it is random (so a
    replay in another process might not match)."""
    value = os.environ.get("PYTHONHASHSEED", "")
    if value in ("", "random"):
        return "0" if sys.flags.hash_randomization == 0 else None
    return value
