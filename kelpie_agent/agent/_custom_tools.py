"""Custom tools from Python source: the JSON schema from the signature, run in the sandbox.

The source is parsed with :mod:`ast` and never executed in the server process. The tool is
the last public top-level ``def`` (or the one named ``name``). The schema comes from its
type hints and its Google-style docstring (Letta's rules): the summary is the description,
``Args:`` gives each parameter's description, parameters without defaults are required.
Execution runs ``source + a small driver`` through ``Sandbox.exec_python``; the driver prints
the JSON-encoded return value after a marker line.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import attrs

from kelpie_agent.llm._types import TOOL_NAME

from ._errors import ToolDefinitionError

__all__ = ["RESULT_MARKER", "CustomTool", "driver_source", "parse_result", "parse_tool_source"]

RESULT_MARKER = "__kelpie_tool_result__:"
_SKIP_PARAMS = ("self", "agent_state")
_SCALARS = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_ARRAYS = ("list", "List", "tuple", "Tuple", "set", "Set", "Sequence")
_OBJECTS = ("dict", "Dict", "Mapping")
_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?):$"
)
_ARG_LINE = re.compile(r"^\*{0,2}([A-Za-z_]\w*)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")


@attrs.frozen
class CustomTool:
    """What the source declares: the function's name, description and parameters schema."""

    name: str
    description: str
    parameters: dict[str, Any] = attrs.field(hash=False)


def _fail(problem: str, node: ast.AST | None = None) -> ToolDefinitionError:
    line = getattr(node, "lineno", None)
    where = f"source_code line {line}" if line else "source_code"
    return ToolDefinitionError(f"{where}: {problem}")


def _annotation_schema(node: ast.expr, param: str) -> dict[str, Any]:
    """The JSON schema of a type annotation."""
    text = ast.unparse(node)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            raise _fail(f"parameter {param!r}: cannot read annotation {text}", node) from None
    if isinstance(node, ast.Constant) and node.value is None:
        return {"type": "null"}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union([node.left, node.right], param)
    name, args = _generic(node)
    if name in _SCALARS and not args:
        return {"type": _SCALARS[name]}
    if name == "Any" and not args:
        return {}
    if name in ("Optional",) and len(args) == 1:
        return _union([args[0], ast.Constant(None)], param)
    if name == "Union" and args:
        return _union(args, param)
    if name in _ARRAYS:
        items = _annotation_schema(args[0], param) if args else {}
        return {"type": "array", "items": items} if items else {"type": "array"}
    if name in _OBJECTS:
        return {"type": "object"}
    if name == "Literal" and args:
        values = []
        for arg in args:
            if not isinstance(arg, ast.Constant):
                raise _fail(f"parameter {param!r}: Literal values must be constants", node)
            values.append(arg.value)
        kinds = sorted({_json_type(v) for v in values})
        return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": values}
    raise _fail(
        f"parameter {param!r}: unsupported type annotation {text!r} (use str, int, float, bool, "
        "list[...], dict[...], Literal[...], Optional[...] or X | None)",
        node,
    )


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string" if isinstance(value, str) else "null"


def _generic(node: ast.expr) -> tuple[str, list[ast.expr]]:
    """``typing.List[int]`` -> ("List", [int]); ``str`` -> ("str", [])."""
    args: list[ast.expr] = []
    if isinstance(node, ast.Subscript):
        inner = node.slice
        args = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr, args
    if isinstance(node, ast.Name):
        return node.id, args
    return ast.unparse(node), args


