"""The agent workload's records and its invariants, as pure functions over what a run recorded.

Everything here is plain data, so a test can fabricate a history and check that each checker
catches a planted violation:

* :func:`check_acknowledged`: every acknowledged send's input, and every message of its result,
  is in the agent's final history exactly once, in the acknowledged run.
* :func:`check_initial`: every agent's history starts with Letta's first messages for its type
  (the system message showing its memory; for memgpt the boot ``send_message`` and the login
  event), exactly once, whatever crashed while it was created.
* :func:`check_single_activation`: from the commit log of the shared database and the
  dispatchers' observer events, every committed write of agent state was fenced by the lease of
  an activation that owned it at that commit, and no two activations of one agent ever held
  committed writes at once.
* :func:`check_no_mixing`: each message in agent A's history (and each memory block) mentions
  only A's tags, and every input in A's history was sent to A.
* :func:`check_completed`: every request the clients issued was acknowledged.
* :func:`check_blocks`: memory block values fit their limits.
* :func:`check_streams`: a streamed turn's pieces, joined per message id, equal the result.
* :func:`check_exactly_once`: each memory edit and archival insert of a tool step is stored at
  most once (memory tools commit with their result), and no MCP call was sent again after its
  result was committed (a completed tool call is never repeated; the one in flight at a crash
  may be, before its result is stored).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import attrs

__all__ = [
    "TAG",
    "Ack",
    "BlockPlan",
    "BlockState",
    "Commit",
    "Execution",
    "Fence",
    "Msg",
    "Observed",
    "Owner",
    "RequestRecord",
    "StreamRecord",
    "check_acknowledged",
    "check_blocks",
    "check_completed",
    "check_exactly_once",
    "check_initial",
    "check_no_mixing",
    "check_read_only",
    "check_single_activation",
    "check_step_budgets",
    "check_streams",
    "check_turns",
    "made_twice",
    "tag",
]

TAG = re.compile(r"tag-a(\d+)-m(\d+)", re.IGNORECASE)
"""Every input carries ``tag-a<agent>-m<message>``; the scripted tools echo it."""
_MEMORY = "<memory_blocks>"  # the memory section of a compiled system prompt
NOTE = re.compile(r"tag-a\d+-m\d+ step \d+(?:\.\d+)?")
"""What a tool step writes: ``tag-a<agent>-m<message> step <n>`` (``<n>.<j>`` for the j-th
call of a step with several)."""


def tag(agent: int, message: int) -> str:
    return f"tag-a{agent}-m{message}"


@attrs.frozen
class Msg:
    """One stored message, as the checkers see it (``text``: content, reasoning, tool call
    arguments or tool return)."""

    id: str
    seq: int
    run_id: str | None
    type: str
    text: str
    otid: str | None = None
    kind: str = ""  # user messages: input, heartbeat or alert
    tool: str | None = None  # tool calls and returns: the tool's name
    status: str | None = None  # tool returns: success or error
    step_id: str | None = None  # what the model wrote: the step (one LLM call) it belongs to
    call_id: str | None = None  # tool calls and returns: the tool call's id


@attrs.frozen
class Ack:
    """An acknowledged send: what the client sent and what it was told (``run_id`` is empty
    when the answer named no run: a JSON reply with no messages)."""

    agent: str
    index: int
    otid: str
    text: str
    run_id: str
    message_ids: tuple[str, ...]
    stop_reason: str
    reply: str | None = None  # the last assistant text the client was shown
    max_steps: int | None = None  # the step budget the send asked for
    steps: int | None = None  # the step count the run's usage reported


@attrs.frozen
class BlockPlan:
    """A memory block the workload gives an agent when it creates it."""

    label: str
    value: str
    limit: int
    read_only: bool = False


@attrs.frozen
class RequestRecord:
    """One client request: ``outcome`` is ``acked``, ``failed`` (a non-retryable error) or
    ``pending`` (never finished)."""

    agent: str
    what: str
    outcome: str = "pending"
    attempts: int = 0
    error: str | None = None
    finished_at: float | None = None


@attrs.frozen
class BlockState:
    agent: str
    label: str
    value: str
    limit: int


@attrs.frozen
class StreamRecord:
    """A streamed turn that returned: the joined pieces per message id, and the result's
    texts per message id (both rendered the same way)."""

    agent: str
    index: int
    pieces: tuple[tuple[str, str], ...]
    result: tuple[tuple[str, str], ...]


@attrs.frozen
class Execution:
    """An MCP tool call an agent sent, at journal position ``at``; ``note`` is the step it
    was sent for."""

    at: int
    tool: str
    note: str


@attrs.frozen
class Owner:
    """An owner record of the lease protocol (``token`` None once released)."""

    node: str | None
    epoch: int
    token: str | None


@attrs.frozen
class Fence:
    """The owner record of ``actor`` that a transaction read (None if absent or unreadable)."""

    actor: str
    owner: Owner | None


@attrs.frozen
class Commit:
    """A commit to the shared database, in commit order: the agent-state keys it wrote, the
    owner records it wrote, the owner records it read (its fences), and the MCP results
    (``tool: note``) its values carry."""

    time: float
    node: str
    agent_writes: tuple[str, ...] = ()
    owners: tuple[tuple[str, Owner | None], ...] = ()
    fences: tuple[Fence, ...] = ()
    results: tuple[str, ...] = ()
    incarnation: int = 0  # of the committing node: which life of it wrote
    writer: str | None = None  # the activation that committed (None: not inside one)


@attrs.frozen
class Observed:
    """A dispatcher observer event (``actor.acquired``, ``actor.lease_lost``, ...)."""

    time: float
    node: str
    kind: str
    actor: str = ""
    epoch: int | None = None


def agent_of_key(key: str, threads: Mapping[str, str] | None = None) -> str | None:
    """The agent a storage key belongs to; ``"block"`` for a block; None for other keys.
    A conversation's keys (its record, and its thread's history under its own id) belong to
    its agent: ``threads`` maps conversation ids to agents (:func:`conversation_owners`)."""
    head, _, rest = key.partition("/")
    found: str | None = None
    if head in ("agent", "session", "conv"):
        found = rest or None
    elif head in ("msg", "msgid", "passage", "passageid", "convs", "open"):
        found = rest.split("/", 1)[0] or None
    elif head == "block":
        return "block"
    if found is not None and threads:
        return threads.get(found, found)
    return found


def conversation_owners(keys: Iterable[str], into: dict[str, str]) -> None:
    """Learn conversation -> agent from the agents' index keys (``convs/<agent>/<µs>/<conv>``,
    written in the transaction that creates the conversation, before any of its keys)."""
    for key in keys:
        if key.startswith("convs/"):
            parts = key.split("/")
            if len(parts) == 4:
                into[parts[3]] = parts[1]


_BOOT = ("reasoning_message", "tool_call_message", "tool_return_message", "user_message")


def check_initial(histories: Mapping[str, Sequence[Msg]], types: Mapping[str, str]) -> list[str]:
    """Each history (read with tool calls as calls) starts with its agent's first messages,
    outside any run, and holds them once: one system message with a memory section, first;
    then for every type but ``letta_v1_agent`` a ``send_message`` call with its thought and
    return, and a login event."""
    problems: list[str] = []
    for agent, history in histories.items():
        shown = [m.type for m in history[:5]]
        prompts = [m for m in history if m.type == "system_message" and _MEMORY in m.text]
        if not history or history[0].type != "system_message" or _MEMORY not in history[0].text:
            problems.append(f"{agent}: the history does not start with its system message")
        if len(prompts) != 1:
            problems.append(f"{agent}: {len(prompts)} system messages with memory, not 1")
        boot = types.get(agent) != "letta_v1_agent"
        first = history[1:5] if boot else []
        logins = [m for m in history if m.type == "user_message" and m.kind == "login"]
        if boot and (
            [m.type for m in first] != list(_BOOT)
            or first[1].tool != "send_message"
            or first[3].kind != "login"
        ):
            problems.append(f"{agent}: the history starts {shown}, not the boot sequence")
        if len(logins) != int(boot):
            problems.append(f"{agent}: {len(logins)} login events, expected {int(boot)}")
        outside = [m for m in history[: 1 + len(first)] if m.run_id is not None]
        if outside:
            problems.append(f"{agent}: first message {outside[0].id} is in run {outside[0].run_id}")
    return problems


def check_acknowledged(acks: Iterable[Ack], histories: Mapping[str, Sequence[Msg]]) -> list[str]:
    problems: list[str] = []
    for agent, history in histories.items():
        for message_id, n in Counter(m.id for m in history).items():
            if n > 1:
                problems.append(f"{agent}: message {message_id} is stored {n} times")
    for ack in acks:
        history = histories.get(ack.agent, ())
        where = f"{ack.agent} message #{ack.index} ({ack.otid})"
        inputs = [
            m
            for m in history
            if m.type == "user_message" and (m.text == ack.text or m.otid == ack.otid)
        ]
        if not inputs:
            problems.append(f"{where}: the acknowledged input is not in the history")
        elif len(inputs) > 1:
            runs = ", ".join(str(m.run_id) for m in inputs)
            problems.append(f"{where}: the input is stored {len(inputs)} times (runs {runs})")
        elif inputs[0].text != ack.text or (ack.run_id and inputs[0].run_id != ack.run_id):
            problems.append(
                f"{where}: stored input {inputs[0].text!r} in run {inputs[0].run_id}, "
                f"acknowledged {ack.text!r} in run {ack.run_id}"
            )
        by_id = {m.id: m for m in history}
        for message_id in ack.message_ids:
            stored = by_id.get(message_id)
            if stored is None:
                problems.append(f"{where}: response message {message_id} was lost")
            elif stored.run_id != ack.run_id:
                problems.append(
                    f"{where}: message {message_id} is stored in run {stored.run_id}, "
                    f"not {ack.run_id}"
                )
    return problems


def check_single_activation(entries: Iterable[Commit | Observed]) -> list[str]:
    """Walk the commit log and the observer events in the order they happened."""
    problems: list[str] = []
    owner: dict[str, Owner | None] = {}
    order: dict[str, list[str]] = {}  # actor -> tokens in the order of their first write
    acquired: dict[tuple[str, str, int], int] = {}  # (actor, node, epoch) -> entry position
    latest: dict[str, tuple[int, str, int]] = {}  # actor -> (position, node, epoch) acquired
    lives: dict[str, tuple[str, int]] = {}  # owner token -> (node, incarnation) that took it
    takers: dict[str, str] = {}  # owner token -> the activation that acquired it
    threads: dict[str, str] = {}  # conversation -> its agent
    agents_blocks: set[str] = set()  # block keys an activation wrote: agents' blocks
    for position, entry in enumerate(entries):
        if isinstance(entry, Observed):
            if entry.kind == "actor.acquired" and entry.epoch is not None:
                acquired[(entry.actor, entry.node, entry.epoch)] = position
                latest[entry.actor] = (position, entry.node, entry.epoch)
            continue
        fenced = {f.actor: f.owner for f in entry.fences}
        conversation_owners(entry.agent_writes, threads)
        touched = [agent_of_key(k, threads) for k in entry.agent_writes]
        actors = sorted({f"agent/{a}" for a in touched if a not in (None, "block")})
        blocks = {k for k in entry.agent_writes if k.startswith("block/")}
        if fenced:
            agents_blocks |= blocks
        elif blocks & agents_blocks:  # a standalone block (``blocks.create``) is written bare
            problems.append(f"t={entry.time:.3f} {entry.node}: an unfenced write of a block")
        for actor in actors:
            if actor not in fenced:
                problems.append(f"t={entry.time:.3f} {entry.node}: unfenced write of {actor}")
                continue
            read = fenced[actor]
            current = owner.get(actor)
            if read is None or read.token is None or read != current or read.node != entry.node:
                problems.append(
                    f"t={entry.time:.3f} {actor}: {entry.node} committed under {read} while "
                    f"the lease was {current}"
                )
                continue
            taker = takers.get(read.token)
            if taker is not None and entry.writer is not None and taker != entry.writer:
                problems.append(
                    f"t={entry.time:.3f} {actor}: {entry.writer} committed under the lease "
                    f"that {taker} acquired"
                )
            life = lives.get(read.token)
            if life is not None and life != (entry.node, entry.incarnation):
                problems.append(
                    f"t={entry.time:.3f} {actor}: life {entry.incarnation} of {entry.node} "
                    f"committed under the lease that life {life[1]} of {life[0]} acquired"
                )
            if (actor, entry.node, read.epoch) not in acquired:
                problems.append(
                    f"t={entry.time:.3f} {actor}: {entry.node} committed as epoch {read.epoch} "
                    f"without having acquired it"
                )
            last = latest.get(actor)
            if last is not None and (last[1], last[2]) != (entry.node, read.epoch):
                problems.append(
                    f"t={entry.time:.3f} {actor}: epoch {read.epoch} on {entry.node} committed "
                    f"after epoch {last[2]} was acquired on {last[1]}"
                )
            tokens = order.setdefault(actor, [])
            if not tokens or tokens[-1] != read.token:
                if read.token in tokens:
                    problems.append(
                        f"t={entry.time:.3f} {actor}: activation {read.token} wrote again after "
                        f"{tokens[-1]} had written"
                    )
                tokens.append(read.token)
        for actor, record in entry.owners:
            owner[actor] = record
            if record is not None and record.token is not None:
                lives.setdefault(record.token, (entry.node, entry.incarnation))
                if entry.writer is not None:
                    takers.setdefault(record.token, entry.writer)
    return problems


def check_no_mixing(
    histories: Mapping[str, Sequence[Msg]],
    blocks: Iterable[BlockState],
    sent: Mapping[str, Sequence[str]],
    numbers: Mapping[str, int],
) -> list[str]:
    """``numbers[agent]`` is the agent's number in its tags; ``sent[agent]`` its inputs."""
    problems: list[str] = []
    for agent, history in histories.items():
        mine = numbers[agent]
        allowed = set(sent.get(agent, ()))
        for m in history:
            if m.type == "user_message" and m.kind == "input" and m.text not in allowed:
                problems.append(f"{agent}: input {m.text[:60]!r} was never sent to it")
            for found in TAG.finditer(m.text):
                if int(found.group(1)) != mine:
                    problems.append(f"{agent} (a{mine}): {m.type} {m.id} mentions {found.group(0)}")
                    break
    for block in blocks:
        mine = numbers[block.agent]
        for found in TAG.finditer(block.value):
            if int(found.group(1)) != mine:
                problems.append(f"{block.agent}: block {block.label} holds {found.group(0)}")
                break
    return problems


