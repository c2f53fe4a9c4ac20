"""The FRESH-PROMPT oracle (``_agent_fresh``): a prompt's memory against the database."""

from __future__ import annotations

from kelpie_agent.agent import Keys
from kelpie_agent.agent._codec import pack
from kelpie_agent.agent._models import AgentRecord, Block
from kelpie_agent.llm import LlmRequest, Message
from kelpie_dst.shims._storage import SimKVStore
from kelpie_dst.workloads._agent_fresh import FreshPrompts, check_fresh, stored_blocks


def _prompt(blocks: dict[str, str]) -> str:
    rendered = "".join(
        f"<{label}>\n<description>\nd\n</description>\n<metadata>\n- chars_current={len(v)}\n"
        f"- chars_limit=400\n- read_only=false\n</metadata>\n<value>\n{v}\n</value>\n</{label}>\n"
        for label, v in blocks.items()
    )
    return f"You are an agent.\n<memory_blocks>\n{rendered}</memory_blocks>\n"


def test_a_prompt_showing_what_is_stored_holds() -> None:
    assert check_fresh({"human": "likes tea"}, {"human": "likes tea"}, "a1") == []


def test_a_landed_edit_missing_from_the_prompt_is_caught() -> None:
    assert check_fresh({"human": "likes tea"}, {"human": "likes tea. note 7"}, "a1") == [
        "a1: the prompt shows block human as 'likes tea', the database holds 'likes tea. note 7'"
    ]
    assert check_fresh({}, {"human": "x"}, "a1") == [
        "a1: the prompt lacks block human ('x' is stored)"
    ]
    assert check_fresh({"human": "x", "ghost": "y"}, {"human": "x"}, "a1") == [
        "a1: the prompt shows block ghost, which is not stored"
    ]


def test_the_rules_block_letta_compiles_for_each_prompt_is_not_memory() -> None:
    rules = {"tool_usage_rules": "call send_message at most twice"}
    assert check_fresh({"human": "x", **rules}, {"human": "x"}, "a1") == []
    stored = {"human": "x", "tool_usage_rules": "stored"}  # a block a user made with that label
    assert check_fresh({"human": "x", **rules}, stored, "a1") == [
        "a1: the prompt shows block tool_usage_rules as 'call send_message at most twice', the "
        "database holds 'stored'"
    ]


def test_the_hook_reads_the_agents_blocks_from_the_store() -> None:
    store = SimKVStore()
    human = Block(
        id="block-1", label="human", value="likes tea. note 7", limit=400, description="d"
    )
    agent = AgentRecord(id="agent-1", name="agent-1", block_ids=("block-1",))
    store._apply([(Keys("agent-1").agent, pack(agent)), (Keys.block("block-1"), pack(human))])
    assert stored_blocks(store, "agent-1") == {"human": "likes tea. note 7"}
    assert stored_blocks(store, "agent-2") is None
    fresh = FreshPrompts(lambda: store, lambda n: "agent-1" if n == 1 else None)
    stale = LlmRequest(
        model="m", system=_prompt({"human": "likes tea"}), messages=[Message("user", "hi")]
    )
    fresh.step(stale, 1, "t=1.000 n1")
    fresh.step(stale, 2, "t=1.000 n1")  # an agent not created yet: skipped
    good = LlmRequest(
        model="m", system=_prompt({"human": "likes tea. note 7"}), messages=[Message("user", "hi")]
    )
    fresh.step(good, 1, "t=2.000 n1")
    assert fresh.checked == 2
    assert fresh.problems == [
        "t=1.000 n1 a1: the prompt shows block human as 'likes tea', the database holds "
        "'likes tea. note 7'"
    ]


