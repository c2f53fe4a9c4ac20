"""The checks of ``agent_admin`` (:mod:`.agent_admin`), pure functions of what the client
recorded and what the final read-back found.

Properties a user of the admin API states:

* **an acknowledged update shows everywhere**: after the last acknowledged rename of an agent
  (no later update whose outcome was unknown), the agent has that name and those tags, and the
  agent list filtered by that name, and by those tags, finds it;
* **a shared archive keeps what it acknowledged**: every passage added to an archive and
  acknowledged is in the passage list of each agent the archive is attached to;
* **an agent file round-trips**: an agent imported from an exported file has the source's
  memory blocks, each with the same label, value, limit and read-only flag;
* **a filtered search filters before it ranks**: an archival search with a tag returns
  ``min(top_k, the passages the agent lists with that tag)`` hits, each carrying the tag.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

__all__ = ["BlockShape", "Final", "Rename", "check_admin", "check_searches"]


@attrs.frozen
class BlockShape:
    """What an agent file must carry of a block."""

    label: str
    value: str
    limit: int
    read_only: bool


@attrs.frozen
class Rename:
    """One update the client made: its outcome ``ok`` (acknowledged) or ``unknown``."""

    agent_id: str
    name: str
    tags: tuple[str, ...]
    outcome: str


@attrs.define
class Final:
    """What the final read-back found, per agent id."""

    names: dict[str, tuple[str, tuple[str, ...]]] = attrs.Factory(dict)  # name, tags
    by_name: dict[str, list[str]] = attrs.Factory(dict)  # agents list (name=...) ids
    by_tags: dict[str, list[str]] = attrs.Factory(dict)  # agents list (tags=...) ids
    passages: dict[str, list[str]] = attrs.Factory(dict)  # agent -> passage texts
    blocks: dict[str, list[BlockShape]] = attrs.Factory(dict)  # agent -> its blocks
    tagged: dict[tuple[str, str], list[str]] = attrs.Factory(dict)  # (agent, tag) -> listed
    found: dict[tuple[str, str], list[tuple[str, tuple[str, ...]]]] = attrs.Factory(dict)


def _last_renames(renames: Sequence[Rename]) -> dict[str, Rename]:
    """Per agent, its last acknowledged rename, if no update after it had an unknown
    outcome (that one may or may not have landed)."""
    last: dict[str, Rename | None] = {}
    for r in renames:
        if r.outcome == "ok":
            last[r.agent_id] = r
        elif r.outcome == "unknown":
            last[r.agent_id] = None
    return {agent: r for agent, r in last.items() if r is not None}


def check_admin(
    renames: Sequence[Rename],
    archived: Mapping[str, Sequence[str]],
    attached: Mapping[str, Sequence[str]],
    imports: Mapping[str, tuple[str, Sequence[BlockShape]]],
    final: Final,
) -> list[str]:
    """Problems (empty: none). ``archived``: archive id -> acknowledged passage texts;
    ``attached``: archive id -> the agents it was attached to (acknowledged); ``imports``:
    imported agent id -> (source agent id, the source's blocks when it was exported)."""
    problems = []
    for agent, r in sorted(_last_renames(renames).items()):
        shown = final.names.get(agent)
        if shown is not None and shown != (r.name, r.tags):
            problems.append(f"{agent} was renamed {r.name} {list(r.tags)}, but shows {shown}")
        if agent not in final.by_name.get(r.name, []):
            problems.append(f"the agents list by name {r.name!r} misses {agent}")
        for tag in r.tags:
            if agent not in final.by_tags.get(tag, []):
                problems.append(f"the agents list by tag {tag!r} misses {agent}")
    for archive, texts in sorted(archived.items()):
        for agent in attached.get(archive, ()):
            listed = set(final.passages.get(agent, []))
            missing = [t for t in texts if t not in listed]
            if missing:
                problems.append(
                    f"{agent} lists no passage {missing[:3]} of its archive {archive}"
                    + (f" ({len(missing)} in all)" if len(missing) > 3 else "")
                )
    for new, (source, blocks) in sorted(imports.items()):
        got = sorted(final.blocks.get(new, []), key=lambda b: b.label)
        want = sorted(blocks, key=lambda b: b.label)
        if got != want:
            problems.append(f"{new}, imported from {source}'s file, has blocks {got}, not {want}")
    return problems


def check_searches(final: Final, top_k: int) -> list[str]:
    """Problems with the tag-filtered searches of the final read-back (see the module
    docstring): ``final.found[(agent, tag)]`` against ``final.tagged[(agent, tag)]``."""
    problems = []
    for (agent, tag), hits in sorted(final.found.items()):
        listed = final.tagged.get((agent, tag), [])
        untagged = [text for text, tags in hits if tag not in tags]
        if untagged:
            problems.append(f"{agent}'s search with tag {tag!r} returned {untagged}, untagged")
        want = min(top_k, len(listed))
        if len(hits) != want:
            problems.append(
                f"{agent}'s search with tag {tag!r} (top_k {top_k}) returned {len(hits)} hits; "
                f"it lists {len(listed)} passages with that tag"
            )
    return problems
