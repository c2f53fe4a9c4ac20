"""Tool rules with Letta's semantics: the rule values, and the solver the loop asks.

A rule names a tool and constrains the agent loop around it (Letta's ``ToolRulesSolver``):

=========================  ====================================================================
``run_first``               the run's first tool call must be one of the ``run_first`` tools;
                            ``args`` are prefilled (they override the model's values)
``exit_loop``               the run ends after the tool (``tool_rule``)
``continue_loop``           the loop always continues after the tool
``constrain_child_tools``   after the tool, only ``children`` may be called (with the args of
                            ``child_arg_nodes`` prefilled); the loop continues
``conditional``             after the tool, its result (``message`` of the packaged result)
                            picks the next tool from ``child_output_mapping`` (else
                            ``default_child``, else any; none at all with
                            ``require_output_mapping``); the loop continues
``parent_last_tool``        ``children`` may only be called right after the tool
``required_before_exit``    the run may not end before the tool was called (the loop
                            continues with a reminder instead)
``max_count_per_step``      the tool may be called at most ``max_count_limit`` times per run
``requires_approval``       a call of the tool stops the run until a client approves or
                            denies it (``requires_approval``)
=========================  ====================================================================

The *history* is the names of the tools called in this run, in order (calls that were refused
for breaking a rule are not in it). Allowed tools are the intersection of what each
``constrain_child_tools``/``conditional``/``max_count_per_step``/``parent_last_tool`` rule
allows (``run_first`` alone decides the first call); when that intersection is empty every tool
is allowed again (Letta's ``error_on_empty=False``). The model is offered only the allowed tools;
a call of another is refused with Letta's ``[ToolConstraintError]`` message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from ._errors import InvalidRequestError

__all__ = [
    "RULE_PROMPT_DESCRIPTION",
    "TOOL_RULE_TYPES",
    "RuleSolver",
    "ToolRule",
    "rule_prompt",
]

TOOL_RULE_TYPES: tuple[str, ...] = (
    "run_first",
    "exit_loop",
    "continue_loop",
    "conditional",
    "constrain_child_tools",
    "parent_last_tool",
    "required_before_exit",
    "max_count_per_step",
    "requires_approval",
)
_CHILD_RULES = ("constrain_child_tools", "conditional", "max_count_per_step")
RULE_PROMPT_DESCRIPTION = (
    "The following constraints define rules for tool usage and guide desired behavior. These "
    "rules must be followed to ensure proper tool execution and workflow. A single response may "
    "contain multiple tool calls."
)


def _names(value: Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        raise InvalidRequestError(f"tool rule children must be a list of names, got {value!r}")
    return tuple(value)


def _mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return None if value is None else dict(value)


def _child_args(value: Iterable[Any] | None) -> tuple[tuple[str, Mapping[str, Any]], ...]:
    """``child_arg_nodes`` as ``(child, args)`` pairs (stored lists come back as lists)."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    for node in value or ():
        if isinstance(node, Mapping):
            name, args = node.get("name"), node.get("args")
        else:
            name, args = node[0], node[1]
        out.append((str(name), dict(args or {})))
    return tuple(out)


