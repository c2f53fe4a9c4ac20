"""What the model is shown of each tool must be the tool's documented signature.

A tool schema is a contract with the model: a parameter left out of it is one the model will
not send (or sends and has refused), a default on the wrong parameter makes it leave out an
argument it needed. The simulated model fills whatever schema it is shown, so a wrong schema
does not fail any call: it has to be checked where the model sees it, in every LLM request.

* **Built-in tools** keep the signatures docs/tools/<name>.md documents (Letta's): the
  parameters and which are required, pinned here in :data:`BUILTIN_SIGNATURES`
  (``tests/workloads/test_tool_signatures.py`` checks the pin against the docs pages).
  ``request_heartbeat`` is left out of the comparison (``check_heartbeats`` judges it).
* **Custom tools** are shown the signature of their Python source: every parameter but
  ``self``/``agent_state``, required exactly when it has no default, with that default. The
  workload reads its own tool's signature with :mod:`inspect` from the defined function, never
  with the server's parser.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

__all__ = [
    "BUILTIN_SIGNATURES",
    "Signature",
    "check_tool_schemas",
    "signature_of_source",
]

_IGNORED = ("request_heartbeat",)


@attrs.frozen
class Signature:
    """A tool's parameters (in order), the required ones, and the defaults shown."""

    params: tuple[str, ...]
    required: frozenset[str]
    defaults: Mapping[str, Any] = attrs.field(factory=dict, hash=False)


def _sig(*params: str, optional: Iterable[str] = ()) -> Signature:
    left_out = frozenset(optional)
    return Signature(tuple(params), frozenset(p for p in params if p not in left_out))


BUILTIN_SIGNATURES: Mapping[str, Signature] = {
    "send_message": _sig("message"),
    "conversation_search": _sig(
        "query",
        "roles",
        "limit",
        "start_date",
        "end_date",
        optional=("roles", "limit", "start_date", "end_date"),
    ),
    "conversation_search_date": _sig("start_date", "end_date", "page", optional=("page",)),
    "archival_memory_insert": _sig("content", "tags", optional=("tags",)),
    "archival_memory_search": _sig(
        "query",
        "tags",
        "tag_match_mode",
        "top_k",
        "start_datetime",
        "end_datetime",
        optional=("tags", "tag_match_mode", "top_k", "start_datetime", "end_datetime"),
    ),
    "core_memory_append": _sig("label", "content"),
    "core_memory_replace": _sig("label", "old_content", "new_content"),
    "memory_replace": _sig("label", "old_string", "new_string"),
    "memory_insert": _sig("label", "new_string", "insert_line", optional=("insert_line",)),
    "memory_rethink": _sig("label", "new_memory"),
    "memory_finish_edits": _sig(),
    "pause_heartbeats": _sig("minutes"),
    "run_code": _sig("code", "language"),
    "open_files": _sig("file_requests", "close_all_others", optional=("close_all_others",)),
    "grep_files": _sig(
        "pattern",
        "include",
        "context_lines",
        "offset",
        optional=("include", "context_lines", "offset"),
    ),
    "semantic_search_files": _sig("query", "limit", optional=("limit",)),
}


def signature_of_source(source: str, name: str) -> Signature:
    """The signature of function ``name`` defined by ``source`` (Python's own reading of it:
    the source is executed to define the function, never called)."""
    namespace: dict[str, Any] = {}
    exec(
        compile(source, f"<tool {name}>", "exec"), namespace
    )  # our own source, defined, never called
    func: Callable[..., Any] = namespace[name]
    params = [
        p
        for p in inspect.signature(func).parameters.values()
        if p.name not in ("self", "agent_state")
    ]
    return Signature(
        tuple(p.name for p in params),
        frozenset(p.name for p in params if p.default is inspect.Parameter.empty),
        {p.name: p.default for p in params if p.default is not inspect.Parameter.empty},
    )


def _shown(schema: Mapping[str, Any]) -> tuple[tuple[str, ...], frozenset[str], dict[str, Any]]:
    props = schema.get("properties", {})
    props = props if isinstance(props, Mapping) else {}
    names = tuple(p for p in props if p not in _IGNORED)
    required = frozenset(r for r in schema.get("required", ()) if r not in _IGNORED)
    defaults = {
        p: spec["default"]
        for p, spec in props.items()
        if p not in _IGNORED and isinstance(spec, Mapping) and "default" in spec
    }
    return names, required, defaults


def check_tool_schemas(
    tools: Iterable[tuple[str, Mapping[str, Any]]],
    customs: Mapping[str, Signature],
    where: str,
) -> list[str]:
    """Problems with the ``(name, input schema)`` of the tools one request offers: a built-in
    whose parameters or required ones are not its documented ones, a custom tool whose
    parameters, required ones or defaults are not its source's."""
    problems = []
    for name, schema in tools:
        custom = customs.get(name)
        expected = custom if custom is not None else BUILTIN_SIGNATURES.get(name)
        if expected is None:
            continue  # an MCP tool, or a tool this oracle knows nothing about
        names, required, defaults = _shown(schema)
        wrong = []
        if set(names) != set(expected.params):
            wrong.append(f"parameters {sorted(names)}, documented {sorted(expected.params)}")
        if required != expected.required:
            wrong.append(f"required {sorted(required)}, documented {sorted(expected.required)}")
        if custom is not None and defaults != dict(custom.defaults):
            wrong.append(f"defaults {defaults}, its source's {dict(custom.defaults)}")
        if wrong:
            problems.append(f"{where}: the model was shown {name} with {'; '.join(wrong)}")
    return problems