def check_completed(requests: Iterable[RequestRecord]) -> list[str]:
    problems = []
    for r in requests:
        if r.outcome != "acked":
            why = f": {r.error}" if r.error else ""
            problems.append(f"{r.what}: {r.outcome} after {r.attempts} attempts{why}")
    return problems


def check_blocks(blocks: Iterable[BlockState]) -> list[str]:
    return [
        f"{b.agent}: block {b.label} holds {len(b.value)} characters, over its limit {b.limit}"
        for b in blocks
        if len(b.value) > b.limit
    ]


def check_streams(streams: Iterable[StreamRecord]) -> list[str]:
    problems = []
    for s in streams:
        result = dict(s.result)
        for message_id, text in s.pieces:
            if message_id in result and result[message_id] != text:
                problems.append(
                    f"{s.agent} message #{s.index}: streamed {message_id} as {text[:60]!r}, "
                    f"the result holds {result[message_id][:60]!r}"
                )
    return problems


def made_twice(histories: Mapping[str, Sequence[Msg]]) -> dict[str, Counter[str]]:
    """Per agent, how many stored calls that succeeded carry each note, where more than one
    does: a model that repeats a call with the very same arguments in one step gets both run
    (each with its own stored result), so the note is there twice by right."""
    found: dict[str, Counter[str]] = {}
    for agent, messages in histories.items():
        ok = {
            m.call_id for m in messages if m.type == "tool_return_message" and m.status == "success"
        }
        notes = Counter(
            note
            for m in messages
            if m.type == "tool_call_message" and m.call_id in ok
            for note in set(NOTE.findall(m.text))
        )
        found[agent] = Counter({note: n for note, n in notes.items() if n > 1})
    return found


