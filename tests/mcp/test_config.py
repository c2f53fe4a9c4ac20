"""MCP server configuration: the mcp_config.json shape, defaults, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kelpie_agent.errors import KelpieError
from kelpie_agent.mcp import (
    McpArgumentError,
    McpConfigError,
    McpConnectionError,
    McpError,
    McpServerConfig,
    McpStartupTimeoutError,
    McpTimeoutError,
    McpToolError,
    load_mcp_config,
    parse_mcp_config,
)


def test_parse_the_common_shape() -> None:
    configs = parse_mcp_config(
        {
            "mcpServers": {
                "weather": {"command": "uvx", "args": ["mcp-weather"], "env": {"B": "2", "A": "1"}},
                "files": {"command": "npx", "args": ["-y", "fs", "/data"], "call_timeout": 5},
            }
        }
    )
    assert [c.name for c in configs] == ["files", "weather"]  # name order
    files, weather = configs
    assert files.args == ("-y", "fs", "/data") and files.call_timeout == 5
    assert files.startup_timeout == 30.0 and files.env == () and files.cwd is None
    assert weather.env == (("A", "1"), ("B", "2")) and weather.env_dict == {"A": "1", "B": "2"}
    assert parse_mcp_config({"x": {"command": "run-x"}}) == (McpServerConfig("x", "run-x"),)
    assert parse_mcp_config({"mcpServers": {}}) == ()


def test_configs_are_frozen_values() -> None:
    config = McpServerConfig("a", "cmd", ["x"], {"K": "V"})
    assert config == McpServerConfig("a", "cmd", ("x",), [("K", "V")])
    assert hash(config) == hash(McpServerConfig("a", "cmd", ("x",), {"K": "V"}))
    with pytest.raises(AttributeError):
        config.name = "b"  # type: ignore[misc]
    secret = McpServerConfig("a", "cmd", env={"API_KEY": "sk-secret"})
    assert "API_KEY" in repr(secret) and "sk-secret" not in repr(secret)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "mcp config: expected a table of servers, got list"),
        ({"mcpServers": {}, "extra": 1}, "unknown top-level key 'extra'"),
        ({"bad name!": {"command": "x"}}, "mcp server name 'bad name!' must be 1-64 letters"),
        ({"s": "npx"}, "mcp server 's': expected a table of settings, got 'npx'"),
        ({"s": {"args": []}}, "mcp server 's': 'command' is required"),
        ({"s": {"command": ""}}, "mcp server 's': 'command' must be a non-empty string"),
        (
            {"s": {"command": "x", "args": "a b"}},
            "mcp server 's': 'args' must be a list of strings",
        ),
        ({"s": {"command": "x", "args": [1]}}, "mcp server 's': 'args' must be a list of strings"),
        (
            {"s": {"command": "x", "env": ["A"]}},
            "mcp server 's': 'env' must map strings to strings",
        ),
        (
            {"s": {"command": "x", "env": {"A": 1}}},
            "'env' must map strings to strings ('A' is int)",
        ),
        ({1: {"command": "x"}, "a": {"command": "y"}}, "mcp server name 1 must be"),
        ({"s": {"command": "x", "cwd": 3}}, "mcp server 's': 'cwd' must be a string"),
        ({"s": {"command": "x", "call_timeout": 0}}, "'call_timeout' must be a positive number"),
        ({"s": {"command": "x", "startup_timeout": "9"}}, "'startup_timeout' must be a positive"),
        ({"s": {"url": "http://x"}}, "unknown field 'url' (allowed: command, args, env, cwd"),
    ],
)
def test_bad_config_is_a_one_line_error_naming_the_field(data: object, message: str) -> None:
    with pytest.raises(McpConfigError) as caught:
        parse_mcp_config(data)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_load_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"echo": {"command": "python3", "args": ["s.py"]}}}))
    assert load_mcp_config(path) == (McpServerConfig("echo", "python3", ["s.py"]),)
    path.write_text('{"mcpServers": {"echo": {"args": []}}}')
    with pytest.raises(
        McpConfigError, match=r"mcp\.json: mcp server 'echo': 'command' is required"
    ):
        load_mcp_config(path)
    path.write_text("{nope")
    with pytest.raises(McpConfigError, match=r"mcp\.json: invalid JSON at line 1"):
        load_mcp_config(path)
    with pytest.raises(McpConfigError, match="cannot read"):
        load_mcp_config(tmp_path / "missing.json")


def test_every_error_derives_from_the_roots() -> None:
    for error in (
        McpConfigError,
        McpConnectionError,
        McpTimeoutError,
        McpToolError,
        McpArgumentError,
        McpStartupTimeoutError,
    ):
        assert issubclass(error, McpError) and issubclass(error, KelpieError)
    assert issubclass(McpStartupTimeoutError, McpConnectionError)
    assert issubclass(McpStartupTimeoutError, McpTimeoutError)
    assert issubclass(McpArgumentError, McpToolError)
