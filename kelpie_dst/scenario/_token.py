"""Replay tokens: one shell-safe word that names a failing run (scenario, seed, overrides,
trace hash and hash seed), for ``kelpie-dst replay TOKEN``.

The token is ``kd1.`` followed by the base64url (unpadded) of raw-deflated compact JSON::

    {"s": "kv_linearizability", "n": 42, "o": ["duration=30s"], "h": "<trace hash>", "y": "0"}

``s`` is the scenario as it was named (a name from the search path or a file path), ``n`` the
seed, ``o`` the ``--set`` overrides, ``h`` the trace hash the run produced, and ``y`` the
``PYTHONHASHSEED`` it ran under. Replay re-executes under that hash seed, runs the seed, and
reports a different trace hash as nondeterminism (exit 4).
"""

from __future__ import annotations

import base64
import binascii
import json
import shlex
import zlib

import attrs

from .._errors import UsageError
from .._hashseed import current_hashseed as current_hashseed

__all__ = ["PREFIX", "ReplayToken", "current_hashseed"]

PREFIX = "kd1."


@attrs.frozen
class ReplayToken:
    scenario: str
    seed: int
    overrides: tuple[str, ...] = ()
    trace_hash: str | None = None
    hashseed: str = "0"

    def encode(self) -> str:
        data: dict[str, object] = {"s": self.scenario, "n": self.seed}
        if self.overrides:
            data["o"] = list(self.overrides)
        if self.trace_hash:
            data["h"] = self.trace_hash
        if self.hashseed != "0":
            data["y"] = self.hashseed
        raw = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
        packer = zlib.compressobj(9, zlib.DEFLATED, -15)
        packed = packer.compress(raw) + packer.flush()
        return PREFIX + base64.urlsafe_b64encode(packed).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> ReplayToken:
        text = text.strip()
        if not text.startswith(PREFIX):
            raise UsageError(f"not a replay token: {text[:40]!r} (tokens start with {PREFIX!r})")
        body = text[len(PREFIX) :]
        try:
            packed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            data = json.loads(zlib.decompress(packed, -15))
        except (ValueError, binascii.Error, zlib.error):
            raise UsageError(f"damaged replay token {text[:40]!r}: copy it whole") from None
        if not isinstance(data, dict):
            raise UsageError("damaged replay token: copy it whole")
        scenario, seed = data.get("s"), data.get("n")
        overrides = data.get("o", [])
        trace_hash, hashseed = data.get("h"), data.get("y", "0")
        if (
            not isinstance(scenario, str)
            or isinstance(seed, bool)
            or not isinstance(seed, int)
            or not isinstance(overrides, list)
            or not all(isinstance(o, str) for o in overrides)
            or not (trace_hash is None or isinstance(trace_hash, str))
            or not isinstance(hashseed, str)
        ):
            raise UsageError("damaged replay token: copy it whole")
        if not 0 <= seed <= 2**64 - 1:
            raise UsageError(f"replay token: seed {seed} is not from 0 to {2**64 - 1}")
        return cls(scenario, seed, tuple(overrides), trace_hash, hashseed)

    def run_command(self) -> str:
        """The equivalent ``kelpie-dst run`` command (it does not check the trace hash)."""
        parts = ["kelpie-dst", "run", self.scenario, "--seed", str(self.seed)]
        for override in self.overrides:
            parts += ["--set", override]
        prefix = f"PYTHONHASHSEED={self.hashseed} " if self.hashseed != "0" else ""
        return prefix + shlex.join(parts)

    def replay_line(self) -> str:
        return f"replay: kelpie-dst replay {self.encode()}"
