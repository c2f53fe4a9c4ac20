"""An agent's lifecycle and the operations that rewrite it, under faults (``agent_lifecycle``).

Server nodes (``topology.nodes``) share the database host ``topology.database``, each running
the production node. A client on ``main`` makes ``agents`` memgpt agents (a ``persona`` and a
``human`` block, the base tools, a ``max_count_per_step`` rule on ``conversation_search``),
then for ``span`` seconds, per agent, on random live nodes: sends it a message (with an otid,
retried until answered), edits its ``human`` block, resets its messages (sometimes twice in a
row, as a client repeating it does), sets a tool's approval flag, replaces its tool list,
starts a background run (in a conversation, half the time) and cancels the agent's runs
through the same node at once, tries to relabel a block (or attach a standalone block) to a
label the agent already has, attaches a standalone block with a free label and detaches it,
and exports it to an agent file and imports that (comparing the imported history with the
source's). Each acknowledged change is read back at once.

At ``delete_at`` seconds of virtual time (after the scenario's window of crashes aimed at the
middle of deletes has opened) it deletes every agent it made and imported, checking at once
that an acknowledged delete left nothing readable; after ``repair_at`` it runs ``repair`` (as
``kelpie serve`` does at start) and checks every deleted agent again.
:func:`._agent_lifecycle_checks.check_lifecycle` judges it all.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from kelpie_agent.agent import BlockCreate, CreateAgent, InputMessage
from kelpie_agent.agent._builtins import builtin_id, default_tool_names
from kelpie_agent.agent._tool_rules import ToolRule
from kelpie_agent.service import AgentService, ConflictError, NotFoundError, ServiceError
from kelpie_agent.service import _portability as portability

from ..scenario import WorkloadContext, invariant, workload
from ._agent_coherence import memory_matches_storage as memory_matches_storage
from ._agent_lifecycle_checks import (
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
)
from ._agent_schedules import _FAILURES, Client, start_servers

__all__ = ["agent_lifecycle", "lifecycle_consistent"]

AGENT_TYPE = "memgpt_agent"
BASE = default_tool_names(AGENT_TYPE)
ANSWER = "send_message"  # what the helpful model calls to answer: never needs approval
OPTIONAL = tuple(n for n in BASE if n != ANSWER)
RULES = (ToolRule("conversation_search", "max_count_per_step", max_count_limit=2),)
PAGE = 1000
SCRATCH = "scratch"  # the label of the standalone blocks attached and detached again


def _rule_key(rule: Any) -> tuple[str, str, int | None]:
    return (rule.tool_name, rule.type, rule.max_count_limit)


def _other_rules(rules: Any) -> tuple[tuple[str, str, int | None], ...]:
    return tuple(sorted(_rule_key(r) for r in rules if r.type != "requires_approval"))


def _approvals(rules: Any) -> frozenset[str]:
    return frozenset(r.tool_name for r in rules if r.type == "requires_approval")


class _Agent:
    """The client's model of one agent."""

    def __init__(self, agent_id: str, number: int) -> None:
        self.id = agent_id
        self.number = number
        self.approvals: set[str] = set()
        self.tools: set[str] = set(BASE)
        self.runs: list[str] = []
        self.sent: list[str] = []  # the runs of plain sends: no cancel ever named them
        self.messages: set[str] = set()


async def _history(client: Client, agent_id: str) -> list[Any]:
    return await client.until_done(
        lambda s: s.list_messages(agent_id, limit=PAGE, order="asc", use_assistant_message=False)
    )


def _text(message: Any) -> str:
    for field in ("content", "reasoning", "tool_return"):
        value = getattr(message, field, None)
        if isinstance(value, str):
            return value
    call = getattr(message, "tool_call", None)
    return f"{call.name}({call.arguments})" if call is not None else ""


def _call_id(message: Any) -> str | None:
    call = getattr(message, "tool_call", None)
    return call.tool_call_id if call is not None else getattr(message, "tool_call_id", None)


