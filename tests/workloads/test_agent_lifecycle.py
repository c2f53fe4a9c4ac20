"""The agent_lifecycle scenario: resets, tool approvals and lists, block labels, cancels, agent
files and deletes under faults. It passes, repeats its trace, and its checks name each kind of
broken lifecycle."""

from __future__ import annotations

import attrs

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_lifecycle_checks import (
    Approval,
    BlockSwap,
    CancelSeen,
    DeleteSeen,
    ImportSeen,
    KeptView,
    LabelAttempt,
    LifecycleLog,
    ResetSeen,
    ToolsSeen,
    check_lifecycle,
    with_its_call,
)


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_lifecycle")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["lifecycle.resets"] >= 1
    assert first.metrics["lifecycle.problems"] == 0
    assert first.result.trace_hash == again.result.trace_hash


PROMPT = "You are an agent.\n<memory_metadata>\n- The current time is: {}\n</memory_metadata>"
RULE = (("conversation_search", "max_count_per_step", 2),)
SOURCE = (
    ("system_message", "sys", None, None),
    ("user_message", "hi", None, None),
    ("reasoning_message", "think", "step-1", None),
    ("tool_call_message", "send_message({})", "step-1", "call-1"),
    ("tool_return_message", "ok", "step-1", "call-1"),
)
COPY = tuple(
    (kind, text, step.replace("step-1", "step-9") if step else None, call)
    for kind, text, step, call in SOURCE
)


def _deleted(outcome: str = "ok", when: str = "at once", **found: object) -> DeleteSeen:
    fields: dict[str, object] = {
        "agent_found": False,
        "listed": False,
        "history_found": False,
        "runs_found": (),
        "messages_found": (),
    }
    fields.update(found)
    return DeleteSeen("a1", outcome, when, **fields)  # type: ignore[arg-type]


def _good() -> LifecycleLog:
    return LifecycleLog(
        resets=[
            ResetSeen(
                "a1",
                (("system_message", PROMPT.format("12:00:01")),),
                PROMPT.format("12:00:02"),
                None,
            )
        ],
        approvals=[Approval("a1", frozenset({"t1"}), frozenset({"t1"}), RULE, RULE)],
        tools=[ToolsSeen("a1", frozenset({"send_message"}), frozenset({"send_message"}))],
        labels=[LabelAttempt("a1", "relabel", "human", "refused", ("persona", "human"))],
        imports=[ImportSeen("a1", "a2", SOURCE, COPY)],
        deletes=[
            _deleted(),
            # a lost outcome may leave records until the repair; after it, nothing
            _deleted("gone", "at once", messages_found=("m1",)),
            _deleted("gone", "after repair"),
        ],
        cancels=[
            CancelSeen("a1", "run-1", "conv-1", 1, "running"),
            CancelSeen("a1", "run-2", None, 0, "completed"),  # it had ended before the cancel
        ],
    )


def test_a_consistent_lifecycle_passes() -> None:
    assert check_lifecycle(_good()) == []


def test_a_reset_that_keeps_messages_or_a_stale_prompt_or_a_run_is_named() -> None:
    log = _good()
    stale = PROMPT.replace("agent", "old agent").format("12:00:01")
    log.resets = [
        ResetSeen("a1", (("system_message", stale),), PROMPT.format("12:00:01"), None),
        ResetSeen(
            "a2",
            (("system_message", PROMPT.format("1")), ("user_message", "hi")),
            PROMPT.format("1"),
            None,
        ),
        ResetSeen("a3", (), PROMPT.format("1"), None),
        ResetSeen("a4", (("system_message", PROMPT.format("1")),), PROMPT.format("1"), "end_turn"),
    ]
    problems = check_lifecycle(log)
    assert len(problems) == 4, problems
    assert "a1's history is" in problems[0] and "not its recompiled" in problems[0]
    assert "a4 still reports a last run" in problems[3]


