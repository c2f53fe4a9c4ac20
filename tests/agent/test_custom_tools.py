"""Custom tools: the JSON schema derived from type hints and a Google-style docstring, and
clear one-line errors for source that cannot be a tool."""

from __future__ import annotations

import pytest

from kelpie_agent.agent import ToolDefinitionError, parse_tool_source
from kelpie_agent.agent._custom_tools import driver_source, parse_result

WEATHER = '''
from typing import Literal, Optional


def _helper(x):
    return x


def get_weather(city: str, days: int = 3, units: Literal["c", "f"] = "c",
                detailed: Optional[bool] = None, tags: list[str] | None = None) -> str:
    """Get the weather forecast for a city.

    Looks it up in a very reliable source.

    Args:
        city (str): The city to look up.
        days (int): How many days to forecast,
            counting today.
        units: Celsius or Fahrenheit.
        detailed: Whether to include hourly data.

    Returns:
        str: The forecast.
    """
    return f"{city}: sunny for {days} days"
'''


def test_the_schema_comes_from_the_signature_and_the_docstring() -> None:
    tool = parse_tool_source(WEATHER)
    assert tool.name == "get_weather"  # the last public function; helpers are skipped
    assert (
        tool.description
        == "Get the weather forecast for a city. Looks it up in a very reliable source."
    )
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city to look up."},
            "days": {
                "type": "integer",
                "description": "How many days to forecast, counting today.",
                "default": 3,
            },
            "units": {
                "type": "string",
                "enum": ["c", "f"],
                "description": "Celsius or Fahrenheit.",
                "default": "c",
            },
            "detailed": {
                "type": ["boolean", "null"],
                "description": "Whether to include hourly data.",
                "default": None,
            },
            "tags": {"type": ["array", "null"], "items": {"type": "string"}, "default": None},
        },
        "required": ["city"],
    }


def test_keyword_only_parameters_dicts_floats_and_agent_state_are_handled() -> None:
    source = (
        "def f(agent_state, *, ratio: float, data: dict[str, int], n: 'int' = 1) -> None:\n"
        "    pass\n"
    )
    tool = parse_tool_source(source)
    assert tool.parameters["required"] == ["ratio", "data"]
    assert tool.parameters["properties"] == {
        "ratio": {"type": "number"},
        "data": {"type": "object"},
        "n": {"type": "integer", "default": 1},
    }
    assert tool.description == ""


def test_a_named_function_is_picked_when_asked() -> None:
    source = "def a(x: int) -> int:\n    return x\n\ndef b(y: str) -> str:\n    return y\n"
    assert parse_tool_source(source).name == "b"
    assert parse_tool_source(source, "a").parameters["required"] == ["x"]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(x: int:\n    pass\n", "source_code line 1: syntax error"),
        ("x = 1\n", "no top-level function"),
        ("def f(x):\n    return x\n", "line 1: parameter 'x' has no type annotation"),
        ("def f(*args: int) -> None:\n    pass\n", "*args and **kwargs are not supported"),
        ("async def f(x: int) -> None:\n    pass\n", "is async"),
        ("def f(x: set[Foo] | Foo) -> None:\n    pass\n", "unsupported type annotation 'Foo'"),
        ("   ", "source_code: is empty"),
    ],
)
def test_bad_source_gets_a_one_line_error_naming_where(source: str, message: str) -> None:
    with pytest.raises(ToolDefinitionError) as caught:
        parse_tool_source(source)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_missing_named_function_is_reported() -> None:
    with pytest.raises(ToolDefinitionError, match="no top-level function named 'zzz'"):
        parse_tool_source("def a(x: int) -> int:\n    return x\n", "zzz")


def test_the_driver_prints_the_json_result_after_the_marker() -> None:
    code = driver_source(
        "def add(a: int, b: int) -> int:\n    print('adding')\n    return a + b\n",
        "add",
        {"a": 2, "b": 3},
    )
    namespace: dict[str, object] = {}
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<tool>", "exec"), namespace)
    found, value, own = parse_result(out.getvalue())
    assert (found, value, own) == (True, 5, "adding\n")


def test_output_without_the_marker_is_not_a_result() -> None:
    assert parse_result("Traceback ...\n") == (False, None, "Traceback ...\n")


def test_a_result_line_cut_short_is_not_a_result() -> None:
    """Output past the sandbox's limit is cut: the result line loses its end, and what is
    left may still parse (a number's first digits), yet it is no result."""
    from kelpie_agent.agent._custom_tools import RESULT_MARKER

    whole = f"said\n{RESULT_MARKER}123456\n"
    assert parse_result(whole) == (True, 123456, "said\n")
    for cut in (len(whole) - 1, len(whole) - 4, len(whole) - 8):
        assert parse_result(whole[:cut])[0] is False, whole[:cut]
