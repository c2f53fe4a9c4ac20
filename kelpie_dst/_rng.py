"""Seeded random streams: one root seed, named forks that do not disturb one another.

A stream's seed is a hash of (root seed, stream name), so adding a new consumer never shifts the
draws of existing ones (the property FoundationDB and TigerBeetle rely on for stable replays).
"""

from __future__ import annotations

import hashlib
import random

__all__ = ["RngStream", "derive_seed", "state_digest"]


def derive_seed(root: int, name: str) -> int:
    """A 64-bit seed for the stream ``name`` under ``root``; stable across processes."""
    digest = hashlib.blake2b(f"{root}\x00{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class RngStream(random.Random):
    """A ``random.Random`` seeded from (root, name), with :meth:`fork` for child streams."""

    def __init__(self, root: int, name: str = "root") -> None:
        self.root = root
        self.name = name
        super().__init__(derive_seed(root, name))

    def fork(self, name: str) -> RngStream:
        """A child stream named ``<self.name>/<name>``; independent of this stream's draws."""
        return RngStream(self.root, f"{self.name}/{name}")

    def digest(self) -> str:
        """A short digest of the stream's state: equal digests mean equal draw histories."""
        return state_digest(self)

    def __repr__(self) -> str:
        return f"RngStream(root={self.root}, name={self.name!r})"


def state_digest(rng: random.Random) -> str:
    """A short digest of any ``random.Random``'s state (equal for equal draw histories)."""
    return hashlib.blake2b(repr(rng.getstate()).encode(), digest_size=6).hexdigest()