def test_lost_approvals_changed_rules_and_a_stale_tool_list_are_named() -> None:
    log = _good()
    log.approvals = [
        Approval("a1", frozenset({"t1", "t2"}), frozenset({"t2"}), RULE, RULE),
        Approval("a2", frozenset(), frozenset(), (), RULE),
    ]
    log.tools = [ToolsSeen("a1", frozenset({"s"}), frozenset({"s", "t"}))]
    problems = check_lifecycle(log)
    assert len(problems) == 3, problems
    assert "requires approval for ['t2']" in problems[0]
    assert "other tool rules are []" in problems[1]
    assert "has tools ['s', 't'] after an update to ['s']" in problems[2]


def test_a_taken_label_accepted_is_named() -> None:
    log = _good()
    log.labels = [
        LabelAttempt("a1", "attach", "human", "accepted", ("persona", "human", "human")),
        LabelAttempt("a1", "relabel", "human", "InvalidError", ("persona", "human")),
    ]
    problems = check_lifecycle(log)
    assert len(problems) == 3, problems
    assert "attach of a block of a1 to the taken label 'human': accepted" in problems[0]
    assert "two blocks with one label" in problems[1]
    assert "InvalidError, not refused" in problems[2]


def test_a_cancel_that_misses_a_running_run_is_named() -> None:
    log = _good()
    log.cancels = [CancelSeen("a1", "run-1", "conv-1", 0, "running")]
    log.sent_runs = [("a2", "run-5", "end_turn"), ("a2", "run-6", "cancelled")]
    problems = check_lifecycle(log)
    assert problems == [
        "cancelling a1's runs reached none, while its run run-1 (in conversation conv-1), "
        "started through that node a moment before, was still running",
        "a2's run run-6 of a plain send, which no cancel named (the agent's client waited for "
        "it before anything else), ended cancelled",
    ]


def test_an_import_out_of_order_or_with_a_result_away_from_its_call_is_named() -> None:
    log = _good()
    swapped = (COPY[0], COPY[2], COPY[1], *COPY[3:])
    apart = (*COPY[:4], ("tool_return_message", "ok", None, "call-1"))
    log.imports = [
        ImportSeen("a1", "a2", SOURCE, swapped),
        ImportSeen("a1", "a3", SOURCE, apart),
        ImportSeen("a1", "", SOURCE, (), "InvalidError('label appears twice')"),
    ]
    problems = check_lifecycle(log)
    assert len(problems) == 3, problems
    assert "the import of a1's own agent file was refused" in problems[2]
    assert "differs from its history at message 1" in problems[0]
    assert (
        "message 4, the result of tool call call-1, is no longer in its call's step"
        in (problems[1])
    )
    assert with_its_call(apart) == [True, True, True, True, False]


def test_anything_left_of_a_deleted_agent_is_named() -> None:
    log = _good()
    log.deletes = [
        _deleted(runs_found=("run-1",)),
        _deleted("gone", "after repair", messages_found=("m1",), listed=True),
        attrs.evolve(_deleted(), agent_found=True),
    ]
    problems = check_lifecycle(log)
    assert len(problems) == 3, problems
    assert "a1 was deleted (ok), yet at once runs ['run-1'] can still be read" in problems[0]
    assert "after repair its entry in the agents list, messages ['m1']" in problems[1]
    assert "the agent can still be read" in problems[2]


def test_a_free_label_refused_or_a_detach_that_keeps_the_block_or_label_is_named() -> None:
    log = _good()
    base = (("b1", "persona"), ("b2", "human"))
    log.swaps = [
        BlockSwap("a1", "b3", "accepted", (*base, ("b3", "scratch")), base),
        BlockSwap("a1", "b4", "ConflictError", base, base),
        BlockSwap("a1", "b5", "accepted", (*base, ("b5", "scratch")), (*base, ("b5", "scratch"))),
        BlockSwap("a1", "b6", "accepted", (*base, ("b6", "human")), base),
    ]
    problems = check_lifecycle(log)
    assert len(problems) == 4, problems  # b6: two labels alike, and one still there after
    assert "attach of block b4 to a1, whose labels were free for it: ConflictError" in problems[0]
    assert "after detaching block b5 from a1, the agent still shows it" in problems[1]
    assert "a1 shows two blocks labelled 'human' after an attach" in problems[2]
    assert "after detaching block b6 from a1, the agent still shows it or its label" in problems[3]


