"""The pure checker of the refusals property (``_agent_refusal_checks``)."""

from __future__ import annotations

import attrs

from kelpie_agent.agent._models import AgentRecord
from kelpie_dst.workloads._agent_refusal_checks import Shape, Step, check_refusals

BASE = Shape(AgentRecord(id="agent-1", name="a"), (("human", "h"),), ("p1",))
MEMORY = "<memory>human: h</memory>"


def _step(outcome: str, after: Shape, expected: Shape = BASE, **kw: object) -> Step:
    fields: dict[str, object] = {
        "agent": "agent-1",
        "op": "op",
        "outcome": outcome,
        "error": "" if outcome == "ok" else "refused",
        "before": BASE,
        "expected": expected,
        "after": after,
        "memory": MEMORY,
        "prompt": f"system\n{MEMORY}\nend",
        "passages": after.passages,
    }
    fields.update(kw)
    return Step(**fields)  # type: ignore[arg-type]


def test_a_refusal_that_changed_nothing_passes() -> None:
    assert check_refusals([_step("refused", BASE)]) == []


def test_a_refusal_that_changed_the_record_is_a_problem() -> None:
    changed = attrs.evolve(BASE, record=attrs.evolve(BASE.record, tags=("x",)))
    [problem] = check_refusals([_step("refused", changed)])
    assert "a refused request changed the agent" in problem and "tags" in problem


def test_a_success_must_store_exactly_its_own_change() -> None:
    wanted = attrs.evolve(BASE, passages=("p1", "p2"))
    assert check_refusals([_step("ok", wanted, wanted)]) == []
    extra = attrs.evolve(wanted, record=attrs.evolve(BASE.record, archive_ids=("archive-9",)))
    [problem] = check_refusals([_step("ok", extra, wanted)])
    assert "not what the request made" in problem and "archive_ids" in problem


def test_an_unknown_outcome_may_be_before_or_after() -> None:
    wanted = attrs.evolve(BASE, passages=("p1", "p2"))
    assert check_refusals([_step("failed", BASE, wanted), _step("failed", wanted, wanted)]) == []
    other = attrs.evolve(BASE, passages=())
    [problem] = check_refusals([_step("failed", other, wanted)])
    assert "neither the one before nor the one after" in problem


def test_what_the_activation_shows_must_be_stored() -> None:
    [problem] = check_refusals([_step("refused", BASE, prompt="system\nstale\n")])
    assert "does not show the stored memory" in problem
    [problem] = check_refusals([_step("refused", BASE, passages=("p1", "ghost"))])
    assert "lists passages" in problem and "ghost" in problem
