"""The agent workload's checkers on fabricated histories: each passes a clean record and
catches its planted violation."""

from __future__ import annotations

import attrs

from kelpie_dst.workloads.agents import (
    Ack,
    BlockState,
    Commit,
    Execution,
    Fence,
    Msg,
    Observed,
    Owner,
    RequestRecord,
    StreamRecord,
    check_acknowledged,
    check_blocks,
    check_completed,
    check_exactly_once,
    check_initial,
    check_no_mixing,
    check_single_activation,
    check_streams,
)

A, B = "agent-a", "agent-b"
TEXT = "tag-a1-m1 python x1: kelp tide"


def _history() -> list[Msg]:
    return [
        Msg("m1", 1, "run-1", "user_message", TEXT, otid="o1", kind="input"),
        Msg("m2", 2, "run-1", "tool_call_message", '{"code": "print(1)"}', tool="run_code"),
        Msg("m3", 3, "run-1", "tool_return_message", "tag-a1-m1 step 1 7", tool="run_code"),
        Msg("m4", 4, "run-1", "assistant_message", "tag-a1-m1 done after 1 steps."),
    ]


def _ack() -> Ack:
    return Ack(A, 1, "o1", TEXT, "run-1", ("m1", "m2", "m3", "m4"), "end_turn")


def test_an_acknowledged_message_kept_once_passes() -> None:
    assert check_acknowledged([_ack()], {A: _history()}) == []


def test_a_lost_input_or_response_is_caught() -> None:
    history = _history()
    problems = check_acknowledged([_ack()], {A: history[1:]})
    assert problems == [
        f"{A} message #1 (o1): the acknowledged input is not in the history",
        f"{A} message #1 (o1): response message m1 was lost",
    ]
    problems = check_acknowledged([_ack()], {A: history[:3]})
    assert problems == [f"{A} message #1 (o1): response message m4 was lost"]


def test_an_input_stored_twice_is_caught() -> None:
    """A retry that started a second run (no otid dedup) stores the input twice."""
    history = [*_history(), Msg("m5", 5, "run-2", "user_message", TEXT, kind="input")]
    [problem] = check_acknowledged([_ack()], {A: history})
    assert "the input is stored 2 times (runs run-1, run-2)" in problem


def test_a_response_in_another_run_or_a_duplicate_id_is_caught() -> None:
    history = _history()
    history[3] = Msg("m4", 4, "run-9", "assistant_message", "x")
    assert check_acknowledged([_ack()], {A: history}) == [
        f"{A} message #1 (o1): message m4 is stored in run run-9, not run-1"
    ]
    doubled = [*_history(), _history()[2]]
    assert check_acknowledged([], {A: doubled}) == [f"{A}: message m3 is stored 2 times"]


def _acquire(node: str, epoch: int, token: str, actor: str = "agent/a") -> list[Commit | Observed]:
    owner = Owner(node, epoch, token)
    return [
        Commit(1.0, node, owners=((actor, owner),)),
        Observed(1.0, node, "actor.acquired", actor, epoch),
    ]


def _write(node: str, owner: Owner | None, key: str = "msg/a/0001") -> Commit:
    return Commit(2.0, node, agent_writes=(key,), fences=(Fence("agent/a", owner),))


def test_writes_by_successive_owners_pass() -> None:
    first, second = Owner("n1", 1, "t1"), Owner("n2", 2, "t2")
    log = [
        *_acquire("n1", 1, "t1"),
        _write("n1", first),
        _write("n1", first, "session/a"),
        *_acquire("n2", 2, "t2"),
        _write("n2", second),
    ]
    assert check_single_activation(log) == []


def test_a_stale_write_after_a_takeover_is_caught() -> None:
    first = Owner("n1", 1, "t1")
    log = [*_acquire("n1", 1, "t1"), _write("n1", first), *_acquire("n2", 2, "t2")]
    [problem] = check_single_activation([*log, _write("n1", first)])
    assert "n1 committed under" in problem and "while the lease was" in problem


def test_interleaved_activations_are_caught() -> None:
    """Two activations holding committed writes at once: their writes alternate."""
    first, second = Owner("n1", 1, "t1"), Owner("n2", 2, "t2")
    log = [
        *_acquire("n1", 1, "t1"),
        _write("n1", first),
        *_acquire("n2", 2, "t2"),
        _write("n2", second),
        Commit(3.0, "n1", owners=(("agent/a", first),)),  # the lease record flips back
        _write("n1", first),
    ]
    problems = check_single_activation(log)
    assert any("activation t1 wrote again after t2 had written" in p for p in problems)
    assert any("committed after epoch 2 was acquired on n2" in p for p in problems)


