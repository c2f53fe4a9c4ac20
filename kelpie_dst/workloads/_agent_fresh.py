"""Read your acknowledged writes, as the model sees them: the FRESH-PROMPT oracle
(``fresh_prompts``).

An agent's memory blocks are written only by that agent's own activation (its tools, and the
API's block edits, which go through it), one request at a time, and a step renders the blocks
into the system prompt right before it calls the model. So whenever the model is called for a
step, **the memory it is shown is the memory the database holds at that moment**: every block
the agent has, with the value last committed. In particular a write that *landed* although the
agent was never told so (a commit whose acknowledgement was lost and whose read-back gave up:
``storage.commit_unknown`` with ``lag``) must show in every later prompt: the agent has to
reload what it cannot be sure of (its runtime is stale) before it works from memory again.
A runtime that keeps serving from memory after storage gave up shows the model an edit that
never happened, or hides one that did, and the next edit built on it silently overwrites the
stored one.

The check reads the database host's store directly (no fault, no request, no random draw), so
enabling it moves no seed. Compaction requests carry no memory and are skipped.
:func:`check_fresh` is the pure checker (``tests/workloads/test_agent_fresh.py``).

**The stored system message shows it too** (session 12, coreH). Like Letta's
``rebuild_system_prompt_async``, a step rewrites the thread's stored system message (its first
message, listed by ``GET .../messages``) in place when the memory it shows is not the memory the
step renders, before it calls the model. So at every model call for an agent with no
conversations (whose one thread is the one the step runs in), the memory blocks of the stored
first message, read from the database, are the blocks the prompt shows
(:func:`check_stored_prompt`): a rebuild that looks for the system message in the wrong place
(the head of a history longer than the in-memory window) leaves it showing stale memory.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Mapping
from zoneinfo import ZoneInfo

from kelpie_agent.actors import ActorId
from kelpie_agent.actors._lease import OWNER, actor_key, decode_owner
from kelpie_agent.agent import Keys
from kelpie_agent.agent._codec import unpack
from kelpie_agent.llm import LlmRequest

from ..shims._storage import SimKVStore
from ._agent_prompt import prompt_blocks
from ._prompt_fields import check_block_fields, shown_fields, stored_fields

__all__ = [
    "FreshPrompts",
    "check_fresh",
    "check_metadata",
    "holder",
    "stored_blocks",
    "stored_counts",
    "stored_prompt",
]

_MAX_PROBLEMS = 20
EPHEMERAL = frozenset({"tool_usage_rules"})
"""Blocks a prompt shows that are not memory: Letta compiles ``tool_usage_rules`` from the
agent's tool rules for each prompt and never stores it (``_agent_rules`` checks what it says)."""


def check_fresh(shown: Mapping[str, str], stored: Mapping[str, str], who: str) -> list[str]:
    """The blocks a prompt showed (label -> value) against the database's (label -> value)."""
    problems = []
    for label in sorted(set(shown) | set(stored)):
        got, want = shown.get(label), stored.get(label)
        if got == want or (want is None and label in EPHEMERAL):
            continue
        if got is None:
            problems.append(f"{who}: the prompt lacks block {label} ({want!r:.60} is stored)")
        elif want is None:
            problems.append(f"{who}: the prompt shows block {label}, which is not stored")
        else:
            problems.append(
                f"{who}: the prompt shows block {label} as {got[-60:]!r}, the database holds "
                f"{want[-60:]!r}"
            )
    return problems


def holder(store: SimKVStore, agent_id: str) -> str | None:
    """The node whose activation owns the agent's lease as the database holds it now (None:
    nobody, or an unreadable record)."""
    try:
        owner = decode_owner(store._get(actor_key(OWNER, ActorId("agent", agent_id))))
    except Exception:
        return None
    return None if owner is None else owner.node


def stored_blocks(store: SimKVStore, agent_id: str) -> dict[str, str] | None:
    """label -> value of the agent's blocks as the database holds them (None: no agent, or a
    record that cannot be read, e.g. corrupted)."""
    try:
        raw = store._get(Keys(agent_id).agent)
        if raw is None:
            return None
        agent = unpack(raw)
        blocks = {}
        for block_id in agent.block_ids:
            data = store._get(Keys.block(block_id))
            if data is not None:
                block = unpack(data)
                blocks[block.label] = block.value
        return blocks
    except Exception:
        return None


def check_stored_prompt(
    shown: Mapping[str, str], stored: Mapping[str, str] | None, labels: set[str], who: str
) -> list[str]:
    """The memory blocks (label -> value) a prompt showed against those of the thread's stored
    system message (None: it shows no memory section), for the stored blocks' ``labels``."""
    if stored is None:
        return [f"{who}: the stored system message shows no memory, the prompt does"]
    problems = []
    for label in sorted(labels - EPHEMERAL):
        got, want = stored.get(label), shown.get(label)
        if got != want:
            problems.append(
                f"{who}: the stored system message shows block {label} as {str(got)[-60:]!r}, "
                f"the prompt as {str(want)[-60:]!r}"
            )
    return problems


_TIME = re.compile(r"^- The current time is: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [AP]M) (\S+)$", re.M)
_RECALL = re.compile(r"^- (\d+) previous messages between you and the user are stored", re.M)
_ARCHIVAL = re.compile(r"^- (\d+) total memories you created are stored in archival", re.M)
CLOCK_SLACK = 120.0
"""Seconds the time a prompt shows may be from the node's clock when the model is called: the
prompt is compiled before the step's last reads and writes (slow under storage storms) and
clocks jump; a time from the wrong clock or in the wrong zone is hours or decades off."""


