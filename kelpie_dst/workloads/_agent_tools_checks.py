"""``tools_contract``: what the ``agent_tools`` client read, judged against its own model of
each tool (:mod:`._agent_tools_model`) and the documented contract. Pure functions of the log,
tested on hand-made bad logs in tests/workloads/test_agent_tools.py.

* **A custom tool's schema is its signature** (docs/tools/custom_tools.md): the name, the
  docstring's summary as the description, each parameter's type from its hint and
  description from ``Args:``, literal defaults shown as ``default``, and exactly the
  parameters without a default required (keyword-only ones too), in the upsert's answer and
  in every read.
* **A list holds exactly what its filter names**: ``name``, ``names``, ``tool_types``; an
  upsert of a tool that exists keeps one tool of that name.
* **A direct run answers the function's return value**: a string as it is, anything else as
  JSON, ``status`` success, what the tool printed in ``stdout`` and ``stderr`` (writing to
  stderr is no failure); an exception is ``status`` error with Letta's words
  ``Error executing function <name>: <Type>: <message>``; an MCP tool's result is its text
  blocks joined by newlines; a call missing a required argument is refused (400 or 422).
* **A stored tool result is the packaged return value, cut at the tool's limit**: every tool
  return in an agent's history answers its call with the status the model predicts and, in
  Letta's ``{"status", "message", "time"}`` package, the return value rendered as above, or,
  past the tool's ``return_char_limit``, exactly its first ``limit`` characters followed by a
  note naming the length and the limit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from ._agent_tools_model import GIVEN, TOOLS, VERSION, ToolCase, expected_result, result_matches

__all__ = [
    "ListSeen",
    "RunSeen",
    "StoredCall",
    "ToolsLog",
    "check_lists",
    "check_memory",
    "check_refusals",
    "check_runs",
    "check_schemas",
    "check_stored",
    "check_tools",
]

_DEFAULT_LIMIT = 50_000  # Letta's FUNCTION_RETURN_CHAR_LIMIT: tools without a limit of their own
_BY_NAME = {case.name: case for case in (*TOOLS, VERSION, GIVEN)}


@attrs.define
class ListSeen:
    what: str
    names: tuple[str, ...]
    expected: tuple[str, ...]
    exact: bool = True


@attrs.define
class RunSeen:
    what: str
    tool: str
    args: dict[str, Any]
    refused: bool  # the model says: a required argument is missing
    status: int
    answer: Any


@attrs.define
class StoredCall:
    agent: str
    call_id: str
    name: str
    arguments: str
    status: str
    tool_return: str
    stdout: tuple[str, ...] = ()
    stderr: tuple[str, ...] = ()


@attrs.define
class ToolsLog:
    schemas: list[tuple[str, str, Any]] = attrs.Factory(list)
    lists: list[ListSeen] = attrs.Factory(list)
    runs: list[RunSeen] = attrs.Factory(list)
    sends: list[tuple[str, str, int]] = attrs.Factory(list)
    stored: list[StoredCall] = attrs.Factory(list)
    mcp_ids: dict[str, str] = attrs.Factory(dict)
    refusals: list[tuple[str, int, str]] = attrs.Factory(list)  # bad sources: status, detail
    memory: list[tuple[str, str, str]] = attrs.Factory(list)  # what, read, expected
    problems: list[str] = attrs.Factory(list)


def _summary(case: ToolCase) -> str:
    start = case.source.index(f"def {case.name}(")
    doc = case.source[start:].split('"""')[1]
    return doc.strip().splitlines()[0].strip()


def check_schemas(schemas: list[tuple[str, str, Any]]) -> list[str]:
    problems = []
    for what, name, tool in schemas:
        case = _BY_NAME[name]
        schema = tool.get("json_schema") if isinstance(tool, Mapping) else None
        if not isinstance(schema, Mapping):
            problems.append(f"{what}: no json_schema in {str(tool)[:200]}")
            continue
        if schema.get("name") != name or tool.get("name") != name:
            problems.append(f"{what}: named {tool.get('name')!r}/{schema.get('name')!r}")
        described = case.description or _summary(case)
        if schema.get("description") != described or tool.get("description") != described:
            problems.append(
                f"{what}: description {tool.get('description')!r}/"
                f"{schema.get('description')!r}, not {described!r}"
            )
        params = schema.get("parameters") or {}
        props = params.get("properties") or {}
        for param, expected in case.properties.items():
            got = props.get(param)
            if got != expected:
                problems.append(f"{what}: parameter {param!r} is {got}, not {expected}")
        extra = sorted(set(props) - set(case.properties))
        if extra:
            problems.append(f"{what}: parameters {extra} the signature does not have")
        required = params.get("required")
        if not isinstance(required, list) or sorted(required) != sorted(case.required):
            problems.append(
                f"{what}: required is {required}, not {sorted(case.required)} (the parameters "
                "without a default)"
            )
        if case.return_char_limit is not None and tool.get("return_char_limit") != (
            case.return_char_limit
        ):
            problems.append(
                f"{what}: return_char_limit {tool.get('return_char_limit')}, not "
                f"{case.return_char_limit}"
            )
    return problems


