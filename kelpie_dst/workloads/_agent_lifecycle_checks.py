"""The checks of ``agent_lifecycle`` (:mod:`.agent_lifecycle`): pure functions of what the
client recorded and what its read-backs found.

Properties a user of the agent API states, judged against the client's own model:

* **a reset leaves exactly the system message, recompiled**: right after an acknowledged
  reset, the agent's history is one system message whose text is the prompt the agent would
  compile now (``recompile`` with ``dry_run``; but the lines naming the current time and
  counting archival memories), and the agent reports no last run;
* **a tool approval flag changes exactly that tool**: after every acknowledged
  ``set_tool_approval``, the tools that require approval are the ones the client asked for,
  and every other tool rule the agent was made with is still there, unchanged;
* **a tool list replaces the attached tools**: after an acknowledged update with
  ``tool_ids``, the agent's tools are exactly those;
* **block labels stay unique**: relabelling a block to a label another of the agent's blocks
  has, or attaching a block with a label the agent has, is refused (409) and changes nothing;
  an agent never shows two blocks with one label; a block with a free label attaches, and
  after its detach neither it nor its label is the agent's;
* **a cancel reaches the runs it names**: cancelling an agent's runs through the node that
  started one of them (in the agent's own history or in one of its conversations) a moment
  before, while that run is still running, asks it to stop (the count is not zero); a run no
  cancel named (a plain send, answered before the agent's client did anything else) never
  ends ``cancelled``;
* **an agent file round-trips its history**: an agent imported from a file has the source's
  history at export time: the same messages in the same order, each of the same type with the
  same text, and a tool's result in the step of its call wherever the source has it there (and
  the file of an agent the API made imports at all);
* **a deleted agent is gone, with everything under it, forever**: after an acknowledged
  delete, the agent is not found and not listed, and none of its runs or messages can be read
  by id or found in the lists across agents; a delete whose outcome was lost (then "not
  found") may leave records until ``repair``; after ``repair``, every deleted agent's are gone.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ._agent_fresh import EPHEMERAL

__all__ = [
    "Approval",
    "BlockSwap",
    "CancelSeen",
    "DeleteSeen",
    "ImportSeen",
    "LabelAttempt",
    "LifecycleLog",
    "ResetSeen",
    "ToolsSeen",
    "check_lifecycle",
    "with_its_call",
]

# One message of a history, as compared across an agent file: (message_type, text, step id,
# tool call id); the ids of steps are fresh in an imported copy, the tool call ids are kept.
Shape = tuple[str, str, str | None, str | None]


def with_its_call(history: Sequence[Shape]) -> list[bool]:
    """Per message: False for a tool return whose call (the latest earlier tool call with its
    id) is missing or in another step; True otherwise."""
    calls: dict[str, str | None] = {}
    out = []
    for kind, _, step, call_id in history:
        if kind in ("tool_call_message", "approval_request_message") and call_id is not None:
            calls[call_id] = step
        if kind == "tool_return_message":
            out.append(call_id in calls and calls[call_id] == step)
        else:
            out.append(True)
    return out


@attrs.frozen
class ResetSeen:
    """The read-back right after an acknowledged reset."""

    agent_id: str
    history: tuple[tuple[str, str], ...]  # (message_type, text), oldest first
    compiled: str  # recompile(dry_run=True) right after
    last_stop_reason: str | None


@attrs.frozen
class Approval:
    """The read-back after an acknowledged set_tool_approval (or at creation)."""

    agent_id: str
    wanted: frozenset[str]  # the tools the client asked to require approval
    shown: frozenset[str]  # the agent's requires_approval rules
    other_rules: tuple[tuple[str, str, int | None], ...]  # (tool, type, limit), sorted
    made_with: tuple[tuple[str, str, int | None], ...]  # its other rules at creation


@attrs.frozen
class CancelSeen:
    """A cancel of the agent's runs, asked through the node that had just started ``run_id``
    (in conversation ``thread``, or the agent's own history): ``asked``, how many runs the
    node asked to stop; ``status``, the run's status read right after."""

    agent_id: str
    run_id: str
    thread: str | None
    asked: int
    status: str


@attrs.frozen
class ToolsSeen:
    agent_id: str
    wanted: frozenset[str]
    shown: frozenset[str]


@attrs.frozen
class LabelAttempt:
    """A relabel (``how`` ``relabel``) or an attach (``attach``) to a taken label."""

    agent_id: str
    how: str
    label: str
    outcome: str  # "refused" (409), "accepted", or another error's name
    labels_after: tuple[str, ...]
    # with ``label_prompts`` (coreJ, session 14): the agent's blocks as storage has them
    # (label, value) and those the prompt of the activation holding it shows (None: not read)
    stored: tuple[tuple[str, str], ...] = ()
    prompt: tuple[tuple[str, str], ...] | None = None


@attrs.frozen
class BlockSwap:
    """A standalone block attached under a label the agent did not have, then detached (or,
    ``how`` = ``delete``, deleted through the blocks API, and the labels its actor's compiled
    prompt shows counted with the agent's): the attach's ``outcome`` and the agent's
    ``(block id, label)`` pairs after each."""

    agent_id: str
    block_id: str
    outcome: str  # "accepted" or the error's name
    after_attach: tuple[tuple[str, str], ...]
    after_detach: tuple[tuple[str, str], ...]
    how: str = "detach"


@attrs.frozen
class ImportSeen:
    """An export and import of ``source``; ``refused``: the error the import of the agent's
    own file answered (then ``imported`` is empty)."""

    source: str
    imported: str
    source_shape: tuple[Shape, ...]
    imported_shape: tuple[Shape, ...]
    refused: str | None = None


@attrs.frozen
class KeptView:
    """What an agent that was not deleted shows: its history's message ids, and each of its
    conversations with its history's message ids (oldest first)."""

    history: tuple[str, ...]
    conversations: tuple[tuple[str, tuple[str, ...]], ...]


@attrs.frozen
class DeleteSeen:
    """What could still be read of a deleted agent (``when``: ``at once`` after its delete
    was acknowledged, or ``after repair``)."""

    agent_id: str
    outcome: str  # "ok": acknowledged; "gone": an attempt's outcome was lost, then not found
    when: str
    agent_found: bool
    listed: bool
    history_found: bool
    runs_found: tuple[str, ...]  # run ids readable by id or listed across agents
    messages_found: tuple[str, ...]  # message ids readable by id or listed across agents


@attrs.define
class LifecycleLog:
    resets: list[ResetSeen] = attrs.Factory(list)
    approvals: list[Approval] = attrs.Factory(list)
    tools: list[ToolsSeen] = attrs.Factory(list)
    labels: list[LabelAttempt] = attrs.Factory(list)
    imports: list[ImportSeen] = attrs.Factory(list)
    deletes: list[DeleteSeen] = attrs.Factory(list)
    cancels: list[CancelSeen] = attrs.Factory(list)
    sent_runs: list[tuple[str, str, str | None]] = attrs.Factory(list)  # agent, run, stop
    swaps: list[BlockSwap] = attrs.Factory(list)
    # (block, limit, outcome of an update to exactly the limit, of one character more)
    limits: list[tuple[str, int, str, str]] = attrs.Factory(list)
    # (agent, before repair, after it): what a kept agent shows (param ``keep``)
    kept: list[tuple[str, KeptView, KeptView]] = attrs.Factory(list)


def _timeless(prompt: str) -> str:
    """A system prompt without its ``<memory_metadata>`` lines naming the current time (which
    a recompile a moment later renders differently) and counting archival memories (shown
    when the serving actor has the archive loaded, which another activation may not have)."""
    return "\n".join(
        line
        for line in prompt.split("\n")
        if not line.startswith("- The current time is:")
        and not (line.startswith("- ") and "total memories you created" in line)
    )


def _from(text: str, other: str) -> str:
    """``text`` from where it first differs from ``other`` (60 characters)."""
    at = next((i for i, (a, b) in enumerate(zip(text, other, strict=False)) if a != b), None)
    at = min(len(text), len(other)) if at is None else at
    return f"...{text[max(0, at - 20) : at + 40]!r}" if at else repr(text[:60])


def _resets(log: LifecycleLog) -> list[str]:
    problems = []
    for r in log.resets:
        if tuple((kind, _timeless(text)) for kind, text in r.history) != (
            ("system_message", _timeless(r.compiled)),
        ):
            got = [(kind, _from(text, r.compiled)) for kind, text in r.history]
            problems.append(
                f"after a reset {r.agent_id}'s history is {got}, not its recompiled system "
                f"message alone ({_from(r.compiled, r.history[0][1] if r.history else '')})"
            )
        if r.last_stop_reason is not None:
            problems.append(
                f"after a reset {r.agent_id} still reports a last run (stop reason "
                f"{r.last_stop_reason!r})"
            )
    return problems


def _rules(log: LifecycleLog) -> list[str]:
    problems = []
    for a in log.approvals:
        if a.shown != a.wanted:
            problems.append(
                f"{a.agent_id} requires approval for {sorted(a.shown)}, but the client set "
                f"{sorted(a.wanted)}"
            )
        if a.other_rules != a.made_with:
            problems.append(
                f"{a.agent_id}'s other tool rules are {list(a.other_rules)}, not "
                f"{list(a.made_with)} as made (only approval flags were changed)"
            )
    for t in log.tools:
        if t.shown != t.wanted:
            problems.append(
                f"{t.agent_id} has tools {sorted(t.shown)} after an update to {sorted(t.wanted)}"
            )
    return problems


def _labels(log: LifecycleLog) -> list[str]:
    problems = []
    for a in log.labels:
        if a.outcome != "refused":
            problems.append(
                f"{a.how} of a block of {a.agent_id} to the taken label {a.label!r}: "
                f"{a.outcome}, not refused (409); labels now {list(a.labels_after)}"
            )
        if len(set(a.labels_after)) != len(a.labels_after):
            problems.append(f"{a.agent_id} shows two blocks with one label: {list(a.labels_after)}")
        if a.prompt is not None:
            shown = [(lb, v) for lb, v in a.prompt if lb not in EPHEMERAL]
            if sorted(shown) != sorted(a.stored):
                problems.append(
                    f"after the {a.outcome} {a.how} to {a.label!r}, the prompt of the activation "
                    f"holding {a.agent_id} shows blocks {[lb for lb, _ in shown]} "
                    f"({[v[:30] for _, v in shown]}), storage has {[lb for lb, _ in a.stored]} "
                    f"({[v[:30] for _, v in a.stored]})"
                )
    for block_id, limit, fits, over in log.limits:
        if fits != "ok" or over != "refused":
            problems.append(
                f"block {block_id} (limit {limit}): an update to {limit} characters was {fits}, "
                f"one to {limit + 1} {over} (must be ok, then refused)"
            )
    for w in log.swaps:
        label = next((lb for b, lb in w.after_attach if b == w.block_id), None)
        if w.outcome != "accepted" or label is None:
            problems.append(
                f"attach of block {w.block_id} to {w.agent_id}, whose labels were free for it: "
                f"{w.outcome}, and the agent shows {[lb for _, lb in w.after_attach]}"
            )
        elif [lb for _, lb in w.after_attach].count(label) != 1:
            problems.append(f"{w.agent_id} shows two blocks labelled {label!r} after an attach")
        # every read of the agent, not only the one after a refusal (coreJ, session 14): a
        # refused attach that the actor applied in memory first shows up in the next write
        views = [w.after_attach] + ([w.after_detach] if w.how == "detach" else [])
        for view in views:
            labels = [lb for _, lb in view]
            twice = sorted({lb for lb in labels if labels.count(lb) > 1} - {label})
            if twice:
                problems.append(f"{w.agent_id} shows two blocks with one label: {twice}")
        if any(b == w.block_id or lb == label for b, lb in w.after_detach):
            problems.append(
                f"after {w.how.rstrip('e')}ing block {w.block_id} from {w.agent_id}, the agent "
                f"still shows it or its label: {[lb for _, lb in w.after_detach]}"
            )
    return problems


def _cancels(log: LifecycleLog) -> list[str]:
    problems = []
    for c in log.cancels:
        if c.status == "running" and c.asked == 0:
            where = f"conversation {c.thread}" if c.thread else "its own history"
            problems.append(
                f"cancelling {c.agent_id}'s runs reached none, while its run {c.run_id} (in "
                f"{where}), started through that node a moment before, was still running"
            )
    for agent_id, run_id, stop in log.sent_runs:
        if stop == "cancelled":
            problems.append(
                f"{agent_id}'s run {run_id} of a plain send, which no cancel named (the "
                "agent's client waited for it before anything else), ended cancelled"
            )
    return problems


def _imports(log: LifecycleLog) -> list[str]:
    problems = []
    for i in log.imports:
        if i.refused is not None:
            problems.append(f"the import of {i.source}'s own agent file was refused: {i.refused}")
            continue
        mine = [(kind, text) for kind, text, _, _ in i.imported_shape]
        theirs = [(kind, text) for kind, text, _, _ in i.source_shape]
        if mine != theirs:
            n = next(
                (n for n, (a, b) in enumerate(zip(theirs, mine, strict=False)) if a != b),
                min(len(mine), len(theirs)),
            )
            got = mine[n] if n < len(mine) else None
            want = theirs[n] if n < len(theirs) else None
            problems.append(
                f"{i.imported}, imported from {i.source}'s file, differs from its history at "
                f"message {n}: {got} for {want} ({len(mine)} messages for {len(theirs)})"
            )
            continue
        kept = with_its_call(i.source_shape)
        for n, ok in enumerate(with_its_call(i.imported_shape)):
            if kept[n] and not ok:
                problems.append(
                    f"{i.imported}, imported from {i.source}'s file: its message {n}, the result "
                    f"of tool call {i.imported_shape[n][3]}, is no longer in its call's step"
                )
                break
    return problems


def _deletes(log: LifecycleLog) -> list[str]:
    problems = []
    for d in log.deletes:
        if d.outcome != "ok" and d.when != "after repair":
            continue  # a lost outcome may leave records until repair
        left = [
            what
            for what, there in (
                ("the agent", d.agent_found),
                ("its entry in the agents list", d.listed),
                ("its history", d.history_found),
                (f"runs {list(d.runs_found)[:3]}", bool(d.runs_found)),
                (f"messages {list(d.messages_found)[:3]}", bool(d.messages_found)),
            )
            if there
        ]
        if left:
            problems.append(
                f"{d.agent_id} was deleted ({d.outcome}), yet {d.when} "
                f"{', '.join(left)} can still be read"
            )
    return problems


def check_lifecycle(log: LifecycleLog) -> list[str]:
    """Problems (empty: none); see the module docstring."""
    return [
        *_resets(log),
        *_rules(log),
        *_labels(log),
        *_cancels(log),
        *_imports(log),
        *_deletes(log),
        *_kept(log),
    ]


def _kept(log: LifecycleLog) -> list[str]:
    """``repair`` sweeps what deleted agents left; an agent that lives on shows the same
    history and conversations after it as before (``kelpie serve`` runs it at every start)."""
    out = []
    for agent, before, after in log.kept:
        if after.history != before.history:
            out.append(
                f"{agent}: repair changed its history ({len(before.history)} messages, "
                f"then {len(after.history)})"
            )
        was, now = dict(before.conversations), dict(after.conversations)
        for conv, ids in was.items():
            if conv not in now:
                out.append(f"{agent}: repair removed its conversation {conv}")
            elif now[conv] != ids:
                out.append(
                    f"{agent}: repair changed conversation {conv}'s history "
                    f"({len(ids)} messages, then {len(now[conv])})"
                )
    return out
