"""Static configuration of MCP servers: a name, a command, its arguments and environment.

The accepted shape is the common ``mcp_config.json`` one (Claude Desktop, Letta)::

    {"mcpServers": {"files": {"command": "npx", "args": ["-y", "server-files", "/data"],
                              "env": {"TOKEN": "..."}}}}

Optional per-server fields: ``cwd``, ``startup_timeout`` (seconds for the process to start and
answer ``initialize``, default 30) and ``call_timeout`` (seconds per tool call, default 60).
Errors name the server and the field, on one line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ._errors import McpConfigError

__all__ = ["McpServerConfig", "load_mcp_config", "parse_mcp_config"]

DEFAULT_STARTUP_TIMEOUT = 30.0
DEFAULT_CALL_TIMEOUT = 60.0
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_FIELDS = ("command", "args", "env", "cwd", "startup_timeout", "call_timeout")


def _seq(value: Any) -> Any:
    """Lists become tuples; anything else is left for validation to reject with the name."""
    return tuple(value) if isinstance(value, list | tuple) else value


def _env(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(value.items())
    if isinstance(value, list | tuple):
        return tuple(tuple(p) if isinstance(p, list) else p for p in value)
    return value


def _hide_values(env: object) -> str:
    """Environment values are often secrets: show only the names."""
    if isinstance(env, tuple):
        return repr({pair[0]: "***" for pair in env if isinstance(pair, tuple) and pair})
    return "<invalid>"


def _env_problem(env: object) -> str | None:
    if not isinstance(env, tuple):
        return f"got {type(env).__name__}"
    for pair in env:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
            return f"got an entry of type {type(pair).__name__}"
        if not isinstance(pair[1], str):
            return f"{pair[0]!r} is {type(pair[1]).__name__}"
    return None


@attrs.frozen
class McpServerConfig:
    """One MCP server, started as ``command *args`` with ``env`` added to a minimal
    inherited environment (the SDK's: HOME, PATH, ...)."""

    name: str
    command: str
    args: tuple[str, ...] = attrs.field(default=(), converter=_seq)
    env: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_env, repr=_hide_values)
    cwd: str | None = None
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    url: str | None = None
    """A Streamable HTTP server's URL (then ``command`` is empty and ``headers`` are sent)."""
    headers: tuple[tuple[str, str], ...] = attrs.field(
        default=(), converter=_env, repr=_hide_values
    )

    def __attrs_post_init__(self) -> None:
        _check_name(self.name)
        where = f"mcp server {self.name!r}"
        if self.url is not None:
            if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://")):
                raise McpConfigError(f"{where}: 'url' must be an http(s) URL", server=self.name)
            problem = _env_problem(self.headers)
            if problem is not None:
                raise McpConfigError(
                    f"{where}: 'headers' must map strings to strings ({problem})",
                    server=self.name,
                )
            object.__setattr__(self, "headers", tuple(sorted(self.headers)))
        elif not isinstance(self.command, str) or not self.command.strip():
            raise McpConfigError(f"{where}: 'command' must be a non-empty string", server=self.name)
        if not isinstance(self.args, tuple) or not all(isinstance(a, str) for a in self.args):
            raise McpConfigError(
                f"{where}: 'args' must be a list of strings, got {self.args!r}", server=self.name
            )
        problem = _env_problem(self.env)
        if problem is not None:
            raise McpConfigError(
                f"{where}: 'env' must map strings to strings ({problem})", server=self.name
            )
        object.__setattr__(self, "env", tuple(sorted(self.env)))
        if self.cwd is not None and not isinstance(self.cwd, str):
            raise McpConfigError(f"{where}: 'cwd' must be a string", server=self.name)
        for field in ("startup_timeout", "call_timeout"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise McpConfigError(
                    f"{where}: {field!r} must be a positive number of seconds, got {value!r}",
                    server=self.name,
                )

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    @classmethod
    def http(cls, name: str, url: str, headers: Mapping[str, str] | None = None) -> McpServerConfig:
        """A Streamable HTTP server at ``url``, sent ``headers`` with every request."""
        return cls(name, "", url=url, headers=tuple(sorted((headers or {}).items())))


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise McpConfigError(
            f"mcp server name {name!r} must be 1-64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )


def _server(name: str, spec: object) -> McpServerConfig:
    _check_name(name)
    where = f"mcp server {name!r}"
    if not isinstance(spec, Mapping):
        raise McpConfigError(f"{where}: expected a table of settings, got {spec!r}", server=name)
    unknown = sorted(set(spec) - set(_FIELDS))
    if unknown:
        allowed = ", ".join(_FIELDS)
        raise McpConfigError(
            f"{where}: unknown field {unknown[0]!r} (allowed: {allowed}); "
            "only stdio servers (command + args) are supported",
            server=name,
        )
    if "command" not in spec:
        raise McpConfigError(f"{where}: 'command' is required", server=name)
    fields: dict[str, Any] = {k: spec[k] for k in _FIELDS if k in spec}
    return McpServerConfig(name, **fields)


def parse_mcp_config(data: object) -> tuple[McpServerConfig, ...]:
    """Server configs, in name order, from ``{"mcpServers": {name: {...}}}`` (or the inner
    table alone)."""
    if isinstance(data, Mapping) and "mcpServers" in data:
        extra = sorted(set(data) - {"mcpServers"})
        if extra:
            raise McpConfigError(f"mcp config: unknown top-level key {extra[0]!r}")
        data = data["mcpServers"]
    if not isinstance(data, Mapping):
        raise McpConfigError(f"mcp config: expected a table of servers, got {type(data).__name__}")
    for name in data:
        _check_name(name)
    return tuple(_server(name, data[name]) for name in sorted(data))


def load_mcp_config(path: str | Path) -> tuple[McpServerConfig, ...]:
    """Read and parse a JSON MCP configuration file (errors name the file)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise McpConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    except json.JSONDecodeError as error:
        raise McpConfigError(f"{path}: invalid JSON at line {error.lineno}: {error.msg}") from None
    try:
        return parse_mcp_config(data)
    except McpConfigError as error:
        raise McpConfigError(f"{path}: {error}", server=error.server) from None