def _shape(messages: list[Any]) -> tuple[Any, ...]:
    return tuple((m.message_type, _text(m), m.step_id, _call_id(m)) for m in messages)


async def _send(client: Client, agent: _Agent, k: int) -> None:
    otid = f"life-{agent.number}-{k}"
    message = InputMessage("user", f"note {agent.number}.{k} for the lifecycle", otid=otid)
    result = await client.until_done(lambda s: s.send_message(agent.id, [message]))
    agent.runs.append(result.run_id)
    agent.sent.append(result.run_id)


async def _edit_human(client: Client, agent: _Agent, k: int) -> None:
    value = f"The human of agent {agent.number}, edit {k}."
    await client.until_done(lambda s: s.update_agent_block(agent.id, "human", value=value))


async def _reset(client: Client, log: LifecycleLog, agent: _Agent) -> None:
    await _remember_messages(client, agent)
    await client.until_done(lambda s: s.reset_messages(agent.id))
    if client.rng.random() < 0.4:  # the client repeats it (a retry, a second click): the same
        await client.until_done(lambda s: s.reset_messages(agent.id))
    history = await _history(client, agent.id)
    compiled = await client.until_done(lambda s: s.recompile(agent.id, dry_run=True))
    view = await client.until_done(lambda s: s.get_agent(agent.id))
    log.resets.append(
        ResetSeen(
            agent.id,
            tuple((m.message_type, _text(m)) for m in history),
            compiled,
            view.last_stop_reason,
        )
    )


async def _approval(client: Client, log: LifecycleLog, agent: _Agent) -> None:
    choices = sorted(agent.tools - {ANSWER})
    if not choices:
        return
    tool = client.rng.choice(choices)
    required = client.rng.random() < 0.6
    view = await client.until_done(lambda s: s.set_tool_approval(agent.id, tool, required))
    (agent.approvals.add if required else agent.approvals.discard)(tool)
    rules = view.agent.tool_rules
    log.approvals.append(
        Approval(
            agent.id,
            frozenset(agent.approvals),
            _approvals(rules),
            _other_rules(rules),
            _other_rules(RULES),
        )
    )


async def _tool_list(client: Client, log: LifecycleLog, agent: _Agent) -> None:
    names = {ANSWER} | {n for n in OPTIONAL if client.rng.random() < 0.5}
    ids = [builtin_id(n) for n in BASE if n in names]
    view = await client.until_done(lambda s: s.update_agent(agent.id, {"tool_ids": ids}))
    agent.tools = names
    shown = frozenset(t.name for t in view.tools)
    log.tools.append(ToolsSeen(agent.id, frozenset(names), shown))


async def _labels(client: Client, log: LifecycleLog, agent: _Agent, k: int) -> None:
    view = await client.until_done(lambda s: s.get_agent(agent.id))
    labels = [b.label for b in view.blocks]
    if len(labels) < 2:
        return
    if client.rng.random() < 0.5:
        how, source, taken = "relabel", labels[0], labels[1]
        attempt: Callable[[AgentService], Awaitable[Any]] = lambda s: s.update_agent_block(  # noqa: E731
            agent.id, source, new_label=taken
        )
    else:
        how, taken = "attach", client.rng.choice(labels)
        block = await client.until_done(
            lambda s: s.create_block(taken, f"a loose {taken} block {agent.number}.{k}")
        )
        attempt = lambda s: s.attach_block(agent.id, block.id)  # noqa: E731
    try:
        await client.until_done(attempt)
        outcome = "accepted"
    except ConflictError:
        outcome = "refused"
    except Exception as error:  # any other answer is wrong too
        outcome = type(error).__name__
    after = await client.until_done(lambda s: s.get_agent(agent.id))
    stored = tuple((b.label, b.value) for b in after.blocks)
    prompt = await _holder_prompt(client, agent) if client.ctx.params.get("label_prompts") else None
    log.labels.append(
        LabelAttempt(
            agent.id, how, taken, outcome, tuple(b.label for b in after.blocks), stored, prompt
        )
    )