def _union(options: list[ast.expr], param: str) -> dict[str, Any]:
    schemas = [_annotation_schema(o, param) for o in options]
    if all(set(s) <= {"type"} and isinstance(s.get("type"), str) for s in schemas):
        kinds = [s["type"] for s in schemas]
        return {"type": kinds[0] if len(kinds) == 1 else kinds}
    nullable = [s for s in schemas if s != {"type": "null"}]
    if len(nullable) == 1 and len(schemas) == 2:
        only = dict(nullable[0])
        kind = only.get("type")
        if isinstance(kind, str):
            only["type"] = [kind, "null"]
            return only
    return {"anyOf": schemas}


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary and the ``Args:`` descriptions of a Google-style docstring."""
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for raw in doc.splitlines():
        line = raw.strip()
        heading = _SECTION.match(line)
        if heading:
            section, current, arg_indent = heading.group(1), None, None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in ("Args", "Arguments", "Parameters") or not line:
            continue
        indent = len(raw) - len(raw.lstrip())
        match = _ARG_LINE.match(line)
        if match and (arg_indent is None or indent <= arg_indent):
            arg_indent = indent
            current = match.group(1)
            params[current] = match.group(3).strip()
        elif current is not None:
            params[current] = f"{params[current]} {line}".strip()
    return " ".join(" ".join(summary).split()), params


def _pick(tree: ast.Module, name: str | None) -> ast.FunctionDef:
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    if name is not None:
        defs = [d for d in defs if d.name == name]
        if not defs:
            raise _fail(f"no top-level function named {name!r}")
    else:
        public = [d for d in defs if not d.name.startswith("_")]
        defs = public or defs
        if not defs:
            raise _fail("no top-level function (def) to use as the tool")
    chosen = defs[-1]
    if isinstance(chosen, ast.AsyncFunctionDef):
        raise _fail(f"{chosen.name!r} is async; custom tools must be plain functions", chosen)
    return chosen


def parse_tool_source(source: str, name: str | None = None) -> CustomTool:
    """The tool defined by ``source``; :class:`ToolDefinitionError` names what is wrong."""
    if not isinstance(source, str) or not source.strip():
        raise _fail("is empty")
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise ToolDefinitionError(
            f"source_code line {error.lineno}: syntax error: {error.msg}"
        ) from None
    func = _pick(tree, name)
    if not TOOL_NAME.fullmatch(func.name):
        raise _fail(f"function name {func.name!r} is not a valid tool name", func)
    args = func.args
    if args.vararg or args.kwarg:
        raise _fail(f"{func.name}: *args and **kwargs are not supported", func)
    if args.posonlyargs:
        raise _fail(f"{func.name}: positional-only parameters are not supported", func)
    summary, docs = _parse_docstring(ast.get_docstring(func) or "")
    positional = args.args
    defaults: dict[str, ast.expr] = dict(
        zip(
            [a.arg for a in positional[len(positional) - len(args.defaults) :]],
            args.defaults,
            strict=True,
        )
    )
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if default is not None:
            defaults[arg.arg] = default
    properties: dict[str, Any] = {}
    required: list[str] = []
    for arg in [*positional, *args.kwonlyargs]:
        if arg.arg in _SKIP_PARAMS:
            continue
        if arg.annotation is None:
            raise _fail(f"parameter {arg.arg!r} has no type annotation", arg)
        schema = _annotation_schema(arg.annotation, arg.arg)
        if docs.get(arg.arg):
            schema["description"] = docs[arg.arg]
        if arg.arg in defaults:
            try:
                schema["default"] = ast.literal_eval(defaults[arg.arg])
            except ValueError:
                pass  # a default that is not a literal: optional, with no default shown
        else:
            required.append(arg.arg)
        properties[arg.arg] = schema
    parameters = {"type": "object", "properties": properties, "required": required}
    return CustomTool(func.name, summary, parameters)


def driver_source(source: str, name: str, arguments: dict[str, Any]) -> str:
    """Python that runs tool ``name`` from ``source`` with ``arguments`` and prints its JSON
    result after :data:`RESULT_MARKER`."""
    payload = json.dumps(json.dumps(arguments))
    return (
        f"{source}\n\n"
        "import json as _kelpie_json\n"
        f"_kelpie_result = {name}(**_kelpie_json.loads({payload}))\n"
        "try:\n"
        "    _kelpie_text = _kelpie_json.dumps(_kelpie_result)\n"
        "except (TypeError, ValueError):\n"
        "    _kelpie_text = _kelpie_json.dumps(str(_kelpie_result))\n"
        f"print({RESULT_MARKER!r} + _kelpie_text)\n"
    )


def parse_result(stdout: str) -> tuple[bool, Any, str]:
    """(found, value, the tool's own stdout) from a driver run's stdout. The driver ends its
    result line with a newline: a line without one was cut (the output passed the sandbox's
    limit), and a cut line is no result, even when what is left parses (a number's first
    digits)."""
    head, marker, tail = stdout.rpartition(RESULT_MARKER)
    if not marker:
        return False, None, stdout
    line, newline, _ = tail.partition("\n")
    if not newline:
        return False, None, stdout
    try:
        value = json.loads(line)
    except ValueError:
        return False, None, stdout
    return True, value, head
