"""What the tools a user writes declare and return, as the ``agent_tools`` client models them.

Every expectation here is written from the documented contract (docs/tools/custom_tools.md,
docs/tools/mcp_tools.md, Letta's tool semantics), never from the server's parser or driver:
the schema each custom tool's signature gives, and what each call of each tool returns (the
functions below compute it in the client, from the arguments alone).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = [
    "BAD_SOURCES",
    "GIVEN",
    "GIVEN_SCHEMA",
    "LONG_LIMIT",
    "MCP_BLOCKS",
    "MCP_REFUSAL",
    "MCP_SERVER",
    "MCP_TOOLS",
    "OUTPUT_LIMIT",
    "SCRATCH",
    "TOOLS",
    "VERSION",
    "VERSION_1",
    "WIDE",
    "WIDE_CASES",
    "ToolCase",
    "expected_result",
    "long_text",
]

LONG_LIMIT = 150  # tc_long's own return_char_limit
MCP_SERVER = "shelf"
MCP_BLOCKS = ("first shelf line", "second shelf line", "third: the end")
MCP_TOOLS = ("shelf_a", "shelf_b", "shelf_c", "shelf_d", "shelf_multi", "shelf_shut")
"""The shelf server's tools, listed two a page: ``shelf_multi`` and ``shelf_shut`` (whose every
answer is an ``isError`` result in plain words) are on the third page."""
MCP_REFUSAL = "the shelf is shut today"


@attrs.frozen
class ToolCase:
    """A custom tool: its source, and the schema the documented rules give its signature."""

    name: str
    source: str
    properties: Mapping[str, Any] = attrs.field(hash=False)
    required: tuple[str, ...]
    return_char_limit: int | None = None
    description: str | None = None  # given with the upsert (else: the docstring's summary)


def _p(kind: Any, description: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "description": description, **extra}


SHAPE = ToolCase(
    "tc_shape",
    '''from typing import Literal, Optional


def _helper(x: str) -> str:
    return x


def tc_shape(
    city: str,
    *,
    units: str,
    days: int = 3,
    tags: Optional[list[str]] = None,
    mode: Literal["near", "far"] = "near",
    scale: float = 1.5,
    loud: bool = False,
) -> str:
    """Shape a forecast for a city.

    Args:
        city: The city to look up.
        units: The units to use.
        days: How many days.
        tags: Labels to add.
        mode: How far to look.
        scale: A factor to apply.
        loud: Shout the answer.

    Returns:
        str: the forecast line
    """
    text = "|".join([city, units, str(days), ",".join(tags or []), mode, str(scale), str(loud)])
    return _helper(text.upper() if loud else text)
''',
    {
        "city": _p("string", "The city to look up."),
        "units": _p("string", "The units to use."),
        "days": _p("integer", "How many days.", default=3),
        "tags": _p(["array", "null"], "Labels to add.", items={"type": "string"}, default=None),
        "mode": _p("string", "How far to look.", enum=["near", "far"], default="near"),
        "scale": _p("number", "A factor to apply.", default=1.5),
        "loud": _p("boolean", "Shout the answer.", default=False),
    },
    ("city", "units"),
)
KINDS = ToolCase(
    "tc_kinds",
    '''def tc_kinds(kind: str):
    """Answer a value of the kind asked for.

    Args:
        kind: words, none, map, list, number, wide or empty.
    """
    values = {
        "words": 'plain words, "quoted"',
        "none": None,
        "map": {"b": 1, "a": [1, "x"]},
        "list": [3, 1, 2],
        "number": 7,
        "wide": "海 ø 🦦",
        "empty": "",
    }
    return values[kind]
''',
    {"kind": _p("string", "words, none, map, list, number, wide or empty.")},
    ("kind",),
    description="Kinds of values, as the client describes them.",
)
KIND_VALUES: dict[str, Any] = {
    "words": 'plain words, "quoted"',
    "none": None,
    "map": {"b": 1, "a": [1, "x"]},
    "list": [3, 1, 2],
    "number": 7,
    "wide": "海 ø 🦦",
    "empty": "",
}
NOISY = ToolCase(
    "tc_noisy",
    '''import sys


def tc_noisy(text: str) -> str:
    """Reverse a text, talking about it on stdout and stderr.

    Args:
        text: The text to reverse.
    """
    print("noisy out " + text)
    print("warning: noisy " + text, file=sys.stderr)
    return text[::-1]
''',
    {"text": _p("string", "The text to reverse.")},
    ("text",),
)
FAIL = ToolCase(
    "tc_fail",
    '''def tc_fail(reason: str) -> str:
    """Fail with the reason given.

    Args:
        reason: Why it fails.
    """
    raise ValueError(reason)
''',
    {"reason": _p("string", "Why it fails.")},
    ("reason",),
)
LONG = ToolCase(
    "tc_long",
    '''def tc_long(n: int) -> str:
    """Answer a text of exactly n characters.

    Args:
        n: How many characters.
    """
    return ("abcdefghij" * (n // 10 + 1))[:n]
''',
    {"n": _p("integer", "How many characters.")},
    ("n",),
    return_char_limit=LONG_LIMIT,
)
TOOLS = (SHAPE, KINDS, NOISY, FAIL, LONG)
OUTPUT_LIMIT = 4096
"""The sandboxes' ``max_output_bytes`` with ``output_limits``: what is kept of a command's
stdout. A custom tool's result is its driver's last line, so a wide result is cut inside it."""
WIDE = ToolCase(
    "tc_wide",
    '''def tc_wide(n: int, kind: str):
    """Answer a wide value: n sevens as one number, or a list of n sevens.

    Args:
        n: How many sevens.
        kind: number or list.
    """
    if kind == "number":
        return int("7" * n)
    return [7] * n
''',
    {"n": _p("integer", "How many sevens."), "kind": _p("string", "number or list.")},
    ("n", "kind"),
)
WIDE_CASES = ((8, "number"), (4200, "number"), (8, "list"), (1400, "list"))
"""(n, kind) of the ``output_limits`` runs: two under :data:`OUTPUT_LIMIT`, two whose result
(4,200 digits; 4,200 characters of list) passes it, far from any boundary the driver's own
marker could move."""


def _wide_text(n: int, kind: str) -> str:
    return "7" * n if kind == "number" else json.dumps([7] * n)


VERSION_1 = '''def tc_version(text: str) -> str:
    """Answer the text, version 1.

    Args:
        text: The text.
    """
    return "v1 " + text
'''
VERSION = ToolCase(
    "tc_version",
    '''def tc_version(text: str, times: int) -> str:
    """Answer the text repeated, version 2.

    Args:
        text: The text.
        times: How many times.
    """
    return "v2 " + text * times
''',
    {"text": _p("string", "The text."), "times": _p("integer", "How many times.")},
    ("text", "times"),
)
"""``tc_version`` after its source is updated (``PATCH /v1/tools/{id}``) from VERSION_1."""
GIVEN_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"word": {"type": "string", "description": "A given word.", "maxLength": 12}},
    "required": ["word"],
}
GIVEN = ToolCase(
    "tc_given",
    '''def tc_given(word: str) -> str:
    """What the docstring says.

    Args:
        word: What the docstring says of it.
    """
    return word + "!"
''',
    GIVEN_PARAMETERS["properties"],
    ("word",),
    description="Given description.",
)
"""A tool upserted with its ``json_schema`` given: the given schema is the tool's."""
GIVEN_SCHEMA = {
    "name": "tc_given",
    "description": "Given description.",
    "parameters": GIVEN_PARAMETERS,
}
SCRATCH = '''def tc_scratch(text: str) -> str:
    """A tool made to be deleted.

    Args:
        text: Anything.
    """
    return text
'''
BAD_SOURCES = (
    ("a parameter without a type hint", "def tc_bad(x):\n    return x\n"),
    ("an async def", "async def tc_bad(x: str) -> str:\n    return x\n"),
    ("*args", "def tc_bad(*xs: str) -> str:\n    return ''\n"),
    ("a syntax error", "def tc_bad(x: str) -> str\n    return x\n"),
)
"""Sources that cannot be tools: each upsert is refused with 400 naming ``source_code``."""


