"""Module-level conveniences that find the running simulation, like ``trio.current_time``."""

from __future__ import annotations

from typing import Any

from . import _buggify
from ._sim import Simulation

__all__ = ["current_simulation", "log"]


def current_simulation() -> Simulation | None:
    """The simulation running in this thread, or ``None`` outside one."""
    return _buggify._CURRENT[0]


def log(message: str, **fields: Any) -> None:
    """Record an event in the running simulation's trace; a no-op outside a simulation."""
    sim = _buggify._CURRENT[0]
    if sim is not None:
        sim.log(message, **fields)
