"""Entry points for the CLI tests."""

from __future__ import annotations

import trio


async def brackets() -> None:
    table: dict[str, int] = {"[a]": 1}
    await trio.sleep(1)
    table["[b]"] += table["[a]"]  # KeyError: '[b]'
