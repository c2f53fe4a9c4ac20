"""Steps listed by time window (``agent_surroundings`` with ``step_windows``; svcV, session 25).

``steps.list(agent_id=..., start_date=..., end_date=...)`` keeps the steps that started after
``start`` and before ``end`` (both exclusive: docs/service.md, ``Steps.list_steps``). A client
paging by time passes the time of the last step it saw as the next ``start``; a window that
keeps that step again shows it twice, one that drops the step after it loses it.

The property is metamorphic, as ``message_windows``' is: no model of when steps start is
needed. The agent is sent two messages (each a run of one or more steps); its steps are listed
without dates; then, for every step's exact ``created_at``, with that time as the start and as
the end, and each windowed list must hold exactly the undated list's steps the window keeps.
Judged only if the undated list is the same at the end (a send cut off on the client's side
may still be stored meanwhile); mismatches go to the log's ``problems``
(``surroundings_consistent``).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from kelpie_agent.agent import InputMessage
from kelpie_agent.service import ServiceError

from ._agent_schedules import _FAILURES

if TYPE_CHECKING:
    from .agent_surroundings import Surroundings

__all__ = ["step_windows"]

_LIMIT = 1000


async def _steps(
    run: Surroundings, agent: str, start: float | None, end: float | None
) -> dict[str, float] | None:
    try:
        found = await run.client.once(
            lambda s: s.list_steps(agent_id=agent, start=start, end=end, limit=_LIMIT)
        )
    except (*_FAILURES, ServiceError):
        return None
    return {step.id: step.created_at for step in found}


async def step_windows(run: Surroundings, agent: str) -> None:
    """Send two messages, then judge the agent's step list by windows ending on its steps."""
    for n in range(2):
        text = f"stepwise note {n} about the tide"
        with contextlib.suppress(*_FAILURES, ServiceError):
            await run.client.once(
                lambda s, t=text: s.send_message(agent, [InputMessage("user", t)])  # type: ignore[misc]
            )
    every = await _steps(run, agent, None, None)
    if not every or len(every) >= _LIMIT:
        return
    judged: list[str] = []
    for at in sorted(set(every.values())):
        for start, end in ((at, None), (None, at)):
            got = await _steps(run, agent, start, end)
            if got is None:
                continue
            want = {
                i
                for i, d in every.items()
                if (start is None or d > start) and (end is None or d < end)
            }
            if set(got) != want:
                judged.append(
                    f"steps.list(agent_id={agent}, start={start}, end={end}): answered "
                    f"{sorted(got)}, but the window keeps {sorted(want)} of the undated list "
                    "(start and end are exclusive)"
                )
    if await _steps(run, agent, None, None) == every:
        run.log.step_windows += 1
        run.log.problems += judged
