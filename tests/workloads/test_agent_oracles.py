"""The agent workload's boundary oracles on fabricated requests, answers and histories: each
passes what a correct agent does and catches a planted violation."""

from __future__ import annotations

import attrs
import trio
from trio.testing import MockClock

from kelpie_agent.agent import Block
from kelpie_agent.agent._prompt import render_memory
from kelpie_agent.llm import (
    LlmRequest,
    LlmResponse,
    Message,
    TextBlock,
    Tool,
    ToolCall,
    ToolResult,
    Usage,
)
from kelpie_dst.shims.llm import Failure, Plan
from kelpie_dst.workloads._agent_checks import (
    Ack,
    BlockState,
    Msg,
    check_read_only,
    check_step_budgets,
    check_turns,
)
from kelpie_dst.workloads._agent_moves import Expect
from kelpie_dst.workloads._agent_oracles import (
    Applied,
    Ledger,
    PromptAuditor,
    Sent,
    check_effects,
    check_heartbeats,
    check_model_said,
    check_resends,
)
from kelpie_dst.workloads._agent_prompt import agents_marked, agents_named, prompt_blocks

MARK = "mark-a1-qwerty"


def _blocks(**values: str) -> list[Block]:
    defaults = {"persona": f"I am agent 1. My marker is {MARK}.", "scratch": ""}
    defaults.update(values)
    out = [
        Block(id=f"block-{label}", label=label, value=v, limit=80) for label, v in defaults.items()
    ]
    out.append(
        Block(id="block-rules", label="rules", value="mark-a1 rules", limit=40, read_only=True)
    )
    return out


def _system(blocks: list[Block]) -> str:
    return "You are helpful.\n\n" + render_memory(blocks)


def _request(system: str, *messages: Message) -> LlmRequest:
    return LlmRequest(
        "m", messages or (Message("user", (TextBlock("tag-a1-m1 chat x0: hi"),)),), system, (), 100
    )


def _plan(*content: TextBlock | ToolCall, cut: int | None = None) -> Plan:
    response = LlmResponse("msg", "m", tuple(content), "end_turn", Usage(1, 1))
    return Plan(response, (), cut)


def _auditor() -> PromptAuditor:
    auditor = PromptAuditor()
    auditor.markers[1] = MARK
    auditor.read_only[1] = {"rules": "mark-a1 rules"}
    return auditor


def _observe(auditor: PromptAuditor, request: LlmRequest, outcome: Plan | Failure) -> None:
    async def main() -> None:
        auditor.observe(request, outcome, "server-1")

    trio.run(main, clock=MockClock())


def test_prompt_blocks_reads_what_render_memory_writes() -> None:
    blocks = prompt_blocks(_system(_blocks(scratch="two\nlines é🦦")))
    assert blocks is not None
    assert blocks["scratch"].value == "two\nlines é🦦"
    assert blocks["scratch"].chars_current == len("two\nlines é🦦")
    assert blocks["rules"].read_only and blocks["rules"].chars_limit == 40
    assert prompt_blocks("no memory here") is None
    assert agents_named("tag-a3-m1 and mark-a12-x but not stag-a9") == {3, 12}


def test_a_correct_request_passes() -> None:
    auditor = _auditor()
    _observe(auditor, _request(_system(_blocks())), _plan(TextBlock("tag-a1-m1 done")))
    assert auditor.problems == {}
    assert auditor.texts == {"tag-a1-m1 done"}


def test_another_agents_data_in_a_request_is_caught() -> None:
    auditor = _auditor()
    leak = Message("user", (TextBlock("tag-a1-m2 chat x0: see tag-a2-m1"),))
    _observe(auditor, _request(_system(_blocks()), leak), _plan())
    assert auditor.problems["isolation"] == [
        "t=0.000 server-1: one LLM request shows the data of agents a1, a2"
    ]