def test_a_write_by_another_activation_or_life_of_the_same_node_is_caught() -> None:
    """A fence that compares the node, not the activation's token, lets a stale activation on
    the same node write under its successor's lease: the committing activation (and the
    node's life) must be the one that acquired it."""
    second = Owner("n1", 2, "t2")
    acquired = [
        Commit(1.0, "n1", owners=(("agent/a", second),), incarnation=1, writer="act#2"),
        Observed(1.0, "n1", "actor.acquired", "agent/a", 2),
    ]
    fenced = (Fence("agent/a", second),)
    own = Commit(2.0, "n1", ("msg/a/1",), fences=fenced, incarnation=1, writer="act#2")
    assert check_single_activation([*acquired, own]) == []
    stale = Commit(2.0, "n1", ("msg/a/1",), fences=fenced, incarnation=1, writer="act#1")
    assert check_single_activation([*acquired, stale]) == [
        "t=2.000 agent/a: act#1 committed under the lease that act#2 acquired"
    ]
    earlier_life = Commit(2.0, "n1", ("msg/a/1",), fences=fenced, incarnation=0, writer=None)
    assert check_single_activation([*acquired, earlier_life]) == [
        "t=2.000 agent/a: life 0 of n1 committed under the lease that life 1 of n1 acquired"
    ]


def test_unfenced_writes_and_unannounced_epochs_are_caught() -> None:
    log: list[Commit | Observed] = [Commit(1.0, "n1", agent_writes=("agent/a",))]
    assert check_single_activation(log) == ["t=1.000 n1: unfenced write of agent/a"]
    owned = Commit(0.5, "n1", ("block/b1",), fences=(Fence("agent/a", Owner("n1", 1, "t")),))
    bare = Commit(1.0, "n1", agent_writes=("block/b1",))
    assert check_single_activation([owned, bare]) == ["t=1.000 n1: an unfenced write of a block"]
    # a standalone block (``blocks.create``, written again by a retry) is no agent's: bare
    assert check_single_activation([bare, bare]) == []
    owner = Owner("n1", 1, "t1")
    log = [Commit(1.0, "n1", owners=(("agent/a", owner),)), _write("n1", owner)]
    assert check_single_activation(log) == [
        "t=2.000 agent/a: n1 committed as epoch 1 without having acquired it"
    ]


def test_messages_that_belong_to_another_agent_are_caught() -> None:
    sent = {A: [TEXT], B: []}
    numbers = {A: 1, B: 2}
    assert check_no_mixing({A: _history()}, [], sent, numbers) == []
    leaked = [*_history(), Msg("x", 9, "run-1", "tool_return_message", "lookup: TAG-A2-M1 step 1")]
    assert check_no_mixing({A: leaked}, [], sent, numbers) == [
        f"{A} (a1): tool_return_message x mentions TAG-A2-M1"
    ]
    foreign = [*_history(), Msg("y", 9, "run-3", "user_message", "hello", kind="input")]
    assert check_no_mixing({A: foreign}, [], sent, numbers) == [
        f"{A}: input 'hello' was never sent to it"
    ]
    block = BlockState(A, "human", "tag-a1-m1 step 1. tag-a2-m3 step 1.", 400)
    assert check_no_mixing({}, [block], sent, numbers) == [f"{A}: block human holds tag-a2-m3"]


def test_requests_not_acknowledged_are_caught() -> None:
    done = RequestRecord(A, "a1 #1", "acked", 2)
    failed = RequestRecord(A, "a1 #2", "failed", 1, "AgentNotFoundError: gone")
    pending = RequestRecord(A, "a1 #3", "pending", 7)
    assert check_completed([done]) == []
    assert check_completed([done, failed, pending]) == [
        "a1 #2: failed after 1 attempts: AgentNotFoundError: gone",
        "a1 #3: pending after 7 attempts",
    ]


def test_blocks_over_their_limit_are_caught() -> None:
    assert check_blocks([BlockState(A, "human", "x" * 10, 10)]) == []
    assert check_blocks([BlockState(A, "human", "x" * 11, 10)]) == [
        f"{A}: block human holds 11 characters, over its limit 10"
    ]


