"""The Ids port: new identifiers in Letta's ``<prefix>-<uuid>`` form."""

from __future__ import annotations

import random  # determinism-ok: the Random type only; never the module functions
import uuid
from typing import Protocol

__all__ = ["Ids", "SeededIds", "SystemIds"]


class Ids(Protocol):
    """Makes identifiers such as ``agent-6f1c...``; unique for the lifetime of a deployment."""

    def new(self, prefix: str) -> str:
        """A fresh id: ``f"{prefix}-{uuid}"`` with a version-4 UUID."""
        ...


class SystemIds:
    """Production: ``uuid4`` from the operating system's entropy."""

    def new(self, prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4()}"  # determinism-ok: production side


class SeededIds:
    """Version-4 UUIDs drawn from a seeded ``random.Random``: the simulator's (and tests') Ids.

    Two ``SeededIds`` over equal streams make equal ids, so give every node incarnation its
    own stream (``kelpie_dst.shims.sim_ports`` does).
    """

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def new(self, prefix: str) -> str:
        return f"{prefix}-{uuid.UUID(int=self._rng.getrandbits(128), version=4)}"