def check_lists(lists: list[ListSeen]) -> list[str]:
    problems = []
    for seen in lists:
        if sorted(seen.names) != sorted(seen.expected):
            problems.append(
                f"{seen.what} listed {list(seen.names)[:8]}"
                f"{'...' if len(seen.names) > 8 else ''} ({len(seen.names)}), "
                f"not exactly {list(seen.expected)}"
            )
    return problems


def check_runs(runs: list[RunSeen]) -> list[str]:
    problems = []
    for run in runs:
        if run.refused:
            if run.status not in (400, 422):
                problems.append(
                    f"{run.what}: a required argument is missing, yet it answered {run.status} "
                    f"{str(run.answer)[:160]} (not a 400 or 422 refusal)"
                )
            continue
        if run.status != 200 or not isinstance(run.answer, Mapping):
            problems.append(f"{run.what}: answered {run.status} {str(run.answer)[:160]}")
            continue
        expected = expected_result(run.tool, run.args)
        if expected is None:
            continue
        kind, value = expected
        status = run.answer.get("status")
        text = run.answer.get("func_return")
        if kind == "error":
            if status != "error" or text != value:
                problems.append(
                    f"{run.what}: answered {status} {str(text)[:160]!r}, not error {value!r}"
                )
            continue
        if status != "success" or not isinstance(text, str) or not result_matches(value, text):
            problems.append(
                f"{run.what}: answered {status} {str(text)[:160]!r}, not success with the "
                f"return value {value!r}"
            )
        if run.tool == "tc_noisy":
            said = str(run.args.get("text"))
            stdout = list(run.answer.get("stdout") or ())
            stderr = list(run.answer.get("stderr") or ())
            if stdout != [f"noisy out {said}"]:
                problems.append(f"{run.what}: stdout {stdout}, not what it printed")
            if not any(f"warning: noisy {said}" in line for line in stderr):
                problems.append(f"{run.what}: stderr {stderr} lacks what it printed there")
    return problems


def _cut(text: str, limit: int) -> tuple[str, bool]:
    return (text[:limit], True) if len(text) > limit else (text, False)


def check_stored(stored: list[StoredCall]) -> list[str]:
    problems = []
    seen: set[tuple[str, str]] = set()
    for call in stored:
        where = f"{call.agent} agent: {call.name} call {call.call_id}"
        if (call.agent, call.call_id) in seen:
            problems.append(f"{where}: two stored results")
        seen.add((call.agent, call.call_id))
        if call.name == "send_message":
            continue
        try:
            args = json.loads(call.arguments)
        except ValueError:
            problems.append(f"{where}: its arguments {call.arguments[:80]!r} are not JSON")
            continue
        args = {k: v for k, v in args.items() if k != "request_heartbeat"}
        expected = expected_result(call.name, args)
        if expected is None:
            problems.append(f"{where}: a call of a tool the model never makes")
            continue
        try:
            package = json.loads(call.tool_return)
        except ValueError:
            problems.append(f"{where}: its result {call.tool_return[:80]!r} is not a package")
            continue
        message = package.get("message") if isinstance(package, Mapping) else None
        if not isinstance(message, str):
            problems.append(f"{where}: its result {call.tool_return[:80]!r} has no message")
            continue
        kind, value = expected
        want_status = "error" if kind == "error" else "success"
        word = "Failed" if kind == "error" else "OK"
        if call.status != want_status or package.get("status") != word:
            problems.append(
                f"{where}: stored {call.status} ({package.get('status')}) {message[:120]!r}, "
                f"not {want_status} with {str(value)[:80]!r}"
            )
            continue
        case = _BY_NAME.get(call.name)
        limit = (
            case.return_char_limit
            if case is not None and case.return_char_limit is not None
            else _DEFAULT_LIMIT
        )
        if kind == "error" or isinstance(value, str):
            text = str(value)
            head, cut = _cut(text, limit)
            if not cut and message != text:
                problems.append(f"{where}: stored {message[:120]!r}, not {text[:120]!r}")
            elif cut and not (
                message.startswith(head)
                and not message.startswith(text[: limit + 1])
                and f"{len(text)} > {limit}" in message[limit:]
            ):
                problems.append(
                    f"{where}: a result of {len(text)} characters, over the tool's limit "
                    f"{limit}, stored as {len(message)} characters {message[-100:]!r} (not its "
                    f"first {limit} characters and a note naming {len(text)} > {limit})"
                )
        elif not result_matches(value, message):
            problems.append(f"{where}: stored {message[:120]!r}, not the value {value!r}")
    return problems


def check_refusals(refusals: list[tuple[str, int, str]]) -> list[str]:
    """A source that cannot be a tool is refused with 400, naming ``source_code``."""
    return [
        f"{what}: answered {status} {detail[:160]} (not a 400 naming source_code)"
        for what, status, detail in refusals
        if status != 400 or "source_code" not in detail
    ]


def check_memory(memory: list[tuple[str, str, str]]) -> list[str]:
    """What a built-in memory tool run directly did is what a read after it shows."""
    return [
        f"{what}: read {got[:160]!r}, not {expected[:160]!r}"
        for what, got, expected in memory
        if got != expected
    ]


def check_tools(log: ToolsLog) -> list[str]:
    return (
        check_schemas(log.schemas)
        + check_memory(log.memory)
        + check_refusals(log.refusals)
        + check_lists(log.lists)
        + check_runs(log.runs)
        + check_stored(log.stored)
        + log.problems
    )
