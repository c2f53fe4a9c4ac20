"""The node's scheduler: it sends scheduled messages when they are due.

Every node runs one (``open_agent_node`` starts it with the node, and it stops with it). It
reads the due index (``schedq/<due µs>/<agent>/<id>``, ``kelpie_agent.agent._schedules``) in
time order, asks the agent's actor to fire each occurrence that is due by this node's clock
(``FireSchedule(id, due)``, each in a task of its own, so one agent's long run never delays
another's schedule), and sleeps until the earliest occurrence not yet due, or
``ServiceOptions.schedule_rescan`` seconds when there is none (other nodes may create
schedules meanwhile; a schedule created on this node wakes it at once). Sleeping is trio's, so
in a simulation it is virtual time, and a node with nothing due makes one scan a rescan period.

Exactly once is the actor's, not the scheduler's (see ``_schedules``): every node may ask to
fire the same occurrence, and a crash anywhere here loses nothing, because an occurrence stays
in the due index until the input it sends commits. The scheduler only has to keep asking:

* a scan that storage refused is retried after a backoff (``schedule_retry`` doubling up to
  the rescan period); the node never crashes for it;
* a fire that failed (the agent unreachable, storage failing, the node stopping) is retried
  after the same backoff for that occurrence, while the others go on;
* an occurrence the actor answered "not due" for and that is still listed (a stale entry the
  actor could not delete) waits a rescan period, so nothing spins on it.

No random draw is made here: the backoff is a fixed doubling (nodes' scans are not
synchronised anyway, their clocks and start times differ).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from kelpie_agent.agent import FireSchedule
from kelpie_agent.agent._schedules import DUE, parse_due_key

if TYPE_CHECKING:
    from ._base import ServiceBase

__all__ = ["Scheduler"]

BATCH = 64  # due-index entries read per scan
MAX_IN_FLIGHT = 16  # occurrences this node fires at once


class Scheduler:
    """One node's scheduler (``service.scheduler``); ``run`` is its task."""

    def __init__(self, service: ServiceBase) -> None:
        self.service = service
        self._wake = trio.Event()
        self._in_flight: set[bytes] = set()
        self._held: dict[bytes, tuple[float, int]] = {}  # key -> (not before, failures)
        self._failures = 0  # scans in a row that storage refused
        self.fired = 0  # occurrences this node sent (the actor answered with a run)

    def poke(self) -> None:
        """Scan now (a schedule was created on this node)."""
        self._wake.set()

    def _backoff(self, failures: int) -> float:
        options = self.service.options
        return float(min(options.schedule_retry * 2 ** min(failures, 10), options.schedule_rescan))

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                self._wake = trio.Event()
                try:
                    delay = await self._scan(nursery)
                    self._failures = 0
                except Exception as error:  # storage kept failing, the node is stopping, a bug:
                    delay = self._backoff(self._failures)  # reported, and never the end of it
                    self._failures += 1
                    self.service.observe("scheduler.scan_failed", error=repr(error))
                if delay > 0:
                    with trio.move_on_after(delay):
                        await self._wake.wait()

    async def _scan(self, nursery: trio.Nursery) -> float:
        """Start the fires that are due; the seconds until the next scan."""
        service = self.service
        rows = await service.read(
            lambda: service.kv.scan(DUE, DUE + b"\xff", limit=BATCH), "the due schedules"
        )
        now, clock = trio.current_time(), service.ports.clock.now()
        delay = service.options.schedule_rescan
        for key, _ in rows:
            due, agent_id, schedule_id = parse_due_key(key)
            if key in self._in_flight:
                continue
            not_before = self._held.get(key, (0.0, 0))[0]
            if not_before > now:
                delay = min(delay, not_before - now)
                continue
            if due > clock * 1_000_000:
                delay = min(delay, due / 1_000_000 - clock)
                break  # the index is in time order: nothing after this one is due either
            if len(self._in_flight) < MAX_IN_FLIGHT:
                self._in_flight.add(key)
                nursery.start_soon(self._fire, key, agent_id, schedule_id, due)
        return max(0.0, delay)

    async def _fire(self, key: bytes, agent_id: str, schedule_id: str, due: int) -> None:
        service = self.service
        try:
            await service.ports.hazards.point("service.schedule_due")  # decided, not yet asked
            result = await service._request(agent_id, FireSchedule(schedule_id, due))
        except Exception as error:  # a ServiceError, or a bug: reported, retried later
            failures = self._held.get(key, (0.0, 0))[1]
            self._held[key] = (trio.current_time() + self._backoff(failures), failures + 1)
            service.observe(
                "scheduler.fire_failed", agent=agent_id, schedule=schedule_id, error=repr(error)
            )
        else:
            if result is None:  # fired already (another node, a retry), or gone: if the entry
                # is somehow still listed, look at it again only a rescan period from now
                self._held[key] = (trio.current_time() + service.options.schedule_rescan, 0)
            else:
                self._held.pop(key, None)
                self.fired += 1
            service.observe(
                "scheduler.fired", agent=agent_id, schedule=schedule_id, sent=result is not None
            )
        finally:
            self._in_flight.discard(key)
            if len(self._held) > 4 * BATCH:  # forget holds that are over
                now = trio.current_time()
                self._held = {k: h for k, h in self._held.items() if h[0] > now}
            self._wake.set()