async def _attach_scratch(
    client: Client, agent: _Agent, k: int, **fields: Any
) -> tuple[Any, str, Any]:
    """A standalone block with a label the agent does not have, attached -> (the block, the
    attach's outcome: ``accepted`` or the error's name, the agent read after it)."""
    block = await client.until_done(
        lambda s: s.create_block(SCRATCH, f"scratch notes {agent.number}.{k}", **fields)
    )
    try:
        await client.until_done(lambda s: s.attach_block(agent.id, block.id))
        outcome = "accepted"
    except Exception as error:  # a free label must be accepted
        outcome = type(error).__name__
    return block, outcome, await client.until_done(lambda s: s.get_agent(agent.id))


async def _scratch(client: Client, log: LifecycleLog, agent: _Agent, k: int) -> None:
    """Attach a standalone block with a label the agent does not have, then detach it: the
    attach is accepted, the block shows once; after the detach it is gone, its label free."""
    block, outcome, attached = await _attach_scratch(client, agent, k)
    try:
        await client.until_done(lambda s: s.detach_block(agent.id, block.id))
    except NotFoundError:  # not attached: the attach's problem is recorded
        pass
    detached = await client.until_done(lambda s: s.get_agent(agent.id))
    log.swaps.append(
        BlockSwap(
            agent.id,
            block.id,
            outcome,
            tuple((b.id, b.label) for b in attached.blocks),
            tuple((b.id, b.label) for b in detached.blocks),
        )
    )


async def _round_trip(
    client: Client, log: LifecycleLog, agent: _Agent, imported: list[_Agent]
) -> None:
    before = await _history(client, agent.id)
    try:
        file = await client.once(lambda s: portability.export_agent_file(s, agent.id))
        raw = json.dumps(file, default=str).encode()
        new_ids = await client.once(lambda s: portability.import_agent_file_to(s, raw))
    except _FAILURES:
        return
    except ServiceError as error:  # the agent's own file must import
        log.imports.append(ImportSeen(agent.id, "", _shape(before), (), f"{error!r}"))
        return
    for new in new_ids:
        copy = _Agent(new, agent.number)
        imported.append(copy)
        after = await _history(client, new)
        log.imports.append(ImportSeen(agent.id, new, _shape(before), _shape(after)))


async def _cancel(client: Client, log: LifecycleLog, agent: _Agent, k: int) -> None:
    """Start a background run (in a conversation of the agent, half the time) through one
    node and, at once, ask that node to cancel the agent's runs: while the run is still
    running there, the cancel must reach it."""
    service = client.service()
    if service is None:
        return
    thread = None
    if client.rng.random() < 0.5:
        try:
            thread = (await client.once(lambda s: s.create_conversation(agent.id))).id
        except _FAILURES:
            return
    message = InputMessage(
        "user", f"note {agent.number}.{k}, to cancel", otid=f"life-c{agent.number}-{k}"
    )
    try:
        with trio.fail_after(60):
            run = await service.start_run(agent.id, [message], conversation_id=thread)
    except _FAILURES:
        return
    asked = service.cancel_runs(agent.id) if service.running else None
    agent.runs.append(run.id)
    try:
        with trio.fail_after(60):
            after = await service.get_run(run.id)
    except _FAILURES:
        return
    if asked is not None and service.running:
        log.cancels.append(CancelSeen(agent.id, run.id, thread, asked, after.status))


async def _remember_messages(client: Client, agent: _Agent) -> None:
    agent.messages |= {m.id for m in await _history(client, agent.id)}