def test_whole_markers_name_agents_and_cut_ones_do_not() -> None:
    assert agents_marked("tag-a3-m1, (mark-a903). mark-a1 rules: mark-a12-x") == {3, 903, 1, 12}
    # where a cut leaves a marker's first digits: the end of a text, a quote, an escape
    assert agents_marked('{"content":"note (mark-a9') == set()
    assert agents_marked('not a JSON object: \'{\\"content\\":\\"note (mark-a9\'') == set()
    assert agents_marked('"mark-a9\\"') == set()
    assert agents_named('{"content":"note (mark-a9') == {9}  # the model's cautious reading


def test_a_marker_cut_by_max_tokens_names_no_other_agent() -> None:
    """Dlead24-1: agent 903's call cut inside its marker, and the refusal that quotes it back,
    are agent 903's own data, not agent 9's."""
    auditor = _auditor()
    blocks = _blocks(persona="I am the fields walker (mark-a903).")
    blocks[-1] = attrs.evolve(blocks[-1], value="mark-a903 rules")
    system = _system(blocks)
    cut = '{"content":"fields note 5 (mark-a9'
    ask = Message("user", (TextBlock("remember fields note 5 (mark-a903)"),))
    call = Message("assistant", (ToolCall("toolu_1", "archival_memory_insert", cut),))
    refusal = f"invalid_tool_call: the arguments are not a JSON object: {cut!r}"
    result = Message("user", (ToolResult("toolu_1", refusal, True),))
    _observe(auditor, _request(system, ask, call, result), _plan())
    assert "isolation" not in auditor.problems
    leak = Message("user", (TextBlock("see tag-a2-m1 here"),))
    _observe(auditor, _request(system, ask, call, result, leak), _plan())
    assert auditor.problems["isolation"] == [
        "t=0.000 server-1: one LLM request shows the data of agents a2, a903"
    ]


def test_memory_missing_over_its_limit_or_read_only_changed_is_caught() -> None:
    auditor = _auditor()
    blocks = _blocks(persona="I forgot who I am.", scratch="x" * 81)
    blocks[-1] = Block(
        id="block-rules", label="rules", value="mark-a1 hacked", limit=40, read_only=True
    )
    _observe(auditor, _request(_system(blocks)), _plan())
    problems = auditor.problems["memory"]
    assert any("lacks its own memory" in p for p in problems)
    assert any("block scratch with 81 characters" in p for p in problems)
    assert any("read-only block rules" in p for p in problems)


def test_a_read_only_block_shown_as_writable_is_caught_and_named() -> None:
    auditor = _auditor()
    blocks = _blocks()
    blocks[-1] = Block(id="block-rules", label="rules", value="mark-a1 rules", limit=40)
    _observe(auditor, _request(_system(blocks)), _plan())
    assert auditor.problems["memory"] == [
        "t=0.000 server-1: a1's read-only block rules should be 'mark-a1 rules', the prompt "
        "shows 'mark-a1 rules' as a writable block"
    ]


def test_a_request_the_api_refuses_is_caught() -> None:
    auditor = _auditor()
    failure = Failure("bad_request", "messages.0: bad", 400, "invalid_request_error")
    _observe(auditor, _request(_system(_blocks())), failure)
    assert auditor.problems["api"] == [
        "t=0.000 server-1: the agent sent a request the API refuses: messages.0: bad"
    ]


def test_a_tool_result_is_flagged_as_an_error_exactly_when_it_failed() -> None:
    auditor = _auditor()
    ask = Message("user", (TextBlock("tag-a1-m1 chat x1: hi"),))
    call = Message("assistant", (ToolCall("toolu_1", "run_code", "{}"),))
    for content, flag in [
        ('{"status": "Failed", "message": "boom"}', True),
        ('{"status": "OK"}', False),
    ]:
        result = Message("user", (ToolResult("toolu_1", content, flag),))
        _observe(auditor, _request(_system(_blocks()), ask, call, result), _plan())
    assert "api" not in auditor.problems
    for content, flag in [
        ('{"status": "Failed", "message": "boom"}', False),
        ('{"status": "OK"}', True),
    ]:
        result = Message("user", (ToolResult("toolu_1", content, flag),))
        _observe(auditor, _request(_system(_blocks()), ask, call, result), _plan())
    assert auditor.problems["api"] == [
        "t=0.000 server-1: tool result toolu_1 says 'Failed' but is shown without is_error",
        "t=0.000 server-1: tool result toolu_1 says 'OK' but is shown with is_error",
    ]


