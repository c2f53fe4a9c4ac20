"""Steps: reading them back and giving feedback (Letta's ``/v1/steps`` and a run's steps).

A step's record (``step/<step_id>``) is written by its agent with the step's messages, so it
is read straight from storage, from any node, without activating the agent. Feedback is a
read-modify-write of the record in one transaction (the agent never writes a step again).

Kelpie's *trace* of a run is the run itself: its ``trace_id`` is the run id, and its spans
are the run (the root) and its steps, in order (``run_trace``); a step's trace is the summary
of its provider exchange that the step record keeps (``step_trace``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from kelpie_agent.agent import FEEDBACKS, AgentMessage, Keys, StepRecord, render_messages
from kelpie_agent.agent._codec import pack, unpack
from kelpie_agent.storage import Transaction

from . import _validate as v
from ._errors import InvalidError, NotFoundError
from ._index import _all
from ._runs import Runs
from ._types import paginate

__all__ = ["Steps"]


def _feedback(value: str | None, field: str = "feedback") -> str | None:
    if value is not None and value not in FEEDBACKS:
        raise InvalidError(field, f"must be one of {', '.join(FEEDBACKS)}, got {value!r}")
    return value


def _order(step: StepRecord) -> tuple[int, int, str]:
    """The order of the agents' step index (``steps/<agent>/<µs>/<number>/<id>``): start
    time as the node's clock gave it, then number in the run."""
    return (max(0, round(step.created_at * 1_000_000)), step.number, step.id)


