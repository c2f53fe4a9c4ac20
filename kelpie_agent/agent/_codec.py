"""msgpack encoding of the agent's records, and the storage key layout.

Every record is an attrs value encoded as a msgpack map ``{"_t": tag, field: value, ...}``;
nested values are encoded the same way. Decoding ignores fields it does not know and lets
missing ones take their defaults, so records written by an older version still load.

Key layout (all keys UTF-8; ids never contain ``/``; ``seq`` is 16 hex digits so keys sort in
history order and ``scan_prefix`` pages through them):

==================================  ===============================================
``agent/<agent_id>``                 :class:`AgentRecord` (scan ``agent/`` lists agents)
``block/<block_id>``                 :class:`Block` (shared by the agents that attach it)
``tool/<tool_id>``                   :class:`ToolSpec` (custom and MCP tools)
``msg/<agent_id>/<seq>``             one Letta message (:data:`AgentMessage`)
``msgid/<agent_id>/<message_id>``    the message's ``seq`` (for ``after=``/``before=`` paging)
``passage/<agent_id>/<seq>``         :class:`PassageRecord` (archival memory, with its vector)
``passageid/<agent_id>/<id>``        the passage's ``seq``
``session/<agent_id>``               :class:`SessionCheckpoint` of the current or last run
``otid/<agent_id>/<blake2b(otid)>``  :class:`OtidRecord`: the run an input's otid started
``run/<run_id>``                     :class:`RunRecord`: a run, updated with its checkpoint
``runs/<agent_id>/<µs>/<run_id>``    the agent's runs in creation order (empty values)
``step/<step_id>``                   :class:`StepRecord`: one answered LLM call of a run
``steps/<agent_id>/<µs>/<n>/<id>``   the agent's steps in order (``n``: number in its run)
``context/<agent_id>``               :class:`ContextWindow`: what of the history is in context
``conv/<conversation_id>``           :class:`ConversationRecord` (scan ``conv/`` lists them all)
``convs/<agent_id>/<µs>/<conv_id>``  the agent's conversations in creation order (empty values)
``open/<agent_id>/<conv_id>``        ``1`` while a run of the conversation runs, else ``0``
==================================  ===============================================

A *thread* is one history: the agent's own (its id is the agent's) or a conversation's (its id
is the conversation's). ``msg/``, ``msgid/``, ``session/``, ``otid/`` and ``context/`` are per
thread (``Keys(thread_id)``), everything else per agent or global.
"""

from __future__ import annotations

import hashlib
from typing import Any

import attrs
import msgpack

from kelpie_agent.storage._keys import prefix_end

from ._checkpoint import PendingCall, SessionCheckpoint
from ._messages import (
    ApprovalDecision,
    ApprovalRequestMessage,
    ApprovalResponseMessage,
    AssistantMessage,
    LettaUsage,
    ReasoningMessage,
    SystemMessage,
    ToolCallInfo,
    ToolCallMessage,
    ToolReturnMessage,
    UserMessage,
)
from ._models import AgentRecord, Block, PassageRecord, ToolRule, ToolSpec, check_id
from ._requests import InputMessage
from ._runs import OtidRecord, RunRecord
from ._steps import StepRecord
from ._window import ContextWindow

__all__ = ["Keys", "pack", "unpack"]

_CLASSES: dict[str, type] = {
    "agent": AgentRecord,
    "block": Block,
    "tool": ToolSpec,
    "rule": ToolRule,
    "passage": PassageRecord,
    "session": SessionCheckpoint,
    "pending": PendingCall,
    "usage": LettaUsage,
    "system_message": SystemMessage,
    "user_message": UserMessage,
    "assistant_message": AssistantMessage,
    "reasoning_message": ReasoningMessage,
    "tool_call_message": ToolCallMessage,
    "tool_return_message": ToolReturnMessage,
    "tool_call": ToolCallInfo,
    "approval_request_message": ApprovalRequestMessage,
    "approval_response_message": ApprovalResponseMessage,
    "approval": ApprovalDecision,
    "input": InputMessage,
    "run": RunRecord,
    "otid": OtidRecord,
    "step": StepRecord,
    "context": ContextWindow,
}


def register(tag: str, cls: type) -> None:
    """Make another record type storable (modules that import the codec add theirs)."""
    _CLASSES[tag] = cls
    _TAGS[cls] = tag
    _FIELDS[tag] = frozenset(f.name for f in attrs.fields(cls))


_TAGS = {cls: tag for tag, cls in _CLASSES.items()}
_FIELDS = {tag: frozenset(f.name for f in attrs.fields(cls)) for tag, cls in _CLASSES.items()}


