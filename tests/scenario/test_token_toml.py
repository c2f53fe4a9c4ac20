"""Replay tokens round-trip; the TOML writer round-trips scenario documents."""

from __future__ import annotations

import math
import tomllib

import pytest

from kelpie_dst import UsageError
from kelpie_dst.scenario import ReplayToken, scenario_files
from kelpie_dst.scenario._toml import dumps


def test_token_round_trip_is_compact_and_shell_safe() -> None:
    token = ReplayToken(
        "tests/x y.toml", 2**40, ("a.b=1", 'w=["0s", "1m"]'), "ab" * 16, hashseed="17"
    )
    text = token.encode()
    assert ReplayToken.decode(text) == token
    assert text.startswith("kd1.") and all(c.isalnum() or c in "._-" for c in text)
    plain = ReplayToken("kv_linearizability", 42, trace_hash="0" * 32)
    assert ReplayToken.decode(plain.encode()) == plain and len(plain.encode()) < 90
    assert plain.run_command() == "kelpie-dst run kv_linearizability --seed 42"
    assert token.run_command().startswith("PYTHONHASHSEED=17 kelpie-dst run 'tests/x y.toml'")
    assert token.replay_line() == f"replay: kelpie-dst replay {text}"


@pytest.mark.parametrize("bad", ["", "kd2.abc", "kd1.", "kd1.%%%", "kd1.AAAA"])
def test_damaged_tokens_are_usage_errors(bad: str) -> None:
    with pytest.raises(UsageError):
        ReplayToken.decode(bad)


def test_toml_writer_round_trips() -> None:
    doc = {
        "name": "x",
        "duration": "1h30m",
        "seeds": 3,
        "ratio": 1e-07,
        "big": math.inf,
        "flag": False,
        "list": ["a", "b"],
        "workload": {"entry": "m:f", "params": {"a": 1, "b": "two"}},
        "faults": {"network": {"partition": {"probability": 0.2, "window": ["0s", "inf"]}}},
        "topology": {"mcp": [{"name": "w", "tools": ["t"]}, {"name": "v"}], "nodes": 3},
        "odd key": {"x.y": 1},
    }
    assert tomllib.loads(dumps(doc)) == doc
    for path in scenario_files():
        with open(path, "rb") as f:
            data = tomllib.load(f)
        assert tomllib.loads(dumps(data)) == data
