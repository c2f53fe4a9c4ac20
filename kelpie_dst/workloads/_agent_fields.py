"""One message's fields, driven through the API (``message_fields``, via HTTP).

With ``message_fields`` on, once the agents' clients are done (the faults go on) one more
client, on random nodes, hopping after failures, drives a memgpt agent of its own
(``fields-agent-0``, its base tools, marker ``mark-a903``) and one conversation of it, and a
letta_v1 agent with the smallest window (``fields-agent-1``, ``mark-a904``), and logs what it
read for :mod:`._agent_fields_checks`:

1. **Inputs with every field**: sends as JSON and as streams, to the agent's own history and
   to the conversation, with ``use_assistant_message`` either way; each input carries an
   ``otid``, most a ``name``, some non-ASCII text.
2. **Approvals answered over HTTP**: ``archival_memory_insert`` and ``send_message`` require
   approval; each call is answered by the client with a result it ran itself (``success`` or
   ``error``) or a denial with a reason, the first ``send_message`` never approved, later ones
   approved, until the run ends.
3. **An input over the history budget**: about 5,000 characters (non-ASCII among them) sent to
   ``fields-agent-1``, whose 1,000-token window leaves the loop's floor of 4,000 characters
   for history.
4. **Reads**: each thread's history with ``use_assistant_message`` either way, the steps of
   every run it shows, and the agent's history in pages of 1 to 4 by ``after`` cursors (either
   order, either rendering) and backwards by ``before`` cursors.

Everything it sends is retry-safe: the agent and the conversation are looked up before a retry,
sends and approval answers carry an ``otid``, the ``PATCH``es set values.
"""

from __future__ import annotations

from typing import Any

from ._agent_fields_checks import (
    APPROVE,
    CLIENT,
    DENY,
    Answer,
    Decision,
    FieldsLog,
    Input,
    Seen,
    Walk,
    seen,
)
from ._agent_wire import WireWalker

__all__ = ["FieldsWalker"]

AGENT = "fields-agent-0"
MARK = "mark-a903"
"""The fields agent's marker (``_agent_prompt.AGENT_MARK``); no planned agent has number 903."""
SENDS = 6
ROLES = {1: "system", 4: "assistant"}  # with input_roles: these sends lead with such an input
ALIASED = 3  # with default_conversation: this send (to the agent's history) goes through
DEFAULT = "default"  # ... Letta's conversation "default" with the agent's id
ASKS = 2
ROUNDS = 6
TEXTS = ("", " caf\u00e9", " \u6d77\u85fb", " \U0001f9a6 \u2014 ok")
NAMES = (None, "fields-user", "Zo\u00eb")
APPROVED = ("archival_memory_insert", "send_message")
BIG_AGENT = "fields-agent-1"
BIG_MARK = "mark-a904"  # the small agent's marker (no planned agent has number 904)
BIG_WORDS = 1200  # about 5,000 characters: over the 4,000 a floor-sized window keeps
PADDING = ("kelp", "tide", "caf\u00e9", "\u6d77\u85fb", "\U0001f9a6", "reef")