@attrs.frozen
class ToolRule:
    """One of Letta's tool rules (the module docstring has what each type does). Only the
    fields of its type are used; the others keep their defaults."""

    tool_name: str
    type: str
    max_count_limit: int | None = None
    children: tuple[str, ...] = attrs.field(default=(), converter=_names)
    args: Mapping[str, Any] | None = attrs.field(default=None, converter=_mapping, hash=False)
    child_arg_nodes: tuple[tuple[str, Mapping[str, Any]], ...] = attrs.field(
        default=(), converter=_child_args, hash=False
    )
    child_output_mapping: Mapping[str, str] | None = attrs.field(
        default=None, converter=_mapping, hash=False
    )
    default_child: str | None = None
    require_output_mapping: bool = False
    prompt_template: str | None = None

    def __attrs_post_init__(self) -> None:
        where = f"tool rule for {self.tool_name!r}"
        if not isinstance(self.tool_name, str) or not self.tool_name:
            raise InvalidRequestError("tool rule: tool_name must be a non-empty string")
        if self.type not in TOOL_RULE_TYPES:
            raise InvalidRequestError(
                f"{where}: type must be one of {', '.join(TOOL_RULE_TYPES)}, got {self.type!r}"
            )
        if self.type == "max_count_per_step" and not (
            isinstance(self.max_count_limit, int)
            and not isinstance(self.max_count_limit, bool)
            and self.max_count_limit >= 1
        ):
            raise InvalidRequestError(f"{where}: max_count_per_step needs max_count_limit >= 1")
        if self.type in ("constrain_child_tools", "parent_last_tool") and not self.children:
            raise InvalidRequestError(f"{where}: {self.type} needs children: at least one tool")
        for name, _ in self.child_arg_nodes:
            if name not in self.children:
                raise InvalidRequestError(
                    f"{where}: child_arg_nodes names {name!r}, which is not in children"
                )
        if self.type == "conditional" and not self.child_output_mapping:
            raise InvalidRequestError(f"{where}: a conditional rule needs child_output_mapping")

    def prompt(self) -> str | None:
        """The line Letta adds to the agent's ``tool_usage_rules`` block, if any."""
        name = self.tool_name
        if self.type == "constrain_child_tools":
            return (
                f"<tool_rule>\nAfter using {name}, you must use one of these tools: "
                f"{', '.join(self.children)}\n</tool_rule>"
            )
        if self.type == "parent_last_tool":
            children = ", ".join(self.children)
            return f"<tool_rule>\n{children} can only be used after {name}\n</tool_rule>"
        if self.type == "conditional":
            return (
                f"<tool_rule>\n{name} will determine which tool to use next based on its output"
                "\n</tool_rule>"
            )
        if self.type == "exit_loop":
            return (
                f"<tool_rule>\n{name} ends your response (yields control) when called\n</tool_rule>"
            )
        if self.type == "continue_loop":
            return (
                f"<tool_rule>\n{name} requires continuing your response when called\n</tool_rule>"
            )
        if self.type == "max_count_per_step":
            return (
                f"<tool_rule>\n{name}: at most {self.max_count_limit} use(s) per response\n"
                "</tool_rule>"
            )
        return None

    def valid(
        self, history: Sequence[str], available: frozenset[str], last: str | None
    ) -> frozenset[str]:
        """The tools this rule allows next (Letta's ``get_valid_tools``)."""
        previous = history[-1] if history else None
        if self.type == "constrain_child_tools":
            return frozenset(self.children) if previous == self.tool_name else available
        if self.type == "parent_last_tool":
            children = frozenset(self.children)
            return children if previous == self.tool_name else available - children
        if self.type == "max_count_per_step":
            assert self.max_count_limit is not None
            count = sum(1 for name in history if name == self.tool_name)
            return available - {self.tool_name} if count >= self.max_count_limit else available
        if self.type == "conditional":
            if previous != self.tool_name:
                return available
            fallback = frozenset({self.default_child}) if self.default_child else available
            output = _output(last)
            if output is None:
                return frozenset() if self.require_output_mapping else fallback
            for key, child in (self.child_output_mapping or {}).items():
                if _matches(output, key):
                    return frozenset({child})
            return frozenset() if self.require_output_mapping else fallback
        return available


def _output(packaged: str | None) -> str | None:
    """The ``message`` of a packaged tool result (``None`` if it is not one)."""
    if packaged is None:
        return None
    try:
        data = json.loads(packaged)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    message = data.get("message", "")
    return message if isinstance(message, str) else json.dumps(message)


def _matches(output: str, key: Any) -> bool:
    """Letta's ``_matches_key``: booleans and numbers compare by value, anything else as text.
    Keys arrive as JSON object keys, so ``"true"``/``"1"`` are compared as text too."""
    if isinstance(key, bool):
        return output.lower() == ("true" if key else "false")
    if isinstance(key, int | float):
        try:
            return float(output) == float(key)
        except ValueError:
            return False
    return output == str(key)


