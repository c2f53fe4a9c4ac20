"""docs/http-server.md documents every option with its default, and every public name."""

from __future__ import annotations

import re
from pathlib import Path

import attrs

import kelpie_agent.http
from kelpie_agent.http import ServerOptions

DOC = (Path(__file__).resolve().parents[2] / "docs" / "http-server.md").read_text()


def _shown(value: object) -> str:
    if value is None:
        return "trio's"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1024:
        return f"{value // 1024 // 1024} MiB" if value >= 1024 * 1024 else f"{value // 1024} KiB"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def test_every_option_is_in_the_table_with_its_default() -> None:
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", DOC, re.M))
    for field in attrs.fields(ServerOptions):
        assert field.name in rows, f"docs/http-server.md lacks option {field.name}"
        shown = rows[field.name].strip().strip("`")
        assert shown == _shown(field.default).strip("`"), (field.name, shown)


def test_every_public_name_is_mentioned() -> None:
    for name in kelpie_agent.http.__all__:
        if name not in ("ASGIApp", "AccessLog", "ServerLogger", "ServerStatistics"):
            assert f"`{name}" in DOC, name
