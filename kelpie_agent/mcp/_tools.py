"""Values the MCP client hands out (tools, results) and local argument checks."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import jsonschema  # type: ignore[import-untyped]
from jsonschema.exceptions import best_match  # type: ignore[import-untyped]

from ._errors import McpArgumentError

if TYPE_CHECKING:  # the SDK's types load with the client's first connection (_client.py)
    import mcp_types as types

__all__ = ["McpTool", "McpToolResult", "check_arguments", "result_from_sdk", "tool_from_sdk"]


@attrs.frozen
class McpTool:
    """A tool offered by an MCP server: its name, description and JSON Schema for arguments."""

    server: str
    name: str
    description: str
    input_schema: Mapping[str, Any] = attrs.field(hash=False, eq=False, repr=False)


@attrs.frozen
class McpToolResult:
    """What a tool call returned.

    ``text`` joins the text blocks of ``content`` with newlines. ``is_error`` is the server's
    flag for a tool that ran and failed (not an exception: the agent shows it as a failed tool
    result). ``content`` keeps every block as JSON; ``structured`` is the tool's structured
    output, if it declared one.
    """

    server: str
    tool: str
    text: str
    is_error: bool = False
    content: tuple[Mapping[str, Any], ...] = attrs.field(default=(), hash=False, eq=False)
    structured: Mapping[str, Any] | None = attrs.field(default=None, hash=False, eq=False)


def tool_from_sdk(server: str, tool: types.Tool) -> McpTool:
    return McpTool(server, tool.name, tool.description or "", dict(tool.input_schema))


def result_from_sdk(server: str, tool: str, result: types.CallToolResult) -> McpToolResult:
    blocks = tuple(
        block.model_dump(by_alias=True, mode="json", exclude_none=True) for block in result.content
    )
    text = "\n".join(b["text"] for b in blocks if b.get("type") == "text")
    return McpToolResult(
        server, tool, text, bool(result.is_error), blocks, result.structured_content
    )


class _Validators:
    """Compiled argument validators per tool, dropped when a tool's schema changes."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], tuple[str, Any]] = {}

    def get(self, tool: McpTool) -> Any:
        key = (tool.server, tool.name)
        text = json.dumps(tool.input_schema, sort_keys=True, default=str)
        cached = self._cache.get(key)
        if cached is not None and cached[0] == text:
            return cached[1]
        try:
            cls = jsonschema.validators.validator_for(tool.input_schema)
            cls.check_schema(tool.input_schema)
            validator = cls(tool.input_schema)
        except (jsonschema.SchemaError, TypeError):
            validator = None  # an invalid schema: leave the judgement to the server
        self._cache[key] = (text, validator)
        return validator


VALIDATORS = _Validators()


def check_arguments(tool: McpTool, arguments: object) -> dict[str, Any]:
    """The arguments as a JSON object, or :class:`McpArgumentError` saying what is wrong."""
    where = f"tool {tool.name!r} on mcp server {tool.server!r}"
    if not isinstance(arguments, Mapping):
        raise McpArgumentError(
            f"{where}: arguments must be a JSON object, got {type(arguments).__name__}",
            server=tool.server,
        )
    args = dict(arguments)
    try:
        json.dumps(args, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise McpArgumentError(
            f"{where}: arguments are not JSON: {error}", server=tool.server
        ) from None
    validator = VALIDATORS.get(tool)
    if validator is not None:
        worst = best_match(validator.iter_errors(args))
        if worst is not None:
            path = "/".join(str(p) for p in worst.absolute_path)
            at = f" at {path!r}" if path else ""
            message = " ".join(str(worst.message).split())
            if len(message) > 200:
                message = message[:197] + "..."
            raise McpArgumentError(f"{where}: bad arguments{at}: {message}", server=tool.server)
    return args
