"""The SDK surface: letta-client's methods found by introspection, matched to Kelpie's routes,
and the table of them in docs/http-api.md kept true."""

from __future__ import annotations

from pathlib import Path

import attrs

from .sdk_surface import CLOUD_ONLY, routed, sdk_methods, table_rows

DOC = Path(__file__).resolve().parents[2] / "docs" / "http-api.md"


def test_introspection_finds_every_resource_and_known_calls() -> None:
    methods = {m.name: m for m in sdk_methods()}
    assert methods["health"].path == "/v1/health/"
    assert (methods["agents.messages.list"].verb, methods["agents.messages.list"].path) == (
        "GET",
        "/v1/agents/{agent_id}/messages",
    )
    assert methods["tools.search"].verb == "POST"
    assert {m.split(".")[0] for m in methods} >= {"agents", "runs", "steps", *CLOUD_ONLY}
    nowhere = attrs.evolve(methods["steps.retrieve"], name="nowhere", path="/v1/nowhere/{x}")
    table = routed([*methods.values(), nowhere])
    assert table[methods["runs.retrieve"]] and table[methods["steps.retrieve"]]
    assert not table[nowhere]


def test_sdk_table_matches_the_routes() -> None:
    text = DOC.read_text()
    start = text.index("<!-- sdk-table -->\n") + len("<!-- sdk-table -->\n")
    documented = text[start : text.index("<!-- /sdk-table -->")].strip().splitlines()
    assert documented == table_rows(), "regenerate: python -m tests.api.sdk_surface --table"
