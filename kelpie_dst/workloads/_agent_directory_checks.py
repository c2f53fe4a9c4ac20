"""The DIRECTORY oracle's pure checks (``directory``, via HTTP; ``_agent_directory`` drives).

What a user of Letta's cross-agent API would state, each judged against the workload's own
model, never against a server helper:

* **A filtered list is the reference filtered.** Every list is first read once, unfiltered, in
  one page (the *reference*); then each filter the workload uses is read in pages of one or two
  following ``after`` cursors, oldest first and newest first, and must be exactly the
  reference's items the model's predicate keeps, in the reference's order (reversed for
  ``desc``): no item twice, none missing, none extra. The predicates are the documented ones:
  blocks by a case-insensitive part of the label, value or description and by the number of
  agents attached (counted from the agents' own block lists), tags by a case-insensitive part,
  tools by a case-insensitive part of the name and by type, messages by type, agents by
  identity and last stop reason (both: the intersection).
* **What was made is what is listed.** Each acknowledged standalone block is listed with its
  label, value and description; the agents listed for a block are exactly the agents whose
  block lists hold it; each tool the workload upserted is listed once, under the id its first
  upsert answered, with the tags and source of its last acknowledged change; a source-only
  update keeps the tool's tags.
* **Searches answer only what matches, attributed right.** A tool search filtered by tags (any
  of them) returns only, and without a query exactly, the tools that carry one of them; every
  message search hit is a message of the agent it names (the owner of a conversation's
  message is the conversation's agent), and a search scoped to an agent or a conversation
  answers only its messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

__all__ = [
    "AgentSeen",
    "BlockSeen",
    "DirectoryLog",
    "Hit",
    "MadeTool",
    "RunSeen",
    "ToolSeen",
    "Walk",
    "check_directory",
    "want_walk",
]


@attrs.frozen
class AgentSeen:
    id: str
    name: str
    tags: tuple[str, ...] = ()
    block_ids: tuple[str, ...] = ()
    identity_ids: tuple[str, ...] = ()
    last_stop_reason: str | None = None
    model: str | None = None


@attrs.frozen
class BlockSeen:
    id: str
    label: str
    value: str
    description: str = ""


@attrs.frozen
class RunSeen:
    id: str
    agent_id: str
    status: str | None = None
    stop_reason: str | None = None
    conversation_id: str | None = None
    background: bool | None = None


@attrs.frozen
class ToolSeen:
    id: str
    name: str
    tool_type: str
    tags: tuple[str, ...] = ()
    source: str = ""


@attrs.frozen
class MadeTool:
    """A tool the workload upserted: the id its first upsert answered, and what its last
    acknowledged change gave it (tags, a marker its source holds)."""

    name: str
    id: str | None
    tags: tuple[str, ...]
    marker: str


@attrs.frozen
class Walk:
    """One filtered list read in pages: its area (``blocks``, ``tags``, ``tools``,
    ``messages``, ``agents``), the filter (sorted ``(name, value)`` pairs), the order, the
    page size, and the ids (tags for ``tags``) it returned, in order. ``before``: a walk
    backwards, each page asked ``before`` the first item of the page after it, starting
    from this cursor; its pages are put back in listing order."""

    area: str
    params: tuple[tuple[str, Any], ...]
    order: str
    size: int
    got: tuple[str, ...]
    before: str | None = None

    def label(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.params) or "no filter"
        way = "" if self.before is None else f", backwards from {self.before}"
        return f"{self.area} ({shown}; {self.order}, pages of {self.size}{way})"


@attrs.frozen
class Hit:
    """One message search hit: the search (its label and scope), the message, the agent."""

    search: str
    message_id: str
    agent_id: str
    scope_agent: str | None = None
    scope_conversation: str | None = None


@attrs.define
class DirectoryLog:
    """What the workload did and read (``_agent_directory``); the checks judge it."""

    agents: list[AgentSeen] = attrs.Factory(list)  # the agents reference
    blocks: list[BlockSeen] = attrs.Factory(list)  # the blocks reference
    tools: list[ToolSeen] = attrs.Factory(list)  # the tools reference
    messages: list[tuple[str, str]] = attrs.Factory(list)  # reference: (id, message_type)
    runs: list[RunSeen] = attrs.Factory(list)  # the runs reference
    models: list[str] = attrs.Factory(list)  # the models list's handles, as listed
    agent_models: dict[str, str] = attrs.Factory(dict)  # agent -> its model's handle
    made_blocks: dict[str, BlockSeen] = attrs.Factory(dict)  # label -> acknowledged block
    block_agents: dict[str, tuple[str, ...]] = attrs.Factory(dict)  # block -> listed agents
    made_tools: dict[str, MadeTool] = attrs.Factory(dict)  # name -> model
    updated_tools: list[tuple[str, ToolSeen]] = attrs.Factory(list)  # read after an update
    identities: dict[str, set[str]] = attrs.Factory(dict)  # identity -> attached (model)
    walks: list[Walk] = attrs.Factory(list)
    tool_searches: list[tuple[tuple[str, ...], bool, tuple[str, ...]]] = attrs.Factory(list)
    owners: dict[str, str] = attrs.Factory(dict)  # message id -> agent (from the histories)
    threads: dict[str, str] = attrs.Factory(dict)  # message id -> its thread (agent or conv)
    hits: list[Hit] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)  # found while driving (a failed request, ...)


def _part(text: object, needle: str) -> bool:
    return needle.casefold() in str(text or "").casefold()


def _block_counts(agents: Iterable[AgentSeen]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for agent in agents:
        for block_id in dict.fromkeys(agent.block_ids):  # each block once, in order
            counts[block_id] = counts.get(block_id, 0) + 1
    return counts


def _keep_block(b: BlockSeen, p: Mapping[str, Any], counts: Mapping[str, int]) -> bool:
    n = counts.get(b.id, 0)
    return (
        all(
            _part(getattr(b, field), p[f"{field}_search"])
            for field in ("label", "value", "description")
            if f"{field}_search" in p
        )
        and ("connected_to_agents_count_gt" not in p or n > p["connected_to_agents_count_gt"])
        and ("connected_to_agents_count_lt" not in p or n < p["connected_to_agents_count_lt"])
        and ("connected_to_agents_count_eq" not in p or n in p["connected_to_agents_count_eq"])
    )


def _keep_tool(t: ToolSeen, p: Mapping[str, Any]) -> bool:
    return (
        ("search" not in p or _part(t.name, p["search"]))
        and ("tool_types" not in p or t.tool_type in p["tool_types"])
        and ("names" not in p or t.name in p["names"])
    )


def _keep_run(r: RunSeen, p: Mapping[str, Any]) -> bool:
    return (
        ("agent_ids" not in p or r.agent_id in p["agent_ids"])
        and ("statuses" not in p or r.status in p["statuses"])
        and ("stop_reason" not in p or r.stop_reason == p["stop_reason"])
        and ("conversation_id" not in p or r.conversation_id == p["conversation_id"])
        and ("background" not in p or bool(r.background) == p["background"])
    )


def _keep_agent(a: AgentSeen, p: Mapping[str, Any], identities: Mapping[str, set[str]]) -> bool:
    return ("identity_id" not in p or a.id in identities.get(p["identity_id"], set())) and (
        "last_stop_reason" not in p or a.last_stop_reason == p["last_stop_reason"]
    )


def want_walk(log: DirectoryLog, walk: Walk) -> list[str]:
    """What ``walk`` must return: the reference of its area, filtered by the model."""
    p = dict(walk.params)
    want: list[str]
    if walk.area == "blocks":
        counts = _block_counts(log.agents)
        want = [b.id for b in log.blocks if _keep_block(b, p, counts)]
    elif walk.area == "tags":
        tags = sorted({t for a in log.agents for t in a.tags})
        want = [t for t in tags if "name" not in p or _part(t, p["name"])]
    elif walk.area == "tools":
        want = [t.id for t in log.tools if _keep_tool(t, p)]
    elif walk.area == "messages":
        types = p.get("include_return_message_types")
        want = [m for m, kind in log.messages if types is None or kind in types]
    elif walk.area == "runs":
        want = [r.id for r in log.runs if _keep_run(r, p)]
    elif walk.area == "agents":
        want = [a.id for a in log.agents if _keep_agent(a, p, log.identities)]
    else:
        raise ValueError(f"unknown area {walk.area!r}")
    if walk.order == "desc":
        want.reverse()
    if walk.before is not None and walk.before in want:  # (a cursor not in it: no match)
        want = want[: want.index(walk.before)]
    return want


def _check_walks(log: DirectoryLog) -> list[str]:
    problems = []
    for walk in log.walks:
        want = want_walk(log, walk)
        if list(walk.got) != want:
            problems.append(f"{walk.label()}: got {list(walk.got)}, want {want}")
    return problems


def _check_blocks(log: DirectoryLog) -> list[str]:
    problems = []
    listed = {b.id: b for b in log.blocks}
    for label, made in log.made_blocks.items():
        seen = listed.get(made.id)
        if seen is None:
            problems.append(f"block {label} ({made.id}) was acknowledged but is not listed")
        elif seen != made:
            problems.append(f"block {label} is listed as {seen}, not as made: {made}")
    holders: dict[str, list[str]] = {}
    for agent in log.agents:
        for block_id in agent.block_ids:
            holders.setdefault(block_id, []).append(agent.id)
    for block_id, got in log.block_agents.items():
        if sorted(got) != sorted(holders.get(block_id, [])):
            want = sorted(holders.get(block_id, []))
            problems.append(f"block {block_id}'s agents: got {sorted(got)}, want {want}")
    return problems


def _check_tools(log: DirectoryLog) -> list[str]:
    problems = []
    for name, made in log.made_tools.items():
        seen = [t for t in log.tools if t.name == name]
        if made.id is None:
            continue  # never acknowledged
        if [t.id for t in seen] != [made.id]:
            problems.append(f"tool {name}: listed as {[t.id for t in seen]}, want [{made.id}]")
            continue
        tool = seen[0]
        if sorted(tool.tags) != sorted(made.tags):
            problems.append(f"tool {name}: tags {list(tool.tags)}, want {list(made.tags)}")
        if made.marker not in tool.source:
            problems.append(f"tool {name}: its source is not its last change's ({made.marker})")
    for marker, tool in log.updated_tools:
        model = log.made_tools.get(tool.name)
        if model is not None and sorted(tool.tags) != sorted(model.tags):
            problems.append(
                f"tool {tool.name} after a source-only update ({marker}): tags "
                f"{list(tool.tags)}, want {list(model.tags)} (an update keeps what it omits)"
            )
        if marker not in tool.source:
            problems.append(f"tool {tool.name}: an acknowledged update ({marker}) is not stored")
    for tags, queried, got in log.tool_searches:
        tagged = [t.id for t in log.tools if set(tags) & set(t.tags)]
        extra = sorted(set(got) - set(tagged))
        if extra:
            problems.append(f"tools.search(tags={list(tags)}): {extra} carry none of them")
        if not queried and sorted(got) != sorted(tagged):
            problems.append(
                f"tools.search(tags={list(tags)}) without a query: got {sorted(got)}, "
                f"want every tool with one of them: {sorted(tagged)}"
            )
    return problems


def _check_hits(log: DirectoryLog) -> list[str]:
    problems = []
    for hit in log.hits:
        owner = log.owners.get(hit.message_id)
        if owner is None:
            problems.append(f"{hit.search}: hit {hit.message_id} is in no history read")
            continue
        if hit.agent_id != owner:
            problems.append(
                f"{hit.search}: hit {hit.message_id} is named {hit.agent_id}'s, but it is {owner}'s"
            )
        if hit.scope_agent is not None and owner != hit.scope_agent:
            problems.append(f"{hit.search}: hit {hit.message_id} is not {hit.scope_agent}'s")
        thread = log.threads.get(hit.message_id)
        if hit.scope_conversation is not None and thread != hit.scope_conversation:
            problems.append(
                f"{hit.search}: hit {hit.message_id} is in {thread}, not {hit.scope_conversation}"
            )
    return problems


def _check_models(log: DirectoryLog) -> list[str]:
    """The models list: each handle once, in order, and every agent's model among them."""
    problems = []
    if log.models != sorted(set(log.models)):
        problems.append(f"models list: {log.models} is not each handle once, sorted")
    for agent_id, model in sorted(log.agent_models.items()):
        if log.models and model not in log.models:
            problems.append(f"models list {log.models} lacks {model}, the model of {agent_id}")
    return problems


def check_directory(log: DirectoryLog) -> list[str]:
    """Every property of the module docstring, against ``log``."""
    return [
        *log.problems,
        *_check_walks(log),
        *_check_blocks(log),
        *_check_tools(log),
        *_check_hits(log),
        *_check_models(log),
    ]
