"""The properties ``settings_contract`` judges (``agents.py``, with ``settings``), from what
:class:`._agent_settings.SettingsWalker` read:

- **Create and update**: an agent shows every setting it was created with, whichever of
  Letta's shapes carried the model, context window and output tokens (top-level fields,
  ``llm_config`` with ``model``, or with ``handle``), and its blocks their value, limit,
  read-only flag and description (Letta's default limit, 20,000, when none was given); a
  ``PATCH /v1/agents/{id}`` changes exactly the fields it gives, empty ones too, and every
  other field keeps its value, in its answer and in every read after it.
- **Agent file round trip**: an imported copy of an agent shows the source's settings, tool
  rules and blocks (name aside), shares no block with the source or with another copy of the
  same file, has the source's files open and closed as they were, and exports as the document
  it was imported from (file-local ids resolved; ``_agent_catalog_checks.normal_agent_file``).
  An import whose outcome the client never learnt (found by name after a cut attempt) is
  judged on what the create commits with the agent only (not its folders and open files).
- **Isolation**: writing a copy's block leaves the source's and the other copy's blocks as
  they were.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ._agent_catalog_checks import AFTER_CREATE, FILE_TOOL_TYPE, align_export, normal_agent_file

__all__ = ["SettingsLog", "agent_shape", "blocks_shape", "check_settings"]

FIELDS = (
    "name",
    "system",
    "description",
    "tags",
    "metadata",
    "timezone",
    "model",
    "context_window",
    "max_tokens",
    "tool_rules",
    "blocks",
)


@attrs.define
class SettingsLog:
    problems: list[str] = attrs.Factory(list)  # requests that failed for good
    # (what, the model of the agent, what it showed)
    reads: list[tuple[str, dict[str, Any], dict[str, Any]]] = attrs.Factory(list)
    # (what, the source as shown, the copy as shown)
    copies: list[tuple[str, dict[str, Any], dict[str, Any]]] = attrs.Factory(list)
    block_ids: list[tuple[str, tuple[str, ...]]] = attrs.Factory(list)  # (agent, its block ids)
    open_source: dict[str, bool] = attrs.Factory(dict)  # file name -> open, the source's
    open_copy: dict[str, bool] = attrs.Factory(dict)  # ... and the first copy's
    # (what, the document imported, the copy's export)
    round_trips: list[tuple[str, dict[str, Any], dict[str, Any]]] = attrs.Factory(list)
    # (what, blocks before, blocks after) of agents whose memory nobody wrote meanwhile
    isolation: list[tuple[str, Any, Any]] = attrs.Factory(list)
    unsure: list[str] = attrs.Factory(list)  # copies found by name after a cut import


def _rule(rule: Any) -> tuple[Any, ...]:
    def get(key: str) -> Any:
        return rule.get(key) if isinstance(rule, Mapping) else getattr(rule, key, None)

    return (
        get("type"),
        get("tool_name"),
        tuple(get("children") or ()),
        get("max_count_limit"),
    )


def blocks_shape(state: Any) -> dict[str, tuple[Any, ...]]:
    """An AgentState's blocks by label: value, limit, read-only flag, description."""
    return {
        str(b.label): (b.value, b.limit, bool(b.read_only), b.description or "")
        for b in state.blocks or ()
    }


def agent_shape(state: Any) -> dict[str, Any]:
    """What an AgentState shows of the fields the walk sets (comparable with its model)."""
    llm = state.llm_config
    return {
        "name": state.name,
        "system": state.system,
        "description": state.description or "",
        "tags": sorted(state.tags or ()),
        "metadata": dict(state.metadata or {}),
        "timezone": state.timezone or "UTC",
        "model": (llm.handle if llm is not None else None) or state.model,
        "context_window": llm.context_window if llm is not None else None,
        "max_tokens": llm.max_tokens if llm is not None else None,
        "tool_rules": sorted(map(_rule, state.tool_rules or ())),
        "blocks": blocks_shape(state),
    }


def _normal(model: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: model.get(k) for k in FIELDS}
    out["description"] = out["description"] or ""
    out["tags"] = sorted(out["tags"] or ())
    out["metadata"] = dict(out["metadata"] or {})
    out["tool_rules"] = sorted(map(_rule, out["tool_rules"] or ()))
    return out


def _differences(
    want: Mapping[str, Any], got: Mapping[str, Any], skip: tuple[str, ...] = ()
) -> list[str]:
    return [
        f"{k} {got.get(k)!r}, want {want.get(k)!r}"
        for k in FIELDS
        if k not in skip and got.get(k) != want.get(k)
    ]


def _check_reads(log: SettingsLog) -> list[str]:
    out = []
    for what, model, seen in log.reads:
        wrong = _differences(_normal(model), seen)
        if wrong:
            out.append(f"{what}: {'; '.join(wrong)}")
    return out


def _check_copies(log: SettingsLog) -> list[str]:
    out = []
    for what, source, copy in log.copies:
        wrong = _differences(source, copy, skip=("name",))
        if wrong:
            out.append(f"{what}: {'; '.join(wrong)} (the source's)")
    owners: dict[str, str] = {}
    for agent, ids in log.block_ids:
        for block_id in ids:
            if block_id in owners:
                out.append(f"{agent} and {owners[block_id]} share block {block_id}")
            owners.setdefault(block_id, agent)
    return out


def _check_files(log: SettingsLog) -> list[str]:
    if not log.open_source or not log.open_copy or COPY_FIRST[0] in log.unsure:
        return []
    if log.open_copy != log.open_source:
        return [
            f"the imported copy's files are open {sorted(log.open_copy.items())}, the source's "
            f"{sorted(log.open_source.items())}"
        ]
    return []


COPY_FIRST = ("settings-copy-a",)


def _check_round_trips(log: SettingsLog) -> list[str]:
    out: list[str] = []
    for what, written, exported in log.round_trips:
        try:
            want, got = normal_agent_file(written), normal_agent_file(exported)
        except (KeyError, TypeError, ValueError) as error:
            out.append(f"{what}: the export is not an agent file of one agent: {error!r}")
            continue
        got["tools"] = {
            n: t
            for n, t in got["tools"].items()
            if n in want["tools"] or t.get("tool_type") != FILE_TOOL_TYPE
        }
        align_export(got, want, exported)
        for part in want:
            if COPY_FIRST[0] in log.unsure and part in AFTER_CREATE:
                continue
            if got[part] != want[part]:
                out.append(f"{what}: {part} {got[part]!r}, the file has {want[part]!r}")
    return out


def _check_isolation(log: SettingsLog) -> list[str]:
    return [
        f"{what}: blocks {after!r}, were {before!r}"
        for what, before, after in log.isolation
        if after != before
    ]


def check_settings(log: SettingsLog) -> list[str]:
    """Every property of the module docstring, against ``log``."""
    return [
        *log.problems,
        *_check_reads(log),
        *_check_copies(log),
        *_check_files(log),
        *_check_round_trips(log),
        *_check_isolation(log),
    ]