def long_text(n: int) -> str:
    return ("abcdefghij" * (n // 10 + 1))[:n]


def _shape(args: Mapping[str, Any]) -> str:
    loud = bool(args.get("loud", False))
    parts = [
        str(args["city"]),
        str(args["units"]),
        str(args.get("days", 3)),
        ",".join(args.get("tags") or []),
        str(args.get("mode", "near")),
        str(args.get("scale", 1.5)),
        str(loud),
    ]
    text = "|".join(parts)
    return text.upper() if loud else text


def expected_result(name: str, args: Mapping[str, Any]) -> tuple[str, Any] | None:
    """What a call of tool ``name`` with ``args`` returns: ``("value", v)`` (the function's
    return value), ``("error", text)`` (Letta's words for an exception), or None if the
    client has no model of the tool."""
    if name == SHAPE.name:
        return "value", _shape(args)
    if name == KINDS.name:
        return "value", KIND_VALUES[str(args["kind"])]
    if name == NOISY.name:
        return "value", str(args["text"])[::-1]
    if name == FAIL.name:
        return "error", f"Error executing function tc_fail: ValueError: {args['reason']}"
    if name == LONG.name:
        return "value", long_text(int(args["n"]))
    if name == WIDE.name:
        n, kind = int(args["n"]), str(args["kind"])
        if len(_wide_text(n, kind)) < OUTPUT_LIMIT:
            return "value", [7] * n if kind == "list" else int("7" * n)
        return "error", (
            "Error executing function tc_wide: OutputLimitError: the tool's output passed "
            f"the sandbox's limit of {OUTPUT_LIMIT} bytes"
        )
    if name == VERSION.name:
        if "times" in args:
            return "value", "v2 " + str(args["text"]) * int(args["times"])
        return "value", "v1 " + str(args["text"])
    if name == "memory_rethink":
        return "value", (
            f"The core memory block with label `{args['label']}` has been edited. Review the "
            "changes and make sure they are as expected (correct indentation, no duplicate "
            "lines, etc). Edit the memory block again if necessary."
        )
    if name == "archival_memory_insert":
        return "value", "None"
    if name == GIVEN.name:
        return "value", str(args["word"]) + "!"
    if name == "shelf_shut":
        return "error", MCP_REFUSAL
    if name == "shelf_multi":
        return "value", "\n".join(MCP_BLOCKS)
    if name in MCP_TOOLS:
        return "value", f"{name}: {args.get('text', '')}"
    return None


def result_matches(value: Any, text: str) -> bool:
    """Whether ``text`` is a tool's result for return value ``value`` as documented: a string
    as it is, anything else as JSON (None: ``None``, Python's and Letta's rendering)."""
    if isinstance(value, str):
        return text == value
    if value is None:
        return text in ("None", "null")
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False