def test_streamed_pieces_that_differ_from_the_result_are_caught() -> None:
    result = (("m4/assistant_message", "tag-a1-m1 done."),)
    good = StreamRecord(A, 1, (("m4/assistant_message", "tag-a1-m1 done."),), result)
    cut = StreamRecord(A, 1, (("m4/assistant_message", "tag-a1-m1 do"),), result)
    retried = StreamRecord(A, 1, (("m9/assistant_message", "tag-a1"),), result)  # never stored
    assert check_streams([good, retried]) == []
    assert check_streams([cut]) == [
        f"{A} message #1: streamed m4/assistant_message as 'tag-a1-m1 do', the result holds "
        "'tag-a1-m1 done.'"
    ]


def test_repeated_tool_effects_are_caught() -> None:
    once = BlockState(A, "human", "tag-a1-m1 step 1. tag-a1-m1 step 2.", 400)
    twice = BlockState(A, "human", "tag-a1-m1 step 1. tag-a1-m1 step 1.", 400)
    assert check_exactly_once([once], {A: ["tag-a1-m2 step 1: kelp"]}, [], []) == []
    assert check_exactly_once([twice], {}, [], []) == [
        f"{A}: block human holds 'tag-a1-m1 step 1' 2 times"
    ]
    passages = {A: ["tag-a1-m2 step 1: kelp", "tag-a1-m2 step 1: kelp"]}
    assert check_exactly_once([], passages, [], []) == [
        f"{A}: archival memory holds 'tag-a1-m2 step 1' 2 times"
    ]
    journal: list[Commit | Observed] = [
        Commit(1.0, "n1", ("msg/a/0003",), results=("lookup: tag-a1-m3 step 1",))
    ]
    before = Execution(0, "lookup", "tag-a1-m3 step 1")  # sent, then its result was stored
    again = Execution(1, "lookup", "tag-a1-m3 step 1")  # sent after the result was stored
    assert check_exactly_once([], {}, journal, [before, before]) == []  # at-least-once
    [problem] = check_exactly_once([], {}, journal, [before, again])
    assert "lookup('tag-a1-m3 step 1') was sent again (entry 1)" in problem


def _first(memgpt: bool) -> list[Msg]:
    system = Msg("s", 1, None, "system_message", "You are...\n<memory_blocks>\n</memory_blocks>")
    if not memgpt:
        return [system]
    return [
        system,
        Msg("b1", 2, None, "reasoning_message", "Bootup sequence complete."),
        Msg("b2", 3, None, "tool_call_message", '{"message": "hi"}', tool="send_message"),
        Msg("b3", 4, None, "tool_return_message", '{"status": "OK"}', tool="send_message"),
        Msg("b4", 5, None, "user_message", '{"type": "login"}', kind="login"),
    ]


def test_first_messages_once_at_the_start_pass() -> None:
    histories = {A: [*_first(True), *_history()], B: [*_first(False), *_history()]}
    assert check_initial(histories, {A: "memgpt_agent", B: "letta_v1_agent"}) == []


def test_missing_repeated_or_misplaced_first_messages_are_caught() -> None:
    types = {A: "memgpt_agent", B: "letta_v1_agent"}
    # written apart from the agent: a crash in between leaves none
    assert check_initial({B: _history()}, types) == [
        f"{B}: the history does not start with its system message",
        f"{B}: 0 system messages with memory, not 1",
        f"{B}: first message m1 is in run run-1",
    ]
    # stored twice (a retried creation wrote them again)
    twice = [*_first(True), *_first(True)[1:], *_history()]
    assert check_initial({A: twice}, types) == [f"{A}: 2 login events, expected 1"]
    # a rebuilt system message appended instead of replacing message 0
    again = [*_first(False), *_history(), _first(False)[0]]
    assert check_initial({B: again}, types) == [f"{B}: 2 system messages with memory, not 1"]
    # the boot sequence stored inside the first run
    inside = [_first(True)[0], *(attrs.evolve(m, run_id="run-1") for m in _first(True)[1:])]
    assert check_initial({A: [*inside, *_history()]}, types) == [
        f"{A}: first message b1 is in run run-1"
    ]
    # a letta_v1 agent with memgpt's boot messages
    assert check_initial({B: [*_first(True), *_history()]}, types) == [
        f"{B}: 1 login events, expected 0"
    ]