def stored_counts(store: SimKVStore, agent_id: str) -> tuple[int, int, str] | None:
    """(the seq of the agent's last stored message, its stored archival passages, its
    timezone); None: the agent has conversations (which thread a step runs in is not known
    here), or a record that cannot be read."""
    keys = Keys(agent_id)
    try:
        if store._scan(keys.conversations, Keys.prefix_end(keys.conversations), 1, False):
            return None
        raw = store._get(keys.agent)
        last = store._scan(keys.messages, Keys.prefix_end(keys.messages), 1, True)
        if raw is None or not last:
            return None
        passages = len(store._scan(keys.passages, Keys.prefix_end(keys.passages), None, False))
        return unpack(last[0][1]).seq, passages, unpack(raw).timezone
    except Exception:
        return None


def check_metadata(system: str, stored: tuple[int, int, str], now: float, who: str) -> list[str]:
    """The ``<memory_metadata>`` of a prompt against the database when the model is called:
    the messages in recall memory are the thread's (the seq of its last stored message), the
    archival memories are the agent's stored passages, and the current time is the node's
    clock (``now``, within :data:`CLOCK_SLACK`) in the agent's timezone."""
    last_seq, passages, timezone = stored
    problems = []
    recall = _RECALL.search(system)
    if recall is not None and int(recall.group(1)) != last_seq:
        problems.append(
            f"{who}: the prompt says {recall.group(1)} messages are in recall memory, the "
            f"database's last is #{last_seq}"
        )
    archival = _ARCHIVAL.search(system)
    if archival is not None and int(archival.group(1)) != passages:
        problems.append(
            f"{who}: the prompt says {archival.group(1)} memories are in archival memory, the "
            f"database holds {passages}"
        )
    shown = _TIME.search(system)
    if shown is not None:
        try:
            zone = _dt.datetime.fromtimestamp(now, tz=ZoneInfo(timezone))
        except Exception:  # a zone this host does not know: the runtime's fallback decides
            return problems
        want = zone.strftime("%Z%z")
        text = shown.group(1)
        at = _dt.datetime.strptime(text, "%Y-%m-%d %I:%M:%S %p").replace(tzinfo=zone.tzinfo)
        if shown.group(2) != want or abs(at.timestamp() - now) > CLOCK_SLACK:
            problems.append(
                f"{who}: the prompt's current time is {shown.group(1)} {shown.group(2)}, the "
                f"node's clock reads {zone.strftime('%Y-%m-%d %I:%M:%S %p')} {want} "
                f"(the agent's timezone is {timezone})"
            )
    return problems


def stored_prompt(store: SimKVStore, agent_id: str) -> str | None:
    """The content of the agent's stored system message (the first message of its own
    history), or None: the agent has conversations (which thread a step runs in is not
    known here), no stored prompt first, or a record that cannot be read."""
    keys = Keys(agent_id)
    try:
        if store._scan(keys.conversations, Keys.prefix_end(keys.conversations), 1, False):
            return None
        rows = store._scan(keys.messages, Keys.prefix_end(keys.messages), 1, False)
        if not rows:
            return None
        first = unpack(rows[0][1])
    except Exception:
        return None
    if getattr(first, "message_type", None) != "system_message" or first.kind != "prompt":
        return None
    content: str = first.content
    return content


class FreshPrompts:
    """A step hook of the prompt auditor: each step's memory against the database."""

    def __init__(
        self,
        store: Callable[[], SimKVStore],
        server_id: Callable[[int], str | None],
        clock: Callable[[], float] | None = None,
    ):
        self.store = store
        self.server_id = server_id
        self.clock = clock  # the calling node's clock (None: the metadata is not judged)
        self.metadata = 0  # prompts whose <memory_metadata> was judged
        self.fields = 0  # blocks whose description, limit and read-only flag were judged
        self.problems: list[str] = []
        self.checked = 0

    def step(self, request: LlmRequest, agent: int, where: str) -> None:
        server_id = self.server_id(agent)
        blocks = prompt_blocks(request.system)
        if server_id is None or blocks is None:
            return
        stored = stored_blocks(self.store(), server_id)
        if stored is None:
            return
        self.checked += 1
        shown = {label: b.value for label, b in blocks.items()}
        problems = check_fresh(shown, stored, f"{where} a{agent}")
        # session 17 (llmL): each block's description, limit and read-only flag as stored
        fields, kept_fields = shown_fields(request.system), stored_fields(self.store(), server_id)
        if fields is not None and kept_fields is not None:
            self.fields += len(set(fields) & set(kept_fields))
            problems += check_block_fields(fields, kept_fields, f"{where} a{agent}")
        content = stored_prompt(self.store(), server_id)
        if content is not None:
            in_message = prompt_blocks(content)
            kept = None if in_message is None else {k: b.value for k, b in in_message.items()}
            problems += check_stored_prompt(shown, kept, set(stored), f"{where} a{agent}")
        counts = stored_counts(self.store(), server_id) if self.clock is not None else None
        if counts is not None and self.clock is not None:
            self.metadata += 1
            problems += check_metadata(request.system, counts, self.clock(), f"{where} a{agent}")
        for problem in problems:
            if len(self.problems) < _MAX_PROBLEMS:
                self.problems.append(problem)
