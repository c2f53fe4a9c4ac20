"""Tests of history records, the recorder, and malformed input."""

from __future__ import annotations

import ast
import math
import sys
from pathlib import Path

import pytest

import kelpie_dst.checkers
from kelpie_dst.checkers import (
    UNKNOWN,
    HistoryRecorder,
    MalformedHistoryError,
    Operation,
    OpKind,
    check_linearizability,
)

from .histories import cas

# --- records, the recorder, and what the package imports ---------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"invoke_time": 3.0, "response_time": 2.0}, "response time 2.0 is before invoke time 3.0"),
        ({"output": UNKNOWN}, "UNKNOWN output must have response time inf"),
        ({"response_time": math.inf}, "response time inf must have UNKNOWN output"),
        ({"invoke_time": math.nan}, "times must not be NaN"),
        ({"kind": "increment"}, "unknown operation kind 'increment'"),
        ({"key": 5}, "key must be bytes or str, not int"),
        ({"kind": "cas", "output": "yes"}, "cas output must be True, False or UNKNOWN"),
        ({"kind": "write", "output": "a"}, "write output must be None or UNKNOWN"),
        ({"output": ["a"]}, "output must be hashable"),
    ],
)
def test_malformed_operations_are_rejected(fields: dict[str, object], message: str) -> None:
    base: dict[str, object] = {
        "process": 1,
        "kind": "read",
        "key": "x",
        "output": "a",
        "invoke_time": 0.0,
        "response_time": 1.0,
    }
    with pytest.raises(MalformedHistoryError, match=message) as info:
        Operation(**{**base, **fields})  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)


def test_recorder_rejects_bad_completions() -> None:
    rec = HistoryRecorder()
    h = rec.invoke(1, "read", "x", time=5.0)
    with pytest.raises(MalformedHistoryError, match="before invoke time"):
        rec.ok(h, "a", time=4.0)
    rec.ok(h, "a", time=6.0)
    with pytest.raises(MalformedHistoryError, match="not pending"):
        rec.info(h)
    with pytest.raises(MalformedHistoryError, match="key must be bytes or str"):
        rec.invoke(1, "read", 3, time=0.0)  # type: ignore[arg-type]


def test_recorder_builds_operations_in_invocation_order() -> None:
    rec = HistoryRecorder()
    a = rec.invoke(1, "write", "x", value="a", time=0.0)
    b = rec.invoke(2, OpKind.CAS, "x", expected="a", value="b", time=0.5)
    c = rec.invoke(3, "read", "x", time=0.7)
    rec.ok(b, True, time=2.0)
    rec.ok(a, time=1.0)
    rec.info(c)
    rec.invoke(4, "delete", "x", time=3.0)  # never completed: outcome unknown
    history = rec.history()
    assert [o.process for o in history] == [1, 2, 3, 4]
    assert [o.unknown for o in history] == [False, False, True, True]
    assert history[1] == cas(2, "x", "a", "b", True, 0.5, 2.0)
    assert history[3].response_time == math.inf
    assert history[1].describe() == "p2 cas 'x' from 'a' to 'b' -> ok at [0.5, 2.0]"
    assert history[2].describe() == "p3 read 'x' -> ? at [0.7, ?) (outcome unknown)"


def test_checkers_import_nothing_from_the_simulator() -> None:
    # Checkers are pure functions over histories: only the standard library, attrs and each other.
    package = Path(kelpie_dst.checkers.__file__).parent
    for source in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in {"__future__", "attrs", *sys.stdlib_module_names}, (source, name)


def test_history_items_must_be_operations() -> None:
    with pytest.raises(TypeError, match="history item #0 is a str"):
        check_linearizability(["read x"])  # type: ignore[list-item]
