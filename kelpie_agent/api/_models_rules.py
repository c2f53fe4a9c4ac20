"""Tool rules in Letta's shapes: the request body of every rule type, and the response.

A request rule is one object with ``tool_name`` and ``type`` (one of
:data:`kelpie_agent.agent.TOOL_RULE_TYPES`) and the fields of its type (Letta's
``InitToolRule``, ``TerminalToolRule``, ``ContinueToolRule``, ``ChildToolRule``,
``ParentToolRule``, ``ConditionalToolRule``, ``RequiredBeforeExitToolRule``,
``MaxCountPerStepToolRule``, ``RequiresApprovalToolRule``). The agent core checks each rule
(:class:`kelpie_agent.agent.ToolRule`). What the schema states per type (``_NEEDS``: a
``max_count_limit``, ``children``, a ``child_output_mapping``) is a 422 naming the rule;
what it cannot (a ``child_arg_nodes`` name that is not among ``children``) is refused when
the route builds the rule, a 400.
A response rule carries only the fields of its type, so the SDK's union tells them apart.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator
from pydantic.config import JsonDict

from kelpie_agent.agent import ToolRule

from ._models_common import JsonObject, RequestModel

__all__ = ["ToolRuleModel", "rule_out"]

RuleType = Literal[
    "run_first",
    "exit_loop",
    "continue_loop",
    "conditional",
    "constrain_child_tools",
    "parent_last_tool",
    "required_before_exit",
    "max_count_per_step",
    "requires_approval",
]
_NAME = Field(min_length=1, max_length=200)
# What a rule of a type needs besides tool_name: (type, field, the field's schema), as the
# agent core's ToolRule checks it.
_NEEDS: tuple[tuple[str, str, JsonDict], ...] = (
    ("max_count_per_step", "max_count_limit", {"type": "integer"}),
    ("constrain_child_tools", "children", {"type": "array", "minItems": 1}),
    ("parent_last_tool", "children", {"type": "array", "minItems": 1}),
    ("conditional", "child_output_mapping", {"type": "object", "minProperties": 1}),
)
_RULE_SCHEMA: JsonDict = {
    "allOf": [
        {
            "if": {"properties": {"type": {"const": kind}}, "required": ["type"]},
            "then": {"properties": {field: schema}, "required": [field]},
        }
        for kind, field, schema in _NEEDS
    ]
}


class ChildArgNode(RequestModel):
    """A child of a ``constrain_child_tools`` rule with arguments prefilled."""

    name: str = _NAME
    args: JsonObject | None = None


class ToolRuleModel(RequestModel):
    """One tool rule (the fields its ``type`` does not use are ignored)."""

    model_config = ConfigDict(json_schema_extra=_RULE_SCHEMA)

    tool_name: str = _NAME
    type: RuleType
    max_count_limit: int | None = Field(default=None, ge=1, le=1_000_000)
    children: list[str] | None = None
    args: JsonObject | None = None
    child_arg_nodes: list[ChildArgNode] | None = None
    child_output_mapping: dict[str, str] | None = None
    default_child: str | None = None
    require_output_mapping: bool = False
    prompt_template: str | None = None

    @model_validator(mode="after")
    def _valid(self) -> ToolRuleModel:
        for kind, field, _ in _NEEDS:
            if self.type == kind and not getattr(self, field):
                raise ValueError(f"tool rule for {self.tool_name!r}: {kind} needs {field}")
        return self

    def to_record(self) -> ToolRule:
        return ToolRule(
            tool_name=self.tool_name,
            type=self.type,
            max_count_limit=self.max_count_limit,
            children=tuple(self.children or ()),
            args=self.args,
            child_arg_nodes=tuple((n.name, n.args or {}) for n in self.child_arg_nodes or ()),
            child_output_mapping=self.child_output_mapping,
            default_child=self.default_child,
            require_output_mapping=self.require_output_mapping,
            prompt_template=self.prompt_template,
        )


def rule_out(rule: ToolRule) -> dict[str, Any]:
    """A rule as Letta returns it: ``tool_name``, ``type``, ``prompt_template`` and the
    fields of its type."""
    out: dict[str, Any] = {
        "tool_name": rule.tool_name,
        "type": rule.type,
        "prompt_template": rule.prompt_template,
    }
    kind = rule.type
    if kind == "run_first":
        out["args"] = dict(rule.args) if rule.args is not None else None
    elif kind == "max_count_per_step":
        out["max_count_limit"] = rule.max_count_limit
    elif kind == "parent_last_tool":
        out["children"] = list(rule.children)
    elif kind == "constrain_child_tools":
        out["children"] = list(rule.children)
        out["child_arg_nodes"] = [
            {"name": name, "args": dict(args)} for name, args in rule.child_arg_nodes
        ] or None
    elif kind == "conditional":
        out["child_output_mapping"] = dict(rule.child_output_mapping or {})
        out["default_child"] = rule.default_child
        out["require_output_mapping"] = rule.require_output_mapping
    return out