def test_an_outcome_is_checked_once_against_its_expectation() -> None:
    auditor = _auditor()
    auditor.expect(Expect(1, "toolu_1", "memory_rethink", "{}", False, "rethink to 41/40"))
    auditor.expect(Expect(1, "toolu_2", "memory_rethink", "{}", True, "rethink to 40/40"))
    ask = Message("user", (TextBlock("tag-a1-m1 edge x1: hi"),))
    call = Message("assistant", (ToolCall("toolu_1", "memory_rethink", "{}"),))
    ok = Message("user", (ToolResult("toolu_1", '{"status": "OK"}', False),))
    _observe(auditor, _request(_system(_blocks()), ask, call, ok), _plan())
    _observe(auditor, _request(_system(_blocks()), ask, call, ok), _plan())
    assert auditor.checked_outcomes == 1
    assert auditor.problems["outcome"] == [
        "t=0.000 server-1: a1's memory_rethink call toolu_1 (rethink to 41/40) succeeded: "
        '{"status": "OK"}'
    ]
    assert "toolu_2" in auditor.expected  # never answered: nothing to check


def test_the_prompt_after_an_edit_must_show_the_value_it_left() -> None:
    """A success with the wrong text, or a refusal that changed the block, is caught in the
    next prompt; the right value passes."""
    auditor = _auditor()
    ask = Message("user", (TextBlock("tag-a1-m1 edge x2: hi"),))
    for ident, ok, after in (("toolu_1", True, "kelp x"), ("toolu_2", False, "kelp tide kelp")):
        args = '{"label":"scratch"}'
        auditor.expect(
            Expect(1, ident, "memory_replace", args, ok, "why", after=("scratch", after))
        )
    shown = _system(_blocks(scratch="kelp x"))
    for ident, content, error in (
        ("toolu_1", '{"status": "OK"}', False),
        ("toolu_2", '{"status": "Failed"}', True),
    ):
        call = Message("assistant", (ToolCall(ident, "memory_replace", '{"label":"scratch"}'),))
        result = Message("user", (ToolResult(ident, content, error),))
        _observe(auditor, _request(shown, ask, call, result), _plan())
    assert auditor.problems["outcome"] == [
        "t=0.000 server-1: after a1's memory_replace call toolu_2 (why) the prompt shows scratch "
        "as 'kelp x', not 'kelp tide kelp'"
    ]


def test_a_call_a_fault_changed_loses_its_expectation() -> None:
    auditor = _auditor()
    auditor.expect(Expect(1, "toolu_1", "memory_rethink", '{"a":1}', True, "fits"))
    _observe(
        auditor, _request(_system(_blocks())), _plan(ToolCall("toolu_1", "memory_rethink", '{"a":'))
    )
    assert "toolu_1" not in auditor.expected


def test_a_cut_stream_is_never_a_complete_answer() -> None:
    auditor = _auditor()
    _observe(auditor, _request(_system(_blocks())), _plan(TextBlock("tag-a1-m1 do"), cut=3))
    _observe(auditor, _request(_system(_blocks())), _plan(TextBlock("tag-a1-m1 done")))
    stored = {
        "agent-1": [
            Msg("m1", 1, "r", "user_message", "tag-a1-m1 chat x0: hi", kind="input"),
            Msg("m2", 2, "r", "assistant_message", "tag-a1-m1 do"),
        ]
    }
    assert check_model_said(stored, auditor.texts, auditor.calls) == [
        "agent-1: stored assistant_message m2 'tag-a1-m1 do' is not what the model said in any "
        "complete answer"
    ]
    stored["agent-1"][1] = Msg("m2", 2, "r", "assistant_message", "tag-a1-m1 done")
    assert check_model_said(stored, auditor.texts, auditor.calls) == []


