"""A plain trio program that reads the wall clock and makes random ids (docs/tutorial.md).

By default the simulator redirects both to deterministic values; ``--strict`` makes the first
such call fail with exit 4, naming this file and line.
"""

from __future__ import annotations

import time
import uuid

import trio


async def main() -> None:
    orders = []
    for _ in range(3):
        await trio.sleep(1)
        orders.append({"id": str(uuid.uuid4()), "created": time.time()})
    print(orders[-1])
