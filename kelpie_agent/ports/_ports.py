"""The bundle of time, id and randomness ports one kelpie_agent process uses."""

from __future__ import annotations

import random  # determinism-ok: the Random type only; never the module functions

import attrs

from ._clock import Clock, SystemClock
from ._hazards import NO_HAZARDS, Hazards
from ._ids import Ids, SystemIds

__all__ = ["Ports", "system_ports"]


@attrs.frozen
class Ports:
    """What a process needs besides storage, LLM, sandbox, embedder and MCP."""

    clock: Clock
    ids: Ids
    rng: random.Random  # jitter, sampling; never the global ``random`` module
    hazards: Hazards = NO_HAZARDS  # BUGGIFY sites and risky points (a no-op in production)


def system_ports() -> Ports:
    """Production ports: the host clock, uuid4 ids and an OS-seeded generator."""
    rng = random.SystemRandom()  # determinism-ok: production side
    return Ports(clock=SystemClock(), ids=SystemIds(), rng=rng)
