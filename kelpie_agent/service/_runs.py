"""Runs: reading them back (Letta's ``/v1/runs``).

A run's record (``run/<run_id>``) is written by its agent with every checkpoint, so it is read
straight from storage, from any node, without activating the agent.
"""

from __future__ import annotations

from collections.abc import Sequence

from kelpie_agent.agent import AgentMessage, Keys, RunRecord
from kelpie_agent.agent._codec import unpack

from . import _validate as v
from ._directory import Directory
from ._errors import InvalidError, NotFoundError
from ._index import _all
from ._types import paginate

__all__ = ["RUN_STATUSES", "Runs"]

RUN_STATUSES = ("created", "running", "completed", "failed", "cancelled")
_BATCH = 100


class Runs(Directory):
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
        storage; oldest first by default, ``after``/``before`` message ids (Letta's
        cursors)."""
        limit, descending = v.page_limit(limit), v.order(order)
        run = await self.get_run(run_id)
        keys = Keys(run.agent_id)
        start, end = keys.message(run.first_seq), Keys.prefix_end(keys.messages)
        found: list[AgentMessage] = []
        while True:
            rows = await self.read.scan(start, end, "the run's messages", limit=_BATCH)
            mine = [m for m in (unpack(value) for _, value in rows) if m.run_id == run_id]
            found.extend(mine)
            if len(rows) < _BATCH or len(mine) < len(rows):
                break  # the runs of a history never interleave
            start = rows[-1][0] + b"\x00"
        return paginate(
            found,
            lambda m: m.id,
            kind="message",
            after=after,
            before=before,
            limit=limit,
            descending=descending,
        )