class FieldsWalker(WireWalker):
    """Drives the fields walk (see the module docstring); reuses the wire walker's requests."""

    def __init__(self, clients: Any, rng: Any, roles: bool = False, alias: bool = False) -> None:
        super().__init__(clients, rng)
        self.roles = roles  # param input_roles: some sends lead with a system or assistant input
        self.alias = alias  # param default_conversation: Letta's conversation "default"
        self.fields = FieldsLog()
        self.conv: str | None = None
        self.big_agent: str | None = None

    async def run(self) -> None:
        await self._phases(
            (self._make, self._sends, self._big, self._approvals, self._reads),
            lambda: self.agent is not None and self.conv is not None,
            self.fields.problems,
            "fields",
        )

    async def _make(self) -> None:
        self.agent = await self._memgpt_agent(AGENT, f"The fields walker ({MARK}).")
        summary = "fields-conv-0"

        async def find_conv(node: str) -> Any:
            found = await self._get(
                node,
                "/v1/conversations/",
                {"agent_id": self.agent, "summary_search": summary, "limit": 10},
            )
            mine = [c for c in found if c.get("summary") == summary]
            return mine[0] if mine else None

        made = await self._json(
            f"create conversation {summary}",
            "POST",
            "/v1/conversations/",
            {"summary": summary},
            {"agent_id": self.agent},
            before_retry=find_conv,
        )
        self.conv = str(made["id"])

    def _path(self, thread: str) -> str:
        if thread == "default":
            return f"/v1/agents/{self.agent}/messages"
        return f"/v1/conversations/{thread}/messages"

    async def _send(
        self,
        what: str,
        thread: str,
        messages: list[dict[str, Any]],
        use: bool,
        stream: bool,
        alias: bool = False,
    ) -> tuple[list[Seen], str | None]:
        """One send; its messages as answered, and its stop reason. ``alias``: to the agent's
        own history through Letta's conversation ``default`` (agent-direct mode)."""
        body: dict[str, Any] = {"messages": messages, "use_assistant_message": use}
        path = self._path(thread)
        if alias:
            path, body["agent_id"] = f"/v1/conversations/{DEFAULT}/messages", self.agent
        if stream:
            body["streaming"] = True
            frames, _ = await self._stream(what, path, body)
            got = [seen(f) for f in frames]
            self.fields.answers.append(Answer(what, thread, use, tuple(got)))
            return got, None
        body["streaming"] = False
        answer = await self._json(what, "POST", path, body)
        got = [seen(m) for m in answer["messages"]]
        self.fields.answers.append(Answer(what, thread, use, tuple(got)))
        stop = answer.get("stop_reason")
        return got, (stop.get("stop_reason") if isinstance(stop, dict) else None)

    async def _sends(self) -> None:
        assert self.conv is not None
        for n in range(SENDS):
            thread = self.conv if n % 3 == 2 else "default"
            use = self.rng.random() < 0.5 or thread != "default"  # a conversation's are shown
            stream = self.rng.random() < 0.5
            name = self.rng.choice(NAMES)
            name = f"{name}-{n}" if name else None
            content = f"remember fields note {n} ({MARK}){self.rng.choice(TEXTS)}"
            otid = f"fields-{n}"
            message: dict[str, Any] = {"role": "user", "content": content, "otid": otid}
            if name is not None:
                message["name"] = name
            what = f"fields send {n} to {thread} (stream={stream}, use_assistant_message={use})"
            role = ROLES.get(n) if self.roles else None
            lead: list[dict[str, Any]] = []
            if role is not None:  # Letta's other input roles, ahead of the user's input
                said = f"a {role} note {n} ({MARK})"
                lead = [{"role": role, "content": said, "otid": f"{otid}-{role}"}]
            alias = self.alias and n == ALIASED  # a send to the agent's own history
            if alias:
                what += f" through conversation {DEFAULT}"
            await self._send(what, thread, [*lead, message], use, stream, alias)
            if role is not None:
                self.fields.inputs.append(Input(thread, f"{otid}-{role}", said, None, role))
            self.fields.inputs.append(Input(thread, otid, content, name))

    async def _big(self) -> None:
        """An input over the history budget of a small agent (its window at the floor)."""

        async def find_agent(node: str) -> Any:
            found = await self._get(node, "/v1/agents/", {"name": BIG_AGENT})
            return found[0] if found else None

        agent = await self._json(
            f"create {BIG_AGENT}",
            "POST",
            "/v1/agents/",
            {
                "name": BIG_AGENT,
                "agent_type": "letta_v1_agent",
                "memory_blocks": [
                    {"label": "human", "value": f"Small ({BIG_MARK}).", "limit": 100}
                ],
                "tool_ids": [],
                "include_base_tools": False,
                "context_window_limit": 1000,
                "max_tokens": 200,
            },
            before_retry=find_agent,
        )
        big = self.big_agent = str(agent["id"])
        tag = "big-0"
        pad = " ".join(self.rng.choice(PADDING) for _ in range(BIG_WORDS))
        content = f"remember {tag} ({BIG_MARK}): {pad}"
        message = {"role": "user", "content": content, "otid": f"fields-{tag}"}
        what = f"fields send {tag} of {len(content)} characters"
        got = await self._json(what, "POST", f"/v1/agents/{big}/messages", {"messages": [message]})
        replies = [
            str(m.get("content"))
            for m in got["messages"]
            if m.get("message_type") == "assistant_message"
        ]
        self.fields.big.append((what, tag, " ".join(replies)))

    async def _pending(self, got: list[Seen]) -> list[Seen]:
        """The approval requests the run stopped on: in its answer, else the newest
        unanswered ones of the history (an answer from an earlier attempt)."""
        asks = [m for m in got if m.type == "approval_request_message" and m.call_id]
        if asks:
            return asks
        page = await self._json(
            "fields pending approvals",
            "GET",
            self._path("default"),
            None,
            {"order": "desc", "limit": 20, "use_assistant_message": False},
        )
        recent = [seen(m) for m in page]
        answered = {m.call_id for m in recent if m.type == "tool_return_message"}
        return [
            m
            for m in recent
            if m.type == "approval_request_message" and m.call_id and m.call_id not in answered
        ]

    async def _approvals(self) -> None:
        agent = self.agent
        for tool in APPROVED:
            await self._json(
                f"fields approval of {tool}",
                "PATCH",
                f"/v1/agents/{agent}/tools/approval/{tool}",
                {"requires_approval": True},
            )
        for k in range(ASKS):
            content = f"remember fields secret {k} ({MARK})"
            otid = f"fields-ask-{k}"
            what = f"fields ask {k}"
            message = {"role": "user", "content": content, "otid": otid}
            got, stop = await self._send(what, "default", [message], False, False)
            self.fields.inputs.append(Input("default", otid, content, None))
            replied = False
            for r in range(ROUNDS):
                if stop != "requires_approval":
                    break
                asks = await self._pending(got)
                if not asks:
                    break
                approvals: list[dict[str, Any]] = []
                decisions: list[Decision] = []
                for i, ask in enumerate(asks):
                    assert ask.call_id is not None
                    tool = ask.tool or ""
                    if tool == "send_message" and replied:
                        kind = APPROVE
                    elif tool == "send_message":
                        kind = self.rng.choice((CLIENT, DENY))
                    else:
                        kind = self.rng.choice((CLIENT, CLIENT, DENY))
                    if kind == APPROVE:
                        approvals.append(
                            {"type": "approval", "tool_call_id": ask.call_id, "approve": True}
                        )
                        decisions.append(Decision("default", ask.call_id, tool, kind))
                    elif kind == DENY:
                        reason = f"not now {k}.{r}.{i}"
                        approvals.append(
                            {
                                "type": "approval",
                                "tool_call_id": ask.call_id,
                                "approve": False,
                                "reason": reason,
                            }
                        )
                        decisions.append(Decision("default", ask.call_id, tool, kind, reason))
                    else:
                        said = f"client ran {k}.{r}.{i}"
                        status = (
                            "error"
                            if tool == "send_message"
                            else self.rng.choice(("success", "error"))
                        )
                        approvals.append(
                            {
                                "type": "tool",
                                "tool_call_id": ask.call_id,
                                "tool_return": said,
                                "status": status,
                            }
                        )
                        decisions.append(Decision("default", ask.call_id, tool, kind, said, status))
                    replied = replied or tool == "send_message"
                answer_otid = f"{otid}-{r}"
                answer = {"type": "approval", "approvals": approvals, "otid": answer_otid}
                got, stop = await self._send(
                    f"{what} answer {r}", "default", [answer], False, False
                )
                self.fields.decisions += decisions
                self.fields.approvals.append(("default", answer_otid))

    async def _reads(self) -> None:
        assert self.conv is not None
        runs: set[str] = set()
        for thread in ("default", self.conv):
            path = self._path(thread)
            both: list[tuple[Seen, ...] | None] = [None]
            for use in (False, True) if thread == "default" else (True,):
                params: dict[str, Any] = {"order": "asc", "limit": 1000}
                if thread == "default":  # a conversation's route has no such parameter
                    params["use_assistant_message"] = use
                got = await self._json(
                    f"fields {thread} history (use_assistant_message={use})",
                    "GET",
                    path,
                    None,
                    params,
                )
                both.append(tuple(seen(m) for m in got))
            raw, shown = both[-2], both[-1]
            assert shown is not None
            self.fields.histories[thread] = (raw, shown)
            runs |= {m.run_id for m in shown if m.run_id}
        if self.alias:  # the agent's own history, read through conversation "default"
            got = await self._json(
                f"fields history through conversation {DEFAULT}",
                "GET",
                f"/v1/conversations/{DEFAULT}/messages",
                None,
                {"order": "asc", "limit": 1000, "agent_id": self.agent},
            )
            self.fields.aliased = tuple(seen(m) for m in got)
        for run in sorted(runs):
            got = await self._json(
                f"fields steps of {run}", "GET", f"/v1/runs/{run}/steps", None, {"limit": 1000}
            )
            self.fields.steps[run] = frozenset(str(s["id"]) for s in got)
        for _ in range(3):
            await self._walk(backwards=False)
        await self._walk(backwards=True)

    async def _walk(self, backwards: bool) -> None:
        use = self.rng.random() < 0.5
        order = self.rng.choice(("asc", "desc"))
        limit = self.rng.randint(1, 4)
        raw, shown = self.fields.histories["default"]
        full = [m.id for m in (shown if use or raw is None else raw)]
        if order == "desc":
            full.reverse()
        what = (
            f"fields history in pages of {limit} ({order}, use_assistant_message={use}, "
            f"{'before' if backwards else 'after'} cursors)"
        )
        pages: list[tuple[str, ...]] = []
        cursor = full[-1] if backwards and full else None
        for n in range(len(full) + 2):
            params: dict[str, Any] = {"order": order, "limit": limit, "use_assistant_message": use}
            if cursor is not None:
                params["before" if backwards else "after"] = cursor
            if backwards and cursor is None:
                break
            got = await self._json(f"{what} page {n}", "GET", self._path("default"), None, params)
            page = tuple(str(m["id"]) for m in got)
            pages.append(page)
            if not page:
                break
            cursor = page[0] if backwards else page[-1]
        self.fields.walks.append(Walk(what, limit, tuple(full), tuple(pages), backwards))
