"""Runs: reading them back (Letta's ``/v1/runs``).

A run's record (``run/<run_id>``) is written by its agent with every checkpoint, so it is read
straight from storage, from any node, without activating the agent.
"""

from __future__ import annotations

from collections.abc import Sequence

import trio

from kelpie_agent.agent import (
    AgentMessage,
    Keys,
    LettaStopReason,
    RunRecord,
    StreamEvent,
    render_messages,
)
from kelpie_agent.agent._codec import unpack

from . import _validate as v
from ._errors import InvalidError, NotFoundError
from ._history import History
from ._index import _all
from ._types import paginate

__all__ = ["RUN_STATUSES", "Runs"]

RUN_STATUSES = ("created", "running", "completed", "failed", "cancelled")
_BATCH = 100


class Runs(History):
    """Runs and their steps, read from storage."""

    async def get_run(self, run_id: str) -> RunRecord:
        """The run's record: status, stop reason, usage, times (:class:`NotFoundError` if
        there is no such run)."""
        self._check_running()
        data = await self.read.get(Keys.run(v.ident(run_id, "run_id")), f"run {run_id}")
        if data is None:
            raise NotFoundError("run", run_id)
        record: RunRecord = unpack(data)
        return record

    async def list_runs(
        self,
        *,
        agent_ids: Sequence[str] = (),
        conversation_id: str | None = None,
        statuses: Sequence[str] = (),
        active: bool = False,
        background: bool | None = None,
        stop_reason: str | None = None,
        after: str | None = None,
        before: str | None = None,
        limit: int = 100,
        order: str = "desc",
    ) -> list[RunRecord]:
        """Runs by creation time, newest first by default, read from storage. ``agent_id``
        reads that agent's run index only; the filters are Letta's (``active``: running
        runs; ``statuses``: any of them); ``after``/``before`` are run ids relative to the
        order (Letta's cursors; :class:`NotFoundError` for a run not in the listing)."""
        self._check_running()
        limit, descending = v.page_limit(limit), v.order(order)
        for i, status in enumerate(statuses):
            if status not in RUN_STATUSES:
                raise InvalidError(f"statuses[{i}]", f"must be one of {', '.join(RUN_STATUSES)}")
        if agent_ids:
            ids: list[str] = []
            for i, agent_id in enumerate(dict.fromkeys(agent_ids)):
                rows = await _all(self.read, Keys(v.ident(agent_id, f"agent_ids[{i}]")).runs)
                ids.extend(key.rsplit(b"/", 1)[1].decode() for key, _ in rows)
            found = [await self.read.get(Keys.run(i), f"run {i}") for i in ids]
            records = [unpack(data) for data in found if data is not None]
        else:
            records = [unpack(data) for _, data in await _all(self.read, Keys.RUNS)]

        def keep(run: RunRecord) -> bool:
            return (
                (conversation_id is None or run.thread_id == conversation_id)
                and (not statuses or run.status in statuses)
                and (not active or run.running)
                and (background is None or run.background == background)
                and (stop_reason is None or run.stop_reason == stop_reason)
            )

        chosen = sorted(filter(keep, records), key=lambda r: (r.created_at, r.id))
        return paginate(
            chosen,
            lambda r: r.id,
            kind="run",
            after=after,
            before=before,
            limit=limit,
            descending=descending,
        )

    async def run_messages(
        self,
        run_id: str,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int = 100,
        order: str = "asc",
    ) -> list[AgentMessage]:
        """The messages run ``run_id`` stored in its history (its input first), read from
        storage and shown as Letta shows them (``send_message`` calls as assistant
        messages); oldest first by default, ``after``/``before`` message ids (Letta's
        cursors)."""
        limit, descending = v.page_limit(limit), v.order(order)
        found = render_messages(await self._run_messages(await self.get_run(run_id)))
        return paginate(
            found,
            lambda m: m.id,
            kind="message",
            after=after,
            before=before,
            limit=limit,
            descending=descending,
        )

    async def _run_messages(self, run: RunRecord, batch: int = _BATCH) -> list[AgentMessage]:
        keys = Keys(run.thread_id or run.agent_id)  # its thread's history
        start, end = keys.message(run.first_seq), Keys.prefix_end(keys.messages)
        found: list[AgentMessage] = []
        while True:
            rows = await self.read.scan(start, end, "the run's messages", limit=batch)
            mine = [m for m in (unpack(value) for _, value in rows) if m.run_id == run.id]
            found.extend(mine)
            if len(rows) < batch or len(mine) < len(rows):
                return found  # the runs of a history never interleave
            start = rows[-1][0] + b"\x00"

    async def follow_run(
        self,
        run_id: str,
        channel: trio.MemorySendChannel[StreamEvent],
        *,
        agent_id: str | None = None,
        starting_after: int = 0,
        poll_interval: float = 0.1,
        batch_size: int = _BATCH,
    ) -> None:
        """Stream run ``run_id`` into ``channel`` from storage, from any node, for as long as
        it runs (Letta's background-mode resume): its messages numbered from 1 (``seq_id``),
        those after ``starting_after``, as they are stored (read every ``poll_interval``
        seconds of trio time), then its stop reason and usage. The run goes on whether or not
        anyone follows it; a run whose node died stays ``running`` until its agent is
        activated again and resumes it. Following stops when the reader closes its end."""
        v.ident(run_id, "run_id")
        starting_after = v.int_at_least(starting_after, "starting_after", 0)
        batch_size = v.int_at_least(batch_size, "batch_size", 1)
        if isinstance(poll_interval, bool) or not isinstance(poll_interval, int | float):
            raise InvalidError("poll_interval", "must be a number of seconds")
        if not 0 < poll_interval <= 60:
            raise InvalidError("poll_interval", "must be more than 0 and at most 60 seconds")
        sent = 0
        async with channel:
            while True:
                # the status first: a finished run's messages were stored with its last
                # checkpoint, so reading them after it misses none
                run = await self.get_run(run_id)
                if agent_id is not None and run.agent_id != agent_id:
                    raise NotFoundError("run", run_id, f"agent {agent_id} has no run {run_id}")
                messages = render_messages(await self._run_messages(run, batch_size))
                for number, message in enumerate(messages[sent:], start=sent + 1):
                    if number > starting_after:
                        await channel.send(message)
                sent = max(sent, len(messages))
                if not run.running:
                    await channel.send(LettaStopReason(run.stop_reason or "end_turn"))
                    await channel.send(run.usage)
                    return
                if channel.statistics().open_receive_channels == 0:
                    return  # the follower left (its channel was closed): stop polling
                await trio.sleep(poll_interval)