async def _agent_client(
    client: Client, log: LifecycleLog, agent: _Agent, imported: list[_Agent], span: float
) -> None:
    rng, k = client.rng, 0
    deadline = trio.current_time() + span
    while trio.current_time() < deadline:
        k += 1
        roll = rng.random()
        if roll < 0.3:
            await _send(client, agent, k)
        elif roll < 0.4:
            await _edit_human(client, agent, k)
        elif roll < 0.52:
            await _reset(client, log, agent)
        elif roll < 0.64:
            await _approval(client, log, agent)
        elif roll < 0.74:
            await _tool_list(client, log, agent)
        elif roll < 0.82:
            await _labels(client, log, agent, k)
        elif roll < 0.87:
            await _scratch_op(client)(client, log, agent, k)
        elif roll < 0.93:
            await _cancel(client, log, agent, k)
        else:
            await _round_trip(client, log, agent, imported)
        await trio.sleep(rng.uniform(0.5, 2))
    await _remember_messages(client, agent)


async def _visible(client: Client, agent: _Agent, outcome: str, when: str) -> DeleteSeen:
    """What can still be read of the deleted ``agent``."""

    async def found(call: Callable[[AgentService], Awaitable[Any]]) -> bool:
        try:
            await client.until_done(call)
        except NotFoundError:
            return False
        return True

    agent_found = await found(lambda s: s.get_agent(agent.id))
    listed = agent.id in {
        v.agent.id for v in await client.until_done(lambda s: s.list_agents(limit=PAGE))
    }
    history_found = await found(lambda s: s.list_messages(agent.id, limit=1))
    runs = {r for r in agent.runs if await found(lambda s, r=r: s.get_run(r))}  # type: ignore[misc]
    listed_runs = await client.until_done(lambda s: s.list_runs(limit=PAGE))
    runs |= {r.id for r in listed_runs if r.agent_id == agent.id or r.id in agent.runs}
    messages = {m for m in agent.messages if await found(lambda s, m=m: s.get_message(m))}  # type: ignore[misc]
    everyone = await client.until_done(lambda s: s.all_messages(limit=PAGE))
    messages |= {m.id for m in everyone if m.id in agent.messages}
    return DeleteSeen(
        agent.id,
        outcome,
        when,
        agent_found,
        listed,
        history_found,
        tuple(sorted(runs)),
        tuple(sorted(messages)),
    )


async def _delete(client: Client, log: LifecycleLog, agent: _Agent) -> str:
    outcome = "ok"
    while True:
        try:
            await client.once(lambda s: s.delete_agent(agent.id))
        except NotFoundError:
            return "gone"  # an earlier attempt's outcome was lost: it (or part of it) landed
        except _FAILURES:
            outcome = "gone"
            await trio.sleep(client.rng.uniform(0.5, 2.0))
            continue
        if outcome == "ok":
            log.deletes.append(await _visible(client, agent, outcome, "at once"))
        return outcome