def test_effects_exactly_once() -> None:
    calls = {"k1": ("n1", False), "k2": ("n2", False), "k3": ("n3", True)}
    returns = {"k1": (10, "success"), "k2": (20, "success")}
    clean = [Applied(5, 1.0, "k1", "n1", "mcp"), Applied(15, 2.0, "k2", "n2", "sandbox")]
    assert check_effects(clean, calls, returns) == []
    # an in-flight call retried before its result was committed is deduplicated: fine
    assert check_effects([*clean, Applied(6, 1.5, "k1", "n1", "mcp")], calls, returns) == []
    problems = check_effects(
        [
            Applied(5, 1.0, "k1", "n1", "mcp"),
            Applied(11, 3.0, "k1", "n1", "mcp"),  # re-run after its result was committed
            Applied(15, 2.0, "k9", "n2", "sandbox"),  # from an answer cut off mid-stream
            Applied(16, 2.0, "k3", "n3", "custom"),  # a refused call ran
            Applied(17, 2.0, "x", "n4", "custom"),  # another policy's arguments: not judged
        ],
        calls,
        returns,
        planned={"k1", "k2", "k3", "k9"},
    )
    assert problems == [
        "mcp: 'n1' (k1) ran again at t=3.000 after its result was committed "
        "(journal entry 10 < 11)",
        "sandbox: 'n2' took effect under k9, a call the model never completed",
        "custom: 'n3' ran although the call k3 must be refused",
        "'n2' (k2) reported success but never took effect",
    ]
    twice = check_effects(
        [Applied(5, 1.0, "k1", "n1", "mcp"), Applied(6, 1.0, "k2", "n1", "mcp")],
        {"k1": ("n1", False), "k2": ("n1", False)},
        {},
    )
    assert twice == ["'n1' took effect 2 times, under k1, k2"]


def test_a_timed_out_mcp_call_resent_by_its_activation_is_caught() -> None:
    twice = [Applied(5, 1.0, "k1", "n1", "mcp:lookup"), Applied(9, 12.0, "k1", "n1", "mcp:lookup")]
    timed_out = Sent("act#1", "k1", "lookup", True, 0.5, 2.0)  # its effect at 1.0, answer lost
    answered = Sent("act#1", "k1", "lookup", False, 11.0, 13.0)  # the resend, effect at 12.0
    problems = check_resends([timed_out, answered], twice)
    assert problems == [
        "mcp:lookup: call k1 may have run (it timed out or its server died) and act#1 sent it "
        "again: its effect happened 2 times"
    ]
    # the resend never took effect (the server died before running it): harmless
    assert check_resends([timed_out, answered], twice[:1]) == []
    # the timed-out send never took effect (the tool hung before running): the resend is the
    # first effect, and a later one by another activation (recovery) is not this one's
    hung = Sent("act#1", "k1", "lookup", True, 0.0, 0.9)
    assert check_resends([hung, answered], twice) == []
    # recovery: another activation sends the call again (check_effects judges that one)
    assert check_resends([timed_out, Sent("act#2", "k1", "lookup", False, 11.0, 13.0)], twice) == []
    # a resend after a send that failed without its effect (the server died before running
    # it) repeats nothing
    assert check_resends([answered, answered], twice) == []
    # one send whose window holds two effects, with no other send of the call in flight, is a
    # resend hidden inside the client (Dlead25-1)
    inside = Sent("act#1", "k1", "lookup", False, 0.5, 13.0)
    [problem] = check_resends([inside], twice)
    assert "one send of call k1 by act#1 took effect 2 times" in problem
    assert check_resends([inside, Sent("act#2", "k1", "lookup", False, 11.0, 13.0)], twice) == []