def rule_prompt(rules: Iterable[ToolRule]) -> str | None:
    """The ``tool_usage_rules`` block's value (Letta compiles it from the rules' prompts)."""
    lines = [p for p in (r.prompt() for r in rules) if p]
    return "\n".join(lines) if lines else None


class RuleSolver:
    """The agent's tool rules, asked by the loop. Pure: the caller keeps the history."""

    def __init__(self, rules: Iterable[ToolRule], available: Iterable[str]) -> None:
        self.rules = tuple(rules)
        self.available = frozenset(available)

    def _of(self, *types: str) -> list[ToolRule]:
        return [r for r in self.rules if r.type in types]

    def allowed(self, history: Sequence[str], last: str | None) -> frozenset[str] | None:
        """The tools the next call may use, or ``None`` for every tool."""
        first = self._of("run_first")
        if not history and first:
            chosen = frozenset(r.tool_name for r in first) & self.available
            return chosen or None
        constraining = self._of(*_CHILD_RULES, "parent_last_tool")
        if not constraining:
            return None
        allowed = self.available
        for rule in constraining:
            allowed = allowed & rule.valid(history, self.available, last)
        return allowed if allowed and allowed != self.available else None

    def prefill(self, history: Sequence[str], allowed: frozenset[str] | None) -> dict[str, Any]:
        """Arguments the rules prefill, by tool: ``run_first`` args at the start, a
        ``constrain_child_tools`` rule's child args right after its tool."""
        chosen = self.available if allowed is None else allowed
        out: dict[str, dict[str, Any]] = {}
        if not history:
            for rule in self._of("run_first"):
                if rule.args and rule.tool_name in chosen:
                    out.setdefault(rule.tool_name, {}).update(rule.args)
        previous = history[-1] if history else None
        for rule in self._of("constrain_child_tools"):
            if rule.tool_name == previous:
                for child, args in rule.child_arg_nodes:
                    if args and child in chosen:
                        out.setdefault(child, {}).update(args)
        return out

    def terminal(self, name: str) -> bool:
        return any(r.tool_name == name for r in self._of("exit_loop"))

    def continues(self, name: str) -> bool:
        """The loop must go on after ``name`` (a child rule or a ``continue_loop`` rule)."""
        return any(r.tool_name == name for r in self._of(*_CHILD_RULES, "continue_loop"))

    def child_rule(self, name: str) -> bool:
        return any(r.tool_name == name for r in self._of(*_CHILD_RULES))

    def needs_approval(self, name: str) -> bool:
        return any(r.tool_name == name for r in self._of("requires_approval"))

    def uncalled(self, history: Sequence[str]) -> list[str]:
        """``required_before_exit`` tools (that the agent has) not called yet in this run."""
        called = set(history)
        names = [r.tool_name for r in self._of("required_before_exit")]
        return [n for n in dict.fromkeys(names) if n in self.available and n not in called]

    def max_count(self, name: str) -> int | None:
        limits = [r.max_count_limit for r in self._of("max_count_per_step") if r.tool_name == name]
        return min(x for x in limits if x is not None) if limits else None

    def violation(self, name: str, allowed: Iterable[str], history: Sequence[str]) -> str:
        """Letta's refusal text for a call of a tool the rules do not allow now."""
        previous = history[-1] if history else None
        hints = [
            p
            for r in self.rules
            if r.type not in ("required_before_exit", "requires_approval", "max_count_per_step")
            and (r.tool_name == name or (previous is not None and r.tool_name == previous))
            for p in [r.prompt()]
            if p
        ]
        text = f"[ToolConstraintError] Cannot call {name}, valid tools include: {sorted(allowed)}."
        if hints:
            text += "\n** Hint: Possible rules that were violated:\n" + "\n".join(
                f"\t- {h}" for h in hints
            )
        return text
