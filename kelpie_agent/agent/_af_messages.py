"""Letta's internal message and tool rule shapes (what agent files carry), both ways.

Kelpie stores one record per Letta message (``_messages``); Letta's internal messages, which
agent files hold, group a step's text and tool calls into one assistant message (``approval``
when its calls await approval) and carry results as ``tool`` messages with ``tool_returns``.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ._errors import InvalidRequestError
from ._messages import (
    AgentMessage,
    ApprovalDecision,
    ApprovalRequestMessage,
    ApprovalResponseMessage,
    AssistantMessage,
    ReasoningMessage,
    SystemMessage,
    ToolCallInfo,
    ToolCallMessage,
    ToolReturnMessage,
    UserMessage,
)
from ._models import ToolRule
from ._tool_rules import ToolRule as _Rule

__all__ = [
    "ImportedMessage",
    "from_letta_messages",
    "iso",
    "materialize",
    "rule_from_json",
    "rule_json",
    "to_letta_messages",
]


def iso(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(epoch, tz=_dt.UTC).isoformat()


def _epoch(text: object, where: str) -> float:
    if text is None:
        return 0.0
    if not isinstance(text, str):
        raise InvalidRequestError(f"{where}: expected an ISO 8601 date, got {text!r}")
    try:
        moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidRequestError(f"{where}: not an ISO 8601 date: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    return moment.timestamp()


# -- tool rules ------------------------------------------------------------------------------------
def rule_json(rule: ToolRule) -> dict[str, Any]:
    """A tool rule as Letta's JSON (only its type's fields)."""
    out: dict[str, Any] = {"tool_name": rule.tool_name, "type": rule.type}
    out["prompt_template"] = rule.prompt_template
    if rule.type == "max_count_per_step":
        out["max_count_limit"] = rule.max_count_limit
    if rule.type in ("constrain_child_tools", "parent_last_tool"):
        out["children"] = list(rule.children)
    if rule.type == "constrain_child_tools" and rule.child_arg_nodes:
        out["child_arg_nodes"] = [{"name": n, "args": dict(a)} for n, a in rule.child_arg_nodes]
    if rule.type == "run_first" and rule.args:
        out["args"] = dict(rule.args)
    if rule.type == "conditional":
        out["child_output_mapping"] = dict(rule.child_output_mapping or {})
        out["default_child"] = rule.default_child
        out["require_output_mapping"] = rule.require_output_mapping
    return out


def rule_from_json(data: object, where: str) -> ToolRule:
    if not isinstance(data, Mapping):
        raise InvalidRequestError(f"{where}: a tool rule must be an object")
    try:
        return _Rule(
            tool_name=data.get("tool_name"),  # type: ignore[arg-type]
            type=data.get("type") or "",
            max_count_limit=data.get("max_count_limit"),
            children=data.get("children") or (),
            args=data.get("args"),
            child_arg_nodes=data.get("child_arg_nodes") or (),
            child_output_mapping=data.get("child_output_mapping"),
            default_child=data.get("default_child"),
            require_output_mapping=bool(data.get("require_output_mapping")),
            prompt_template=data.get("prompt_template"),
        )
    except InvalidRequestError as error:
        raise InvalidRequestError(f"{where}: {error}") from None


# -- messages --------------------------------------------------------------------------------------
def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def _call_json(call: ToolCallInfo) -> dict[str, Any]:
    return {
        "id": call.tool_call_id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _base(message: AgentMessage, role: str, ref: str, agent_ref: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": role,
        "content": [],
        "name": message.name,
        "otid": message.otid,
        "id": ref,
        "agent_id": agent_ref,
        "tool_calls": None,
        "tool_call_id": None,
        "tool_returns": [],
        "created_at": iso(message.date),
        "approve": None,
        "approval_request_id": None,
        "denial_reason": None,
        "approvals": [],
    }


def to_letta_messages(messages: Sequence[AgentMessage], agent_ref: str) -> list[dict[str, Any]]:
    """Kelpie's stored messages as Letta's internal messages: a step's text and tool calls
    become one assistant (or approval) message, each tool result a tool message."""
    out: list[dict[str, Any]] = []
    step: dict[str, Any] | None = None
    step_key: str | None = None
    for m in messages:
        ref = f"message-{len(out)}"
        if isinstance(m, ReasoningMessage | AssistantMessage | ToolCallMessage):
            key: str | None = m.step_id or m.id
            if isinstance(m, ToolCallMessage) and m.step_id is None and step is not None:
                key = step_key  # a call outside a step (the boot call) joins its thought
            if step is None or step_key != key:
                step = _base(m, "assistant", ref, agent_ref)
                step_key = key
                out.append(step)
            if isinstance(m, ReasoningMessage):
                step["content"].append(
                    {"type": "reasoning", "reasoning": m.reasoning, "is_native": False}
                )
            elif isinstance(m, AssistantMessage):
                step["content"].append({"type": "text", "text": m.content})
            else:
                step["tool_calls"] = [*(step["tool_calls"] or []), _call_json(m.tool_call)]
                if isinstance(m, ApprovalRequestMessage):
                    step["role"] = "approval"
            continue
        step, step_key = None, None
        if isinstance(m, SystemMessage):
            item = _base(m, "system", ref, agent_ref)
            item["content"] = _text(m.content)
        elif isinstance(m, UserMessage):
            item = _base(m, "user", ref, agent_ref)
            item["content"] = _text(m.content)
        elif isinstance(m, ToolReturnMessage):
            item = _base(m, "tool", ref, agent_ref)
            item["name"] = m.name
            item["content"] = _text(m.tool_return)
            item["tool_call_id"] = m.tool_call_id
            item["tool_returns"] = [
                {
                    "tool_call_id": m.tool_call_id,
                    "status": m.status,
                    "stdout": list(m.stdout) if m.stdout is not None else None,
                    "stderr": list(m.stderr) if m.stderr is not None else None,
                    "func_response": m.tool_return,
                }
            ]
        else:
            item = _base(m, "approval", ref, agent_ref)
            item["approval_request_id"] = m.approval_request_id
            item["approvals"] = [
                {
                    "type": "tool",
                    "tool_call_id": a.tool_call_id,
                    "status": a.status or "success",
                    "func_response": a.tool_return,
                }
                if a.tool_return is not None
                else {
                    "type": "approval",
                    "tool_call_id": a.tool_call_id,
                    "approve": a.approve,
                    "reason": a.reason,
                }
                for a in m.approvals
            ]
        out.append(item)
    return out


def _content_text(content: object, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidRequestError(f"{where}.content: expected text or a list of parts")
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))


@attrs.frozen
class ImportedMessage:
    """A message read from an agent file, before it gets its id and position."""

    kind: type
    fields: Mapping[str, Any] = attrs.field(hash=False)


def from_letta_messages(items: object, agent_type: str, where: str) -> list[ImportedMessage]:
    """Letta's internal messages as Kelpie messages (without ids or positions): an assistant
    message's parts and calls become one step's reasoning/assistant/tool call messages."""
    if not isinstance(items, list):
        raise InvalidRequestError(f"{where}: expected a list of messages")
    out: list[ImportedMessage] = []
    for i, raw in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(raw, Mapping):
            raise InvalidRequestError(f"{at}: a message must be an object")
        role = raw.get("role")
        common = {
            "date": _epoch(raw.get("created_at"), f"{at}.created_at"),
            "name": raw.get("name"),
            "otid": raw.get("otid"),
        }
        content = raw.get("content") or []
        if role == "system":
            out.append(
                ImportedMessage(SystemMessage, {**common, "content": _content_text(content, at)})
            )
        elif role == "user":
            text = _content_text(content, at)
            out.append(
                ImportedMessage(UserMessage, {**common, "content": text, "kind": _user_kind(text)})
            )
        elif role in ("assistant", "approval") and not raw.get("approvals"):
            step = {"step": f"step-{i}"}
            for part in (
                content if isinstance(content, list) else [{"type": "text", "text": content}]
            ):
                if not isinstance(part, Mapping):
                    continue
                if part.get("type") == "reasoning":
                    out.append(
                        ImportedMessage(
                            ReasoningMessage,
                            {**common, **step, "reasoning": str(part.get("reasoning", ""))},
                        )
                    )
                elif part.get("type") == "text" and str(part.get("text", "")).strip():
                    text = str(part["text"])
                    kind = ReasoningMessage if agent_type == "memgpt_agent" else AssistantMessage
                    field = "reasoning" if kind is ReasoningMessage else "content"
                    out.append(ImportedMessage(kind, {**common, **step, field: text}))
            for j, call in enumerate(raw.get("tool_calls") or []):
                function = call.get("function") if isinstance(call, Mapping) else None
                if not isinstance(function, Mapping) or not call.get("id"):
                    raise InvalidRequestError(f"{at}.tool_calls[{j}]: needs id and function")
                info = ToolCallInfo(
                    str(function.get("name")),
                    str(function.get("arguments") or "{}"),
                    str(call["id"]),
                )
                call_kind = ApprovalRequestMessage if role == "approval" else ToolCallMessage
                out.append(ImportedMessage(call_kind, {**common, **step, "tool_call": info}))
        elif role == "approval":
            decisions = []
            for j, a in enumerate(raw.get("approvals") or []):
                if not isinstance(a, Mapping) or not a.get("tool_call_id"):
                    raise InvalidRequestError(f"{at}.approvals[{j}]: needs tool_call_id")
                if a.get("type") == "tool" or "func_response" in a:
                    decisions.append(
                        ApprovalDecision(
                            str(a["tool_call_id"]),
                            True,
                            None,
                            str(a.get("func_response") or ""),
                            a.get("status") or "success",
                        )
                    )
                else:
                    decisions.append(
                        ApprovalDecision(
                            str(a["tool_call_id"]), bool(a.get("approve")), a.get("reason")
                        )
                    )
            out.append(
                ImportedMessage(
                    ApprovalResponseMessage,
                    {
                        **common,
                        "approvals": tuple(decisions),
                        "approval_request_id": raw.get("approval_request_id"),
                    },
                )
            )
        elif role == "tool":
            returns = raw.get("tool_returns") or []
            if not returns and raw.get("tool_call_id"):
                returns = [
                    {
                        "tool_call_id": raw["tool_call_id"],
                        "status": "success",
                        "func_response": _content_text(content, at),
                    }
                ]
            for j, r in enumerate(returns):
                if not isinstance(r, Mapping) or not r.get("tool_call_id"):
                    raise InvalidRequestError(f"{at}.tool_returns[{j}]: needs tool_call_id")
                status = r.get("status") if r.get("status") in ("success", "error") else "success"
                out.append(
                    ImportedMessage(
                        ToolReturnMessage,
                        {
                            **common,
                            "tool_return": str(r.get("func_response") or ""),
                            "status": status,
                            "tool_call_id": str(r["tool_call_id"]),
                            "stdout": r.get("stdout"),
                            "stderr": r.get("stderr"),
                        },
                    )
                )
        else:
            raise InvalidRequestError(
                f"{at}.role: must be system, user, assistant, tool or approval, got {role!r}"
            )
    return out


def _user_kind(text: str) -> str:
    try:
        data = json.loads(text)
    except ValueError:
        return "input"
    if isinstance(data, dict) and data.get("type") == "heartbeat":
        return "heartbeat"
    if isinstance(data, dict) and data.get("type") == "system_alert":
        return "alert"
    if isinstance(data, dict) and data.get("type") == "login":
        return "login"
    return "input"


def materialize(
    planned: Sequence[ImportedMessage], new_id: Any, first_seq: int, tool_names: Mapping[str, str]
) -> list[AgentMessage]:
    """Give imported messages ids, positions and step ids: one per assistant message, shared
    by the results of its calls (the prompt puts a step's results in one turn)."""
    steps: dict[str, str] = {}
    names = dict(tool_names)
    call_steps: dict[str, str] = {}
    out: list[AgentMessage] = []
    for n, item in enumerate(planned):
        fields = dict(item.fields)
        step = fields.pop("step", None)
        if step is not None:
            fields["step_id"] = steps.setdefault(step, new_id("step"))
        if item.kind is ToolReturnMessage:
            fields.setdefault("name", names.get(fields["tool_call_id"]))
            fields.setdefault("step_id", call_steps.get(fields["tool_call_id"]))
        message = item.kind(id=new_id("message"), seq=first_seq + n, **fields)
        if isinstance(message, ToolCallMessage):
            call = message.tool_call
            names[call.tool_call_id] = call.name or ""
            if message.step_id is not None:
                call_steps[call.tool_call_id] = message.step_id
        out.append(message)
    return out