def _default(obj: Any) -> Any:
    tag = _TAGS.get(type(obj))
    if tag is None:
        raise TypeError(f"cannot encode {type(obj).__name__} in an agent record")
    out: dict[str, Any] = {"_t": tag}
    for field in attrs.fields(type(obj)):
        value = getattr(obj, field.name)
        out[field.name] = dict(value) if field.name == "metadata" or _is_map(value) else value
    return out


def _is_map(value: Any) -> bool:
    return hasattr(value, "keys") and hasattr(value, "items") and not isinstance(value, dict)


def _hook(data: dict[Any, Any]) -> Any:
    tag = data.get("_t")
    if tag is None:
        return data
    cls = _CLASSES.get(tag)
    if cls is None:
        raise ValueError(f"unknown record type {tag!r}")
    known = _FIELDS[tag]
    # ``data`` is msgpack's own new dict: drop the tag in place, and copy only when the record
    # carries a field this version no longer has (DspeedO-1; the usual case builds no dict).
    del data["_t"]
    if data.keys() <= known:
        return cls(**data)
    return cls(**{k: v for k, v in data.items() if k in known})


def pack(record: Any) -> bytes:
    """The msgpack encoding of a record (or a plain value such as an int)."""
    out: bytes = msgpack.packb(record, default=_default, use_bin_type=True)
    return out


def unpack(data: bytes) -> Any:
    """The record ``pack`` encoded."""
    return msgpack.unpackb(data, object_hook=_hook, raw=False, use_list=True, strict_map_key=False)


def _seq(seq: int) -> str:
    return f"{seq:016x}"


class Keys:
    """Storage keys of one agent (see the module docstring for the layout)."""

    def __init__(self, agent_id: str) -> None:
        self.agent_id = check_id(agent_id, "agent id")
        a = agent_id
        self.agent = f"agent/{a}".encode()
        self.session = f"session/{a}".encode()
        self.messages = f"msg/{a}/".encode()
        self.message_ids = f"msgid/{a}/".encode()
        self.passages = f"passage/{a}/".encode()
        self.passage_ids = f"passageid/{a}/".encode()
        self.otids = f"otid/{a}/".encode()
        self.runs = f"runs/{a}/".encode()
        self.steps = f"steps/{a}/".encode()
        self.context = f"context/{a}".encode()
        self.conversations = f"convs/{a}/".encode()
        self.open_runs = f"open/{a}/".encode()

    def conversation_index(self, created_at: float, conversation_id: str) -> bytes:
        micros = max(0, round(created_at * 1_000_000))
        conv = check_id(conversation_id, "conversation id")
        return self.conversations + f"{micros:016x}/{conv}".encode()

    def open_run(self, conversation_id: str) -> bytes:
        return self.open_runs + check_id(conversation_id, "conversation id").encode()

    @staticmethod
    def conversation(conversation_id: str) -> bytes:
        return f"conv/{check_id(conversation_id, 'conversation id')}".encode()

    def otid(self, otid: str) -> bytes:
        digest = hashlib.blake2b(otid.encode(), digest_size=16).hexdigest()
        return self.otids + digest.encode()

    def run_index(self, created_at: float, run_id: str) -> bytes:
        micros = max(0, round(created_at * 1_000_000))
        return self.runs + f"{micros:016x}/{check_id(run_id, 'run id')}".encode()

    def step_index(self, created_at: float, number: int, step_id: str) -> bytes:
        micros = max(0, round(created_at * 1_000_000))
        return self.steps + f"{micros:016x}/{number:04x}/{check_id(step_id, 'step id')}".encode()

    @staticmethod
    def run(run_id: str) -> bytes:
        return f"run/{check_id(run_id, 'run id')}".encode()

    @staticmethod
    def step(step_id: str) -> bytes:
        return f"step/{check_id(step_id, 'step id')}".encode()

    def message(self, seq: int) -> bytes:
        return self.messages + _seq(seq).encode()

    def message_id(self, message_id: str) -> bytes:
        return self.message_ids + check_id(message_id, "message id").encode()

    def passage(self, seq: int) -> bytes:
        return self.passages + _seq(seq).encode()

    def passage_id(self, passage_id: str) -> bytes:
        return self.passage_ids + check_id(passage_id, "passage id").encode()

    @staticmethod
    def block(block_id: str) -> bytes:
        return f"block/{check_id(block_id, 'block id')}".encode()

    @staticmethod
    def tool(tool_id: str) -> bytes:
        return f"tool/{check_id(tool_id, 'tool id')}".encode()

    prefix_end = staticmethod(prefix_end)
    AGENTS = b"agent/"
    RUNS = b"run/"
    STEPS = b"step/"
    CONVERSATIONS = b"conv/"
    BLOCKS = b"block/"
    TOOLS = b"tool/"