def test_the_stored_system_message_must_show_the_memory_the_prompt_shows() -> None:
    from kelpie_dst.workloads._agent_fresh import check_stored_prompt

    shown = {"human": "likes tea. note 7", "tool_usage_rules": "at most twice"}
    labels = {"human"}
    assert check_stored_prompt(shown, {"human": "likes tea. note 7"}, labels, "a1") == []
    assert check_stored_prompt(shown, {"human": "likes tea"}, labels, "a1") == [
        "a1: the stored system message shows block human as 'likes tea', the prompt as "
        "'likes tea. note 7'"
    ]
    assert check_stored_prompt(shown, None, labels, "a1") == [
        "a1: the stored system message shows no memory, the prompt does"
    ]


def test_the_hook_reads_the_first_stored_message_of_an_agent_without_conversations() -> None:
    from kelpie_agent.agent._messages import SystemMessage, UserMessage
    from kelpie_dst.workloads._agent_fresh import stored_prompt

    store = SimKVStore()
    keys = Keys("agent-1")
    human = Block(
        id="block-1", label="human", value="likes tea. note 7", limit=400, description="d"
    )
    agent = AgentRecord(id="agent-1", name="agent-1", block_ids=("block-1",))
    old = SystemMessage(
        id="message-1", date=0.0, seq=1, content=_prompt({"human": "likes tea"}), kind="prompt"
    )
    later = UserMessage(id="message-2", date=0.0, seq=2, content="hi")
    store._apply(
        [
            (keys.agent, pack(agent)),
            (Keys.block("block-1"), pack(human)),
            (keys.message(1), pack(old)),
            (keys.message(2), pack(later)),
        ]
    )
    assert stored_prompt(store, "agent-1") == _prompt({"human": "likes tea"})
    fresh = FreshPrompts(lambda: store, lambda n: "agent-1")
    good = LlmRequest(
        model="m", system=_prompt({"human": "likes tea. note 7"}), messages=[Message("user", "hi")]
    )
    fresh.step(good, 1, "t=1.000 n1")
    assert fresh.problems == [
        "t=1.000 n1 a1: the stored system message shows block human as 'likes tea', the prompt "
        "as 'likes tea. note 7'"
    ]
    store._apply([(keys.conversation_index(1.0, "conv-1"), b"")])
    assert stored_prompt(store, "agent-1") is None  # which thread a step runs in is unknown
    store._apply([(keys.message(1), pack(later))])
    assert stored_prompt(store, "agent-2") is None


def _metadata(now: float, zone: str, messages: int, passages: int | None) -> str:
    from kelpie_agent.agent._prompt import system_prompt
    from kelpie_agent.agent._runtime import format_time

    agent = AgentRecord(id="agent-1", name="a", agent_type="memgpt_agent", model="m")
    return system_prompt(
        agent, [], now=format_time(now, zone), messages=messages, passages=passages
    )


def test_a_prompts_metadata_is_judged_against_the_database_and_the_clock() -> None:
    from kelpie_dst.workloads._agent_fresh import check_metadata

    now = 1_767_225_600.0 + 3_600 * 14  # 14:00 UTC, 19:30 in Kolkata
    kolkata = _metadata(now, "Asia/Kolkata", 12, 3)
    assert check_metadata(kolkata, (12, 3, "Asia/Kolkata"), now + 30, "a1") == []
    assert check_metadata(_metadata(now, "UTC", 0, None), (0, 5, "UTC"), now, "a1") == []
    [recall] = check_metadata(kolkata, (13, 3, "Asia/Kolkata"), now, "a1")
    assert "12 messages are in recall memory, the database's last is #13" in recall
    [archival] = check_metadata(kolkata, (12, 4, "Asia/Kolkata"), now, "a1")
    assert "3 memories are in archival memory, the database holds 4" in archival
    [zone] = check_metadata(_metadata(now, "UTC", 12, 3), (12, 3, "Asia/Kolkata"), now, "a1")
    assert "02:00:00 PM UTC+0000" in zone and "07:30:00 PM IST+0530" in zone
    [clock] = check_metadata(kolkata, (12, 3, "Asia/Kolkata"), now + 3_600, "a1")
    assert "the node's clock reads" in clock  # an hour off: another clock