@workload(
    params={
        "agents": 3,
        "span": 30.0,
        "delete_at": 45.0,
        "repair_at": 60.0,
        "deletes": 0,
        "label_prompts": 0,
        "keep": 0,  # the last ``keep`` agents are not deleted: repair must not change them
    },
    sizes=("agents",),
    bounds={
        "agents": (1, 20),
        "span": (1, 3600),
        "delete_at": (0, 36000),
        "repair_at": (0, 36000),
        "keep": (0, 20),
    },
)
async def agent_lifecycle(ctx: WorkloadContext) -> None:
    """Resets, approvals, tool lists, labels, agent files and deletes; see the module
    docstring."""
    log = LifecycleLog()
    ctx.state["log"] = log
    services, _ = start_servers(ctx)
    client = Client(ctx, services, "lifecycle")
    agents: list[_Agent] = []
    for number in range(int(ctx.params["agents"])):
        request = CreateAgent(
            name=f"life-{number}",
            agent_type=AGENT_TYPE,
            memory_blocks=(
                BlockCreate("persona", f"I am lifecycle agent {number}."),
                BlockCreate("human", f"The human of agent {number}."),
            ),
            tool_rules=RULES,
        )
        view = await client.until_done(lambda s, r=request: s.create_agent(r))  # type: ignore[misc]
        agents.append(_Agent(view.agent.id, number))
    imported: list[_Agent] = []
    span = float(ctx.params["span"])
    async with trio.open_nursery() as nursery:
        for agent in agents:
            nursery.start_soon(_agent_client, client, log, agent, imported, span)
    for agent in imported:
        await _remember_messages(client, agent)
    for agent in agents:
        for run_id in agent.sent:
            run = await client.until_done(lambda s, r=run_id: s.get_run(r))  # type: ignore[misc]
            log.sent_runs.append((agent.id, run_id, run.stop_reason))
    await trio.sleep(max(0.0, float(ctx.params["delete_at"]) - trio.current_time()))
    keep = min(int(ctx.params["keep"]), len(agents))
    kept, doomed = agents[len(agents) - keep :], [*agents[: len(agents) - keep], *imported]
    for agent in kept:  # a conversation of its own, with a turn in it, for repair to leave
        await _converse(client, agent)
    outcomes = {}
    for agent in doomed:
        outcomes[agent.id] = await _delete(client, log, agent)
    await trio.sleep(max(0.0, float(ctx.params["repair_at"]) - trio.current_time()))
    before = [await _kept_view(client, agent) for agent in kept]
    await client.until_done(lambda s: s.repair())
    for agent, was in zip(kept, before, strict=True):
        log.kept.append((agent.id, was, await _kept_view(client, agent)))
    for agent in doomed:
        log.deletes.append(await _visible(client, agent, outcomes[agent.id], "after repair"))
    ctx.metric("lifecycle.resets", len(log.resets))
    ctx.metric("lifecycle.imports", len(log.imports))
    ctx.metric("lifecycle.swaps", len(log.swaps))
    ctx.metric("lifecycle.cancels", sum(c.asked > 0 for c in log.cancels))
    ctx.metric("lifecycle.deletes_lost", sum(o != "ok" for o in outcomes.values()))
    ctx.metric("lifecycle.problems", len(check_lifecycle(log)))


async def _converse(client: Client, agent: _Agent) -> None:
    """One conversation of a kept agent and one turn in it (``keep``)."""
    conv = (await client.until_done(lambda s: s.create_conversation(agent.id))).id
    message = InputMessage("user", f"a note {agent.number} to keep", otid=f"life-k{agent.number}")
    await client.until_done(lambda s: s.send_message(agent.id, [message], conversation_id=conv))


async def _kept_view(client: Client, agent: _Agent) -> KeptView:
    """What a kept agent shows (``keep``): its history and its conversations'."""

    async def ids(conversation: str | None) -> tuple[str, ...]:
        got = await client.until_done(
            lambda s: s.list_messages(
                agent.id, limit=1000, order="asc", conversation_id=conversation
            )
        )
        return tuple(m.id for m in got)

    convs = await client.until_done(
        lambda s: s.list_conversations(agent_id=agent.id, limit=1000, order="asc")
    )
    return KeptView(await ids(None), tuple([(c.id, await ids(c.id)) for c in convs]))


@invariant
def lifecycle_consistent(ctx: WorkloadContext) -> None:
    """Resets, approvals, tool lists, labels, agent files and deletes are what the client's
    model says; see :func:`._agent_lifecycle_checks.check_lifecycle`."""
    log: Any = ctx.state["log"]
    problems = check_lifecycle(log)
    shown = "; ".join(problems[:4]) + (f"; ... ({len(problems)} in all)" if problems[4:] else "")
    assert not problems, shown


# -- deleted while attached (``deletes``; session 12, coreH) -----------------------------------
# Kept apart from the flow above: with ``deletes = 0`` the scenario runs exactly as before.


def _scratch_op(client: Client) -> Callable[[Client, LifecycleLog, _Agent, int], Awaitable[None]]:
    """With ``deletes``, every other scratch block is deleted while attached, not detached."""
    return _scratch_deleted if client.ctx.params.get("deletes") else _scratch


