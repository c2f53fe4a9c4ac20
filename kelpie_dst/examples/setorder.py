"""Behaviour that depends on the iteration order of a set of objects.

Objects hash by identity (their address), so the order of a set of them changes with memory
layout: equal in one process, different in another. ``check-determinism`` catches it.
"""

from __future__ import annotations

import trio

import kelpie_dst


class Job:
    def __init__(self, name: str) -> None:
        self.name = name


async def main() -> None:
    jobs = {Job(f"job{i}") for i in range(12)}
    order = []
    async with trio.open_nursery() as nursery:
        for job in jobs:  # the bug: iteration order depends on addresses
            kelpie_dst.log("schedule", job=job.name)
            order.append(job.name)
            nursery.start_soon(trio.sleep, 0.01 * len(order))