def check_exactly_once(
    blocks: Iterable[BlockState],
    passages: Mapping[str, Sequence[str]],
    entries: Sequence[Commit | Observed],
    executions: Iterable[Execution],
    twice: Mapping[str, Counter[str]] | None = None,
) -> list[str]:
    """``passages[agent]``: the texts of its archival passages; ``entries``: the journal;
    ``twice``: :func:`made_twice` of the stored histories (a note the model's own repeated
    calls put there several times may be there that many times)."""
    problems: list[str] = []
    twice = twice or {}
    for block in blocks:
        made = twice.get(block.agent, Counter())
        for note, n in Counter(NOTE.findall(block.value)).items():
            if n > max(1, made[note]):
                problems.append(f"{block.agent}: block {block.label} holds {note!r} {n} times")
    for agent, texts in passages.items():
        made = twice.get(agent, Counter())
        for note, n in Counter(note for t in texts for note in NOTE.findall(t)).items():
            if n > max(1, made[note]):
                problems.append(f"{agent}: archival memory holds {note!r} {n} times")
    committed: dict[str, int] = {}
    for position, entry in enumerate(entries):
        if isinstance(entry, Commit):
            for result in entry.results:
                committed.setdefault(result, position)
    for run in executions:
        first = committed.get(f"{run.tool}: {run.note}")
        if first is not None and first < run.at:
            problems.append(
                f"{run.tool}({run.note!r}) was sent again (entry {run.at}) after its result was "
                f"committed (entry {first})"
            )
    return problems


