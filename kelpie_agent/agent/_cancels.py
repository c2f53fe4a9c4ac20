"""Cancelling runs: one table per node of the cancel events of the runs it drives.

A send carries a cancel event (``SendMessage.cancel``). While the request is served, its event
is in the node's :class:`CancelTable` under the agent's id (and its conversation's, for a run
in one), so ``POST /v1/agents/{id}/messages/cancel`` can set it; once the request's run has
started, the event is bound to the run's id as well.

That binding is what lets a cancel reach a run that its request no longer drives
(Dlead21-4). When the lease is lost in the middle of a run, the request is retried; the
agent's next activation resumes the interrupted run inside ``activate``, and the retry only
answers with it afterwards. The resumed loop reads its cancel from the table by run id
(:meth:`CancelTable.of_run`), so the cancel of the request that started the run stops it,
whether it was set before the resume began or during it. A run resumed with no request bound
to it (a crash, and no client retrying) registers an event of its own under the agent's and
conversation's ids for as long as it runs.

A request that ends in an error (the service gave up on it: its outcome unknown) may leave its
run unfinished, driven by nobody until the agent's next activation resumes it. Its event is
then *parked* (:meth:`CancelTable.park`): it stays under the agent's, conversation's and run's
ids, so a cancel asked meanwhile still reaches the run when this node resumes it; the resume
removes it. At most :data:`PARKED` are kept per node (the oldest go first): a parked run may
have finished after all, or be resumed by another node.

The table is node-local, like Letta's in-process cancel of a streaming request: a cancel asked
through one node does not reach a run another node resumes (docs/decisions.md, Dlead22-1).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

import trio

__all__ = ["PARKED", "CancelLike", "CancelTable", "RunCancel", "cancel_keys"]

PARKED = 64
"""Parked cancel events a node keeps (see the module docstring)."""


class CancelLike(Protocol):
    """What the loop reads between steps: a request's ``trio.Event``, or a :class:`RunCancel`."""

    def is_set(self) -> bool: ...


def cancel_keys(agent_id: str, thread: str | None) -> list[str]:
    """The ids a run's cancel is registered under: its agent's, and its conversation's."""
    return [agent_id] if thread is None else [agent_id, thread]


class RunCancel:
    """A resumed run's cancel: set once any cancel event bound to the run is set (read at each
    step boundary, so a request that binds to the run later is heard too)."""

    def __init__(self, table: CancelTable, run_id: str) -> None:
        self._table, self._run_id = table, run_id

    def is_set(self) -> bool:
        return any(event.is_set() for event in self._table.events(self._run_id))


class CancelTable:
    """The cancel events of the runs a node serves, by agent id, conversation id and run id."""

    def __init__(self) -> None:
        self._events: dict[str, list[trio.Event]] = {}
        self._parked: list[trio.Event] = []  # oldest first

    def events(self, key: str) -> list[trio.Event]:
        return self._events.get(key, [])

    def add(self, key: str, event: trio.Event) -> None:
        self._events.setdefault(key, []).append(event)

    def remove(self, key: str, event: trio.Event) -> None:
        events = self._events.get(key, [])
        if event in events:
            events.remove(event)
        if not events:
            self._events.pop(key, None)

    def keys_of(self, event: trio.Event) -> list[str]:
        """Every id ``event`` is registered or bound under (in insertion order)."""
        return [key for key, events in self._events.items() if event in events]

    def bind(self, run_id: str, event: trio.Event | None) -> None:
        """A request's run has started (or a retry found it): its cancel reaches the run by
        id too, until the request's registration ends."""
        if event is not None and event not in self.events(run_id):
            self.add(run_id, event)

    def park(self, event: trio.Event) -> None:
        """The request of ``event`` ended in an error while bound to a run: keep it where it is
        registered until the run is resumed here (see the module docstring)."""
        self._parked.append(event)
        if len(self._parked) > PARKED:
            self.drop(self._parked[0])

    def drop(self, event: trio.Event) -> None:
        """Remove ``event`` from every id it is under."""
        if event in self._parked:
            self._parked.remove(event)
        for key in self.keys_of(event):
            self.remove(key, event)

    @contextmanager
    def registered(self, keys: list[str], event: trio.Event | None) -> Iterator[None]:
        """While a request is served: its ``event`` under ``keys`` (its agent's and
        conversation's ids; the agent binds it to its run too). On success it goes; on an
        error after its run was bound it is parked (see the module docstring)."""
        if event is None:
            yield
            return
        for key in keys:
            self.add(key, event)
        failed = True
        try:
            yield
            failed = False
        finally:
            bound = self.keys_of(event)  # its ids, and the run it was bound to
            if failed and any(key not in keys for key in bound):
                self.park(event)  # its run may be unfinished: a cancel must still reach it
            else:
                for key in bound:
                    self.remove(key, event)

    def cancel(self, key: str) -> int:
        """Set every event registered under ``key``; how many there were."""
        events = self.events(key)
        for event in events:
            event.set()
        return len(events)

    @contextmanager
    def of_run(self, run_id: str, agent_id: str, thread: str | None) -> Iterator[RunCancel]:
        """The cancel of a run resumed without its request: the events bound to it, and, if
        no request is bound to it, one of its own under its agent's and conversation's ids."""
        own: list[str] = []
        event = trio.Event()
        parked = [e for e in self.events(run_id) if e in self._parked]
        if len(parked) == len(self.events(run_id)):  # no live request is bound to the run
            own = [*cancel_keys(agent_id, thread), run_id]
            for key in own:
                self.add(key, event)
        try:
            yield RunCancel(self, run_id)
        finally:
            for key in own:
                self.remove(key, event)
            for stale in parked:  # the run ran here: its parked requests are done with
                self.drop(stale)