async def _scratch_deleted(client: Client, log: LifecycleLog, agent: _Agent, k: int) -> None:
    """As :func:`_scratch` for even ``k``; for odd ``k`` the block is deleted through
    ``/v1/blocks`` (outside the agent's actor) while attached. Then neither the agent
    (storage's view) nor the prompt compiled by the activation that held the block
    (``recompile``, dry run, through the node where the agent is active: another node would
    activate it afresh) may show it or its label. Before the delete, the block is updated
    through ``/v1/blocks`` to a value of exactly its limit (accepted) and to one character
    more (refused), and then the same through the agent's own block route."""
    from kelpie_agent.actors import ActorId

    from ._agent_prompt import prompt_blocks

    if k % 2 == 0:
        await _scratch(client, log, agent, k)
        return
    limit = SCRATCH_LIMIT
    block, outcome, attached = await _attach_scratch(client, agent, k, limit=limit)
    fits = await _update_outcome(client, block.id, "f" * limit)
    over = await _update_outcome(client, block.id, "o" * (limit + 1))
    log.limits.append((block.id, limit, fits, over))
    # the same edges through the agent's own route (its actor checks the limit, not the store)
    fits = await _update_outcome(client, block.id, "g" * limit, agent.id, block.label)
    over = await _update_outcome(client, block.id, "p" * (limit + 1), agent.id, block.label)
    log.limits.append((block.id, limit, fits, over))
    try:
        await client.until_done(lambda s: s.delete_block(block.id))
    except NotFoundError:  # a retry finds it gone: the first attempt landed
        pass
    after = await client.until_done(lambda s: s.get_agent(agent.id))
    shown = [(b.id, b.label) for b in after.blocks]
    actor = ActorId("agent", agent.id)
    holder = next((s for s in client.services.values() if actor in s.dispatcher.active()), None)
    if holder is not None and holder.running:
        try:
            with trio.fail_after(60):
                prompt = await holder.recompile(agent.id, dry_run=True)
        except (*_FAILURES, ServiceError):
            prompt = ""  # the node went down or storage failed: no prompt to judge
        shown += [("(in the prompt)", label) for label in prompt_blocks(prompt) or {}]
    pairs = tuple((b.id, b.label) for b in attached.blocks)
    log.swaps.append(BlockSwap(agent.id, block.id, outcome, pairs, tuple(shown), "delete"))


SCRATCH_LIMIT = 40  # the limit of the scratch blocks ``deletes`` updates at and over it


# -- the prompt after a label change (``label_prompts``; session 14, coreJ) ------------------


async def _holder_prompt(client: Client, agent: _Agent) -> tuple[tuple[str, str], ...] | None:
    """The blocks (label, value, each as often as shown) of the prompt the activation holding
    the agent compiles now (``recompile``, dry run, through its node: another node would
    activate it afresh from storage); None if no node holds it or the recompile failed. A
    refused change must leave what that activation works from as storage has it."""
    from kelpie_agent.actors import ActorId

    from ._agent_prompt import prompt_blocks, prompt_labels

    actor = ActorId("agent", agent.id)
    holder = next((s for s in client.services.values() if actor in s.dispatcher.active()), None)
    if holder is None or not holder.running:
        return None
    try:
        with trio.fail_after(60):
            prompt = await holder.recompile(agent.id, dry_run=True)
    except (*_FAILURES, ServiceError):
        return None  # the node went down or storage failed: no prompt to judge
    blocks, labels = prompt_blocks(prompt), prompt_labels(prompt)
    if blocks is None or labels is None:
        return None
    return tuple((label, blocks[label].value) for label in labels)


async def _update_outcome(
    client: Client, block_id: str, value: str, agent_id: str = "", label: str = ""
) -> str:
    """``ok``, ``refused`` (the 400 of a value over the limit) or another error's name; with
    ``agent_id`` and ``label``, through the agent's block route instead of ``/v1/blocks``."""
    from kelpie_agent.service import InvalidError

    try:
        if agent_id:
            await client.until_done(lambda s: s.update_agent_block(agent_id, label, value=value))
        else:
            await client.until_done(lambda s: s.update_block(block_id, value=value))
    except InvalidError:
        return "refused"
    except ServiceError as error:
        return type(error).__name__
    return "ok"