def check_turns(acks: Iterable[Ack], markers: Mapping[str, str]) -> list[str]:
    """Every acknowledged turn that ended normally (``end_turn``) gave the client a reply to
    *that* message (it carries the message's tag); a ``recall`` reply quotes the agent's own
    memory (``markers[agent]``). Other stop reasons are explicit, and need no reply."""
    problems = []
    for ack in acks:
        if ack.stop_reason != "end_turn":
            continue
        where = f"{ack.agent} message #{ack.index} ({ack.otid})"
        found = TAG.search(ack.text)
        if ack.reply is None:
            problems.append(f"{where}: the turn ended (end_turn) without a reply")
        elif found is not None and found.group(0) not in ack.reply:
            problems.append(f"{where}: the reply {ack.reply[:80]!r} answers another message")
        elif " recall x" in ack.text and markers.get(ack.agent, "") not in ack.reply:
            problems.append(
                f"{where}: the reply {ack.reply[:80]!r} does not quote the agent's own memory "
                f"({markers.get(ack.agent)})"
            )
    return problems


def check_read_only(
    blocks: Iterable[BlockState], expected: Mapping[tuple[str, str], str]
) -> list[str]:
    """``expected[(agent, label)]``: the value of a read-only block, which nothing changes."""
    listed = list(blocks)
    seen = {(b.agent, b.label): b.value for b in listed}
    agents = {b.agent for b in listed}
    problems = []
    for (agent, label), value in sorted(expected.items()):
        if agent in agents and seen.get((agent, label)) != value:
            got = seen.get((agent, label))
            problems.append(
                f"{agent}: read-only block {label} is {got[:60] if got else got!r}, "
                f"not {value[:60]!r}"
            )
    return problems


def check_step_budgets(acks: Iterable[Ack], histories: Mapping[str, Sequence[Msg]]) -> list[str]:
    """A run stopped by ``max_steps`` made exactly that many LLM calls (steps that wrote a
    message); one that ended normally made no more than its budget; the usage the client was
    given counts the same steps."""
    problems = []
    for ack in acks:
        if ack.max_steps is None or not ack.run_id:
            continue
        steps = {
            m.step_id
            for m in histories.get(ack.agent, ())
            if m.run_id == ack.run_id
            and m.step_id
            and m.type in ("assistant_message", "reasoning_message", "tool_call_message")
        }
        where = f"{ack.agent} message #{ack.index} ({ack.otid})"
        if ack.steps is not None and ack.steps != len(steps):
            problems.append(
                f"{where}: usage reports {ack.steps} steps, the run stored {len(steps)}"
            )
        if ack.stop_reason == "max_steps" and len(steps) != ack.max_steps:
            problems.append(
                f"{where}: stopped by max_steps={ack.max_steps} after {len(steps)} steps"
            )
        elif ack.stop_reason == "end_turn" and len(steps) > ack.max_steps:
            problems.append(f"{where}: {len(steps)} steps ran under max_steps={ack.max_steps}")
    return problems
