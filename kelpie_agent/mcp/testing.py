"""A conformance suite for the MCP client against a server, real or simulated.

The server must offer the *conformance tools*: ``echo(text)`` returns ``text``; ``add(a, b)``
(integers) returns their sum as text; ``fail(message)`` fails (an ``isError`` result);
``sleep(seconds)`` answers ``"slept"`` after that long. ``tests/mcp/servers/echo_server.py`` is
such a server written with the official SDK, and :data:`CONFORMANCE_TOOLS` defines them for
``kelpie_dst.shims.SimMcpServer``::

    async with McpClient([config], transport=...) as client:
        await check_mcp_conformance(client, config.name)

``CHECKS`` names the checks so a test suite can run them one by one (:func:`run_check`).
The last check reconnects the server.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ._client import McpClient
from ._errors import McpArgumentError, McpError, McpTimeoutError, McpToolError

__all__ = ["CHECKS", "CONFORMANCE_TOOLS", "check_mcp_conformance", "run_check"]

Check = Callable[[McpClient, str], Awaitable[None]]


def _fail(message: str) -> None:
    raise AssertionError(message)


def _schema(properties: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in properties.items()},
        "required": list(properties),
    }


def _add(args: dict[str, Any]) -> str:
    return str(args["a"] + args["b"])


def _raise(args: dict[str, Any]) -> str:
    raise ValueError(args["message"])


async def _sleep(args: dict[str, Any]) -> str:
    await trio.sleep(args["seconds"])
    return "slept"


CONFORMANCE_TOOLS: list[dict[str, Any]] = [
    {
        "name": "echo",
        "description": "Return the text unchanged.",
        "input_schema": _schema({"text": "string"}),
        "response": {"echo": "text"},
    },
    {
        "name": "add",
        "description": "Add two integers.",
        "input_schema": _schema({"a": "integer", "b": "integer"}),
        "response": _add,
    },
    {
        "name": "fail",
        "description": "Always fail with the message.",
        "input_schema": _schema({"message": "string"}),
        "response": _raise,
    },
    {
        "name": "sleep",
        "description": "Sleep, then answer.",
        "input_schema": _schema({"seconds": "number"}),
        "response": _sleep,
    },
]


async def _raises(
    error: type[Exception], needle: str, fn: Callable[..., Awaitable[Any]], *args: Any, **kw: Any
) -> None:
    try:
        await fn(*args, **kw)
    except error as caught:
        if needle not in str(caught) or "\n" in str(caught):
            _fail(f"{error.__name__} should be one line mentioning {needle!r}: {caught}")
        return
    _fail(f"expected {error.__name__} from {getattr(fn, '__name__', fn)}{args}")


async def check_tools_are_listed(client: McpClient, server: str) -> None:
    tools = {t.name: t for t in await client.list_tools(server)}
    missing = {"echo", "add", "fail", "sleep"} - set(tools)
    if missing:
        _fail(f"tools/list lacks {sorted(missing)}; got {sorted(tools)}")
    for tool in tools.values():
        if tool.server != server or tool.input_schema.get("type") != "object":
            _fail(f"tool {tool.name!r} is listed badly: {tool!r} {tool.input_schema!r}")
    if "a" not in tools["add"].input_schema.get("properties", {}):
        _fail(f"add's schema lacks 'a': {tools['add'].input_schema!r}")
    everything = {(t.server, t.name) for t in await client.list_tools()}
    if (server, "echo") not in everything:
        _fail("list_tools() without a server must include every server's tools")
    if client.status(server) != "connected":
        _fail(f"status after listing should be 'connected', got {client.status(server)!r}")


async def check_calls_return_text(client: McpClient, server: str) -> None:
    text = "héllo, 世界 🦊\nline two"
    result = await client.call_tool(server, "echo", {"text": text})
    if (result.text, result.is_error, result.tool) != (text, False, "echo"):
        _fail(f"echo returned {result!r}")
    if result.content[0].get("type") != "text":
        _fail(f"echo's content should be a text block: {result.content!r}")
    added = await client.call_tool(server, "add", {"a": 2, "b": 40})
    if added.text != "42" or added.is_error:
        _fail(f"add(2, 40) returned {added!r}")


async def check_tool_failure_is_a_result(client: McpClient, server: str) -> None:
    result = await client.call_tool(server, "fail", {"message": "boom"})
    if not result.is_error or not result.text:
        _fail(f"a failing tool must give is_error=True with a message, got {result!r}")


async def check_bad_requests_are_clear_errors(client: McpClient, server: str) -> None:
    await _raises(McpToolError, "'nope'", client.call_tool, server, "nope", {})
    await _raises(
        McpArgumentError, "'b' is a required property", client.call_tool, server, "add", {"a": 1}
    )
    await _raises(McpArgumentError, "at 'a'", client.call_tool, server, "add", {"a": "x", "b": 1})
    await _raises(McpArgumentError, "JSON object", client.call_tool, server, "add", [1, 2])
    await _raises(McpError, "no mcp server named 'nobody'", client.call_tool, "nobody", "echo")
    await _raises(ValueError, "timeout", client.call_tool, server, "echo", {"text": ""}, timeout=0)
    result = await client.call_tool(server, "echo", {"text": "still fine"})
    if result.text != "still fine":
        _fail(f"the connection must survive rejected calls, got {result!r}")


async def check_concurrent_calls(client: McpClient, server: str) -> None:
    answers: dict[int, str] = {}

    async def one(i: int) -> None:
        answers[i] = (await client.call_tool(server, "echo", {"text": f"call {i}"})).text

    async with trio.open_nursery() as nursery:
        for i in range(8):
            nursery.start_soon(one, i)
    if answers != {i: f"call {i}" for i in range(8)}:
        _fail(f"concurrent calls got mixed up: {answers}")


async def check_timeout_leaves_the_connection_usable(client: McpClient, server: str) -> None:
    await _raises(
        McpTimeoutError,
        "did not answer within 0.5s",
        client.call_tool,
        server,
        "sleep",
        {"seconds": 30},
        timeout=0.5,
    )
    result = await client.call_tool(server, "echo", {"text": "after"})
    if result.text != "after" or client.status(server) != "connected":
        _fail(f"after a timeout the connection must still work, got {result!r}")


async def check_reconnect(client: McpClient, server: str) -> None:
    await client.reconnect(server)
    if client.status(server) != "connected":
        _fail(f"status after reconnect should be 'connected', got {client.status(server)!r}")
    result = await client.call_tool(server, "add", {"a": -1, "b": 1})
    if result.text != "0":
        _fail(f"add(-1, 1) after reconnect returned {result!r}")


CHECKS: dict[str, Check] = {
    "tools_are_listed": check_tools_are_listed,
    "calls_return_text": check_calls_return_text,
    "tool_failure_is_a_result": check_tool_failure_is_a_result,
    "bad_requests_are_clear_errors": check_bad_requests_are_clear_errors,
    "concurrent_calls": check_concurrent_calls,
    "timeout_leaves_the_connection_usable": check_timeout_leaves_the_connection_usable,
    "reconnect": check_reconnect,
}


async def run_check(name: str, client: McpClient, server: str) -> None:
    await CHECKS[name](client, server)


async def check_mcp_conformance(client: McpClient, server: str) -> None:
    for check in CHECKS.values():
        await check(client, server)
