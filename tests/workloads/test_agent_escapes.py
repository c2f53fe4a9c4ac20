"""``stream_escapes``: the simulated model cuts its deltas at every position, inside JSON
escapes too, and ASCII-escapes tool-call JSON; the ``send_message`` extractor gives the
stored message back byte for byte for any cut; off by default nothing changes; the
``agent_interrupted`` scenario passes and repeats itself."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

import pytest

from kelpie_agent.agent._events import SendMessageExtractor
from kelpie_agent.llm import LlmRequest, Message, TextDelta, Tool, ToolCallDelta
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.shims import StreamShape
from kelpie_dst.shims.llm import Call
from kelpie_dst.shims.llm._engine import ARGS_CHUNK, Plan, SimLlmEngine
from kelpie_dst.workloads._agent_policy import ESCAPES

TEXT = "tag-a1-m2 done after 1 steps." + ESCAPES


class Says:
    """A policy answering with a send_message call and a text."""

    def respond(self, request: LlmRequest, rng: random.Random) -> tuple[str | Call, ...]:
        return ("thinking " + TEXT, Call("send_message", {"message": TEXT}))


REQUEST = LlmRequest("claude", (Message("user", "hi"),), tools=(Tool("send_message", "say it"),))


def plan(shape: StreamShape | None, seed: int = 0) -> Plan:
    got = SimLlmEngine(Says(), seed=seed, shape=shape).plan(
        REQUEST, streaming=True, sim=None, node=None
    )
    assert isinstance(got, Plan)
    return got


def deltas(p: Plan, kind: type) -> list[str]:
    return [
        c.text if isinstance(c, TextDelta) else c.partial_json
        for _, c in p.steps
        if isinstance(c, kind)
    ]


def test_off_by_default_the_stream_is_as_before() -> None:
    p = plan(None)
    args = deltas(p, ToolCallDelta)
    assert all(len(a) == ARGS_CHUNK for a in args[:-1])
    assert "".join(args) == json.dumps({"message": TEXT}, separators=(",", ":"), ensure_ascii=False)
    assert plan(StreamShape()).steps == p.steps


def test_cut_anywhere_and_escapes_keep_the_value_and_cut_inside_escapes() -> None:
    shape = StreamShape(escapes=True, cut_anywhere=True)
    seen_after_backslash = 0
    for seed in range(40):
        p = plan(shape, seed)
        args = deltas(p, ToolCallDelta)
        joined = "".join(args)
        assert joined.isascii() and "\\ud83e\\udda6" in joined  # a surrogate pair
        assert json.loads(joined) == {"message": TEXT}
        assert "".join(deltas(p, TextDelta)) == "thinking " + TEXT
        assert all(1 <= len(a) <= shape.max_cut for a in args)
        seen_after_backslash += sum(a.endswith("\\") for a in args)
    assert seen_after_backslash > 10  # boundaries right after an escape's backslash


def extract(pieces: Sequence[str]) -> str:
    extractor = SendMessageExtractor()
    return "".join(extractor.feed(p) for p in pieces)


@pytest.mark.parametrize("ascii_only", [True, False])
def test_the_extractor_gives_the_message_back_for_every_cut(ascii_only: bool) -> None:
    raw = json.dumps({"message": TEXT}, separators=(",", ":"), ensure_ascii=ascii_only)
    for at in range(1, len(raw)):
        assert extract([raw[:at], raw[at:]]) == TEXT, f"cut at {at}: {raw[at - 3 : at + 3]!r}"
    assert extract(list(raw)) == TEXT  # one character at a time


@pytest.mark.slow  # two runs of ~15 s each on a loaded machine
def test_agent_interrupted_passes_and_repeats_itself() -> None:
    small = ["workload.params.agents=2", "workload.params.messages=2"]
    scenario = load_scenario("agent_interrupted", small)
    first, again = run_scenario(scenario, 3), run_scenario(scenario, 3)
    failure = first.result.failure
    assert first.ok, f"{failure and failure.describe()}\n{first.replay_line()}"
    assert first.metrics["streams"] > 0 and first.metrics["lists.walks"] > 0
    assert first.result.trace_hash == again.result.trace_hash