def test_the_ledger_dedups_by_key() -> None:
    ledger = Ledger(lambda: 7)

    async def main() -> list[str]:
        return [ledger.apply("k", "n", "mcp"), ledger.apply("k", "n", "mcp")]

    assert trio.run(main) == ["applied", "already applied"]
    assert [a.at for a in ledger.applied] == [7, 7]


def test_turns_end_with_a_reply_to_their_own_message() -> None:
    text = "tag-a1-m2 memory x1: kelp"
    good = Ack("a1", 2, "o2", text, "r", (), "end_turn", "tag-a1-m2 done after 1 steps.")
    assert check_turns([good], {}) == []
    assert check_turns([Ack("a1", 2, "o2", text, "r", (), "max_steps", None)], {}) == []
    problems = check_turns(
        [
            Ack("a1", 2, "o2", text, "r", (), "end_turn", None),
            Ack("a1", 2, "o2", text, "r", (), "end_turn", "tag-a1-m1 done after 1 steps."),
            Ack(
                "a1",
                3,
                "o3",
                "tag-a1-m3 recall x0: kelp",
                "r",
                (),
                "end_turn",
                "tag-a1-m3 done: recall nothing",
            ),
        ],
        {"a1": MARK},
    )
    assert [p.split("): ", 1)[1][:28] for p in problems] == [
        "the turn ended (end_turn) wi",
        "the reply 'tag-a1-m1 done af",
        "the reply 'tag-a1-m3 done: r",
    ]
    assert "answers another message" in problems[1]
    assert "does not quote the agent's own memory" in problems[2]


def test_read_only_blocks_never_change() -> None:
    expected = {("a1", "rules"): "keep"}
    assert check_read_only([BlockState("a1", "rules", "keep", 10)], expected) == []
    assert check_read_only([BlockState("a1", "rules", "changed", 10)], expected) == [
        "a1: read-only block rules is 'changed', not 'keep'"
    ]


def test_step_budgets_and_usage_are_exact() -> None:
    def run(steps: int) -> list[Msg]:
        return [
            Msg(f"m{i}", i, "r", "tool_call_message", "{}", tool="t", step_id=f"s{i}")
            for i in range(steps)
        ]

    text = "tag-a1-m1 memory x3: kelp"
    stopped = Ack("a1", 1, "o1", text, "r", (), "max_steps", None, max_steps=3, steps=3)
    assert check_step_budgets([stopped], {"a1": run(3)}) == []
    assert check_step_budgets([stopped], {"a1": run(4)}) == [
        "a1 message #1 (o1): usage reports 3 steps, the run stored 4",
        "a1 message #1 (o1): stopped by max_steps=3 after 4 steps",
    ]
    ended = Ack("a1", 1, "o1", text, "r", (), "end_turn", "tag-a1-m1 done", max_steps=3)
    assert check_step_budgets([ended], {"a1": run(3)}) == []
    assert check_step_budgets([ended], {"a1": run(4)}) == [
        "a1 message #1 (o1): 4 steps ran under max_steps=3"
    ]


def test_only_memgpt_agents_are_shown_request_heartbeat() -> None:
    beating = Tool(
        "archival_memory_insert", "", {"type": "object", "properties": {"request_heartbeat": {}}}
    )
    plain = Tool("send_message", "", {"type": "object", "properties": {"message": {}}})
    request = attrs.evolve(_request(_system(_blocks())), tools=(plain, beating))
    assert check_heartbeats(request, 1, "memgpt_agent", "t") == []
    assert check_heartbeats(request, 1, None, "t") == []  # an agent the workload did not plan
    for agent_type in ("letta_v1_agent", "react_agent"):
        [problem] = check_heartbeats(request, 1, agent_type, "t")
        assert "archival_memory_insert" in problem and agent_type in problem
    auditor = _auditor()
    auditor.types[1] = "letta_v1_agent"
    _observe(auditor, request, _plan(TextBlock("tag-a1-m1 done")))
    assert "request_heartbeat" in auditor.problems["api"][0]