def test_the_deletes_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_lifecycle_deletes")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["lifecycle.problems"] == 0
    assert first.result.trace_hash == again.result.trace_hash


def test_a_deleted_block_the_actor_still_renders_is_named() -> None:
    log = _good()
    base = (("b1", "persona"), ("b2", "human"))
    prompt = (("(in the prompt)", "persona"), ("(in the prompt)", "human"))
    attached = (*base, ("b7", "scratch"))
    attached_b8 = (*base, ("b8", "scratch"))
    log.swaps = [
        BlockSwap("a1", "b7", "accepted", attached, (*base, *prompt), "delete"),
        BlockSwap(
            "a1",
            "b8",
            "accepted",
            attached_b8,
            (*base, *prompt, ("(in the prompt)", "scratch")),
            "delete",
        ),
    ]
    problems = check_lifecycle(log)
    assert problems == [
        "after deleting block b8 from a1, the agent still shows it or its label: "
        "['persona', 'human', 'persona', 'human', 'scratch']"
    ]


def test_an_update_at_the_limit_refused_or_one_over_accepted_is_named() -> None:
    log = _good()
    log.limits = [("b1", 40, "ok", "refused"), ("b2", 40, "refused", "refused")]
    log.limits.append(("b3", 40, "ok", "ok"))
    assert check_lifecycle(log) == [
        "block b2 (limit 40): an update to 40 characters was refused, one to 41 refused (must "
        "be ok, then refused)",
        "block b3 (limit 40): an update to 40 characters was ok, one to 41 ok (must be ok, then "
        "refused)",
    ]


def test_a_refused_change_the_holders_prompt_shows_is_named() -> None:
    """label_prompts (coreJ, session 14): after a refused attach, the prompt of the activation
    holding the agent shows its blocks as storage has them, each once."""
    stored = (("persona", "p"), ("human", "h"))
    log = _good()
    log.labels = [
        LabelAttempt("a1", "attach", "human", "refused", ("persona", "human"), stored, stored),
        LabelAttempt(
            "a1",
            "attach",
            "human",
            "refused",
            ("persona", "human"),
            stored,
            (*stored, ("tool_usage_rules", "r")),  # compiled from the rules, never stored
        ),
        LabelAttempt("a1", "attach", "human", "refused", ("persona", "human"), stored, None),
    ]
    assert check_lifecycle(log) == []
    log.labels = [
        LabelAttempt(
            "a1",
            "attach",
            "human",
            "refused",
            ("persona", "human"),
            stored,
            (("persona", "p"), ("human", "loose"), ("human", "loose")),
        )
    ]
    [problem] = check_lifecycle(log)
    assert "the prompt of the activation holding a1 shows blocks" in problem


def test_repair_must_leave_a_kept_agent_as_it_was() -> None:
    before = KeptView(("m1", "m2"), (("conv-1", ("m3", "m4")), ("conv-2", ("m5",))))
    log = LifecycleLog()
    log.kept.append(("agent-1", before, before))
    assert check_lifecycle(log) == []
    swept = KeptView(("m1", "m2"), (("conv-1", ()),))
    log.kept[:] = [("agent-1", before, swept)]
    assert check_lifecycle(log) == [
        "agent-1: repair changed conversation conv-1's history (2 messages, then 0)",
        "agent-1: repair removed its conversation conv-2",
    ]
    log.kept[:] = [("agent-1", before, attrs.evolve(before, history=("m1",)))]
    assert check_lifecycle(log) == ["agent-1: repair changed its history (2 messages, then 1)"]
