"""Runs: reading them back (Letta's ``/v1/runs``).

A run's record (``run/<run_id>``) is written by its agent with every checkpoint, so it is read
straight from storage, from any node, without activating the agent.
"""

from __future__ import annotations

from kelpie_agent.agent import Keys, RunRecord
from kelpie_agent.agent._codec import unpack

from . import _validate as v
from ._catalog import Catalog
from ._errors import NotFoundError

__all__ = ["Runs"]


class Runs(Catalog):
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