class Steps(Runs):
    """Steps of runs, read from storage; feedback on them."""

    async def get_step(self, step_id: str) -> StepRecord:
        """The step's record (:class:`NotFoundError` if there is no such step)."""
        self._check_running()
        data = await self.read.get(Keys.step(v.ident(step_id, "step_id")), f"step {step_id}")
        if data is None:
            raise NotFoundError("step", step_id)
        step: StepRecord = unpack(data)
        return step

    async def _steps_of(self, ids: Sequence[str]) -> list[StepRecord]:
        found = [await self.read.get(Keys.step(i), f"step {i}") for i in ids]
        return [unpack(data) for data in found if data is not None]

    async def list_steps(
        self,
        *,
        agent_id: str | None = None,
        run_id: str | None = None,
        model: str | None = None,
        has_feedback: bool | None = None,
        feedback: str | None = None,
        tags: Sequence[str] = (),
        trace_ids: Sequence[str] = (),
        start: float | None = None,
        end: float | None = None,
        after: str | None = None,
        before: str | None = None,
        limit: int = 50,
        order: str = "desc",
    ) -> list[StepRecord]:
        """Steps in the order they ran, newest first by default. ``agent_id`` reads that
        agent's step index, ``run_id`` (or ``trace_ids``: a run's trace id is its id) that
        run's steps; ``model`` is the provider's model name or the handle; ``tags``: steps
        carrying all of them; ``start``/``end``: epoch seconds, the steps that started
        after/before; ``after``/``before`` are step ids (Letta's cursors)."""
        self._check_running()
        limit, descending = v.page_limit(limit), v.order(order)
        _feedback(feedback)
        wanted = v.tags(list(tags)) if tags else ()
        runs = [v.ident(r, f"trace_ids[{i}]") for i, r in enumerate(trace_ids)]
        if run_id is not None:
            runs = [v.ident(run_id, "run_id"), *runs]
        if runs:
            ids: list[str] = []
            for rid in dict.fromkeys(runs):
                data = await self.read.get(Keys.run(rid), f"run {rid}")
                ids.extend(unpack(data).steps if data is not None else ())
            records = await self._steps_of(ids)
        elif agent_id is not None:
            rows = await _all(self.read, Keys(v.ident(agent_id, "agent_id")).steps)
            records = await self._steps_of([key.rsplit(b"/", 1)[1].decode() for key, _ in rows])
        else:
            records = [unpack(data) for _, data in await _all(self.read, Keys.STEPS)]

        def keep(step: StepRecord) -> bool:
            return (
                (agent_id is None or step.agent_id == agent_id)
                and (model is None or model in (step.model, step.model_handle))
                and (has_feedback is None or (step.feedback is not None) == has_feedback)
                and (feedback is None or step.feedback == feedback)
                and all(tag in step.tags for tag in wanted)
                and (start is None or step.created_at > start)
                and (end is None or step.created_at < end)
            )

        chosen = sorted(filter(keep, records), key=_order)
        return paginate(
            chosen,
            lambda s: s.id,
            kind="step",
            after=after,
            before=before,
            limit=limit,
            descending=descending,
        )

    async def step_feedback(
        self, step_id: str, feedback: str | None, tags: Sequence[str] | None = None
    ) -> StepRecord:
        """Set (or with ``None``, clear) the step's feedback; ``tags``, when given, replace
        its tags. One transaction: concurrent feedback never loses a write half-done."""
        self._check_running()
        v.ident(step_id, "step_id")
        _feedback(feedback)
        new_tags = v.tags(list(tags)) if tags is not None else None

        async def build(txn: Transaction) -> StepRecord:
            data = await txn.get(Keys.step(step_id))
            if data is None:
                raise NotFoundError("step", step_id)
            step: StepRecord = unpack(data)
            changed = attrs.evolve(step, feedback=feedback)
            if new_tags is not None:
                changed = attrs.evolve(changed, tags=new_tags)
            await txn.set(Keys.step(step_id), pack(changed))
            return changed

        return await self.read.transact(build, f"feedback on step {step_id}")

    async def step_messages(
        self,
        step_id: str,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int = 100,
        order: str = "asc",
    ) -> list[AgentMessage]:
        """The messages step ``step_id`` produced (its answer, then its tools' returns), as
        Letta shows them, oldest first by default."""
        limit, descending = v.page_limit(limit), v.order(order)
        step = await self.get_step(step_id)
        run = await self.get_run(step.run_id)
        mine = [m for m in await self._run_messages(run) if m.step_id == step.id]
        return paginate(
            render_messages(mine),
            lambda m: m.id,
            kind="message",
            after=after,
            before=before,
            limit=limit,
            descending=descending,
        )

    async def run_steps(
        self,
        run_id: str,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int = 100,
        order: str = "asc",
    ) -> list[StepRecord]:
        """Run ``run_id``'s steps in the order they ran (oldest first by default)."""
        limit, descending = v.page_limit(limit), v.order(order)
        run = await self.get_run(run_id)
        return paginate(
            await self._steps_of(run.steps),
            lambda s: s.id,
            kind="step",
            after=after,
            before=before,
            limit=limit,
            descending=descending,
        )

    async def run_trace(self, run_id: str, limit: int = 1000) -> list[dict[str, Any]]:
        """The run's spans: the run itself (the root), then one ``agent_step`` span per step,
        in order, at most ``limit`` of them in all."""
        limit = v.int_at_least(limit, "limit", 1)
        run = await self.get_run(run_id)
        ended = run.completed_at if run.completed_at is not None else run.updated_at
        spans = [
            _span(run.id, run.id, None, "agent_run", run.created_at, ended, {"status": run.status})
        ]
        for step in await self._steps_of(run.steps):
            spans.append(
                _span(
                    run.id,
                    step.id,
                    run.id,
                    "agent_step",
                    step.created_at,
                    step.created_at + step.step_ns / 1e9,
                    {
                        "step.number": step.number,
                        "llm.model": step.model,
                        "llm.prompt_tokens": step.prompt_tokens,
                        "llm.completion_tokens": step.completion_tokens,
                        "llm.request_ns": step.llm_request_ns,
                    },
                )
            )
        return spans[:limit]


def _span(
    trace_id: str,
    span_id: str,
    parent: str | None,
    name: str,
    start: float,
    end: float,
    attributes: dict[str, Any],
) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_span_id": parent,
        "span_name": name,
        "start_time_ns": round(start * 1e9),
        "duration_ns": max(0, round((end - start) * 1e9)),
        "attributes": attributes,
    }
