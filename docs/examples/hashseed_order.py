"""Behaviour that depends on the iteration order of a set of strings (docs/cli.md).

String hashes depend on PYTHONHASHSEED. The CLI pins it to 0, so plain runs and replays agree;
``check-determinism --vary-hashseed`` gives each fresh process its own and catches this.
"""

from __future__ import annotations

import trio

import kelpie_dst


async def main() -> None:
    for name in {"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}:
        kelpie_dst.log("visit", name=name)
        await trio.sleep(0.1)
