"""Conversations in the agent workload: several clients talk to one agent in several threads
at once (Letta's conversations), across crashes and handoffs; one conversation is forked.

With ``conversations = C`` (workload param, HTTP only), each agent gets C conversations, each
driven by its own client task: it creates the conversation (a retry looks it up by its unique
summary first), sends ``conversation_messages`` inputs ``tag-a<N>-c<K>-m<J> ...`` with otids
(some streamed), retried on another node until acknowledged. After its messages, conversation
0 is forked and the fork (thread ``c0f``) gets one more input. With ``conversation_recompiles``
each conversation's client then recompiles its system prompt (a dry run, then for real).

The oracles (:func:`check_threads`, pure):

* every acknowledged input of a thread is in that thread's stored history exactly once, in the
  order acknowledged, and in no other thread (the agent's own history included); the fork's
  history is its source's inputs, then its own;
* each conversation an agent acknowledged is listed once when paging its conversations in
  small pages with Letta's ``after`` cursor, and the reverse order lists them reversed;
* one request makes at most one conversation: per summary, an agent lists no more
  conversations than its client sent create requests with that summary (every attempt), and
  no more summary-less ones (forks) than fork requests; a conversation whose summary no
  request of this agent's client carried was not made for it;
* the run of each acknowledged input is listed among its conversation's runs, and every run
  listed there is that conversation's;
* (``conversation_recompiles``) a dry-run recompile of a conversation leaves its stored system
  message as it was, and a real one stores in that conversation the prompt it returned;
* (:class:`ThreadAuditor`, fed every LLM request) no prompt shows the inputs of two threads
  (a fork's shows its source's and its own), and the model was shown every acknowledged
  input of a conversation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import trio

from kelpie_agent.llm import LlmRequest, TextBlock

from ._agent_lifecycle_checks import _from

__all__ = ["ThreadAck", "ThreadAuditor", "Threads", "check_listing", "check_threads"]

_TAG = re.compile(r"^tag-a(\d+)-(?:(c\d+f?)-)?m(\d+) ")
_MAX = 50
_WORDS = ("kelp", "tide", "otter", "reef", "current", "shell", "urchin", "sea")


def thread_of(text: str) -> tuple[int, str, str] | None:
    """``(agent, thread, tag)`` of a workload input (thread ``""``: the agent's own)."""
    m = _TAG.match(text)
    if m is None:
        return None
    return int(m[1]), m[2] or "", m[0].strip()


async def _system_of(sdk: Any, conv: str) -> str:
    """The stored system message of conversation ``conv`` ("" if its history has none)."""
    got = await sdk.conversations.messages.list(conv, limit=1, order="asc")
    first = next(iter(got.items), None)
    if first is None or first.message_type != "system_message":
        return ""
    return str(first.content)


def _allowed(labels: set[str]) -> bool:
    """A prompt shows one thread, or a fork (``cKf``) with its source (``cK``)."""
    if len(labels) <= 1:
        return True
    forks = [x for x in labels if x.endswith("f")]
    return len(labels) == 2 and len(forks) == 1 and forks[0][:-1] in labels


class ThreadAuditor:
    """Per LLM request: the threads whose inputs it shows (at most one, or a fork and its
    source) and which conversation inputs the model has been shown."""

    def __init__(self) -> None:
        self.shown: set[str] = set()
        self.problems: list[str] = []

    def step(self, request: LlmRequest, agent: int, where: str) -> None:
        labels: set[str] = set()
        for message in request.messages:
            if message.role != "user":
                continue
            for block in message.content:
                if isinstance(block, TextBlock):
                    found = thread_of(block.text)
                    if found is not None and found[0] == agent:
                        labels.add(found[1])
                        if found[1]:
                            self.shown.add(found[2])
        if not _allowed(labels) and len(self.problems) < _MAX:
            threads = ", ".join(sorted(x or "own" for x in labels))
            self.problems.append(f"{where}: a{agent}'s prompt shows the threads {threads}")


@attrs.frozen
class ThreadAck:
    agent: str  # the workload's agent id
    thread: str  # cK or cKf
    index: int
    tag: str
    run_id: str


def check_threads(
    acks: Sequence[ThreadAck],
    histories: Mapping[tuple[str, str], Sequence[str]],
    forks: Mapping[tuple[str, str], str],
    shown: set[str] | None = None,
) -> list[str]:
    """``histories[(agent, thread)]``: the tags of the inputs stored in that thread, in
    order (thread ``""``: the agent's own). ``forks[(agent, fork)]``: the fork's source."""
    problems: list[str] = []
    mine: dict[tuple[str, str], list[str]] = {}
    for ack in acks:
        mine.setdefault((ack.agent, ack.thread), []).append(ack.tag)
    for (agent, thread), tags in sorted(mine.items()):
        stored = list(histories.get((agent, thread), ()))
        source = forks.get((agent, thread))
        expected = (mine.get((agent, source), []) if source is not None else []) + tags
        got = [t for t in stored if t in set(expected)]
        if got != expected:
            problems.append(f"{agent} {thread}: acknowledged inputs {expected}, stored {got}")
        repeated = sorted({t for t in stored if stored.count(t) > 1})
        if repeated:
            problems.append(f"{agent} {thread}: inputs stored twice: {repeated}")
    for (agent, thread), inputs in sorted(histories.items()):
        for t in inputs:
            found = thread_of(t + " ")
            home = found[1] if found is not None else ""
            if home != thread and forks.get((agent, thread)) != home:
                problems.append(
                    f"{agent}: input {t} of thread {home or 'own'} is in {thread or 'own'}"
                )
    if shown is not None:
        problems += [
            f"{a.tag}: acknowledged, never shown to the model" for a in acks if a.tag not in shown
        ]
    return problems[:_MAX]


def check_listing(
    created: Sequence[str],
    paged: Sequence[str],
    reverse: Sequence[str],
    sent: Mapping[str | None, int] | None = None,
    summaries: Mapping[str, str | None] | None = None,
) -> list[str]:
    """``created``: the acknowledged conversations (concurrent creates: in no set order);
    ``paged``: the listing read oldest first page by page; ``reverse``: newest first;
    ``sent``: per summary, how many create requests the client sent for the agent with it
    (key None: fork requests, which make conversations without one), retries included;
    ``summaries``: each listed conversation's summary. One request makes at most one
    conversation, whatever its answer."""
    problems = []
    if sent is not None and summaries is not None:
        listed: dict[str | None, int] = {}
        for conv in dict.fromkeys(paged):
            summary = summaries.get(conv)
            listed[summary] = listed.get(summary, 0) + 1
        for summary, count in listed.items():
            if summary is not None and summary not in sent:
                problems.append(f"{count} listed with summary {summary!r}: no request made it")
            elif count > sent.get(summary, 0):
                what = "fork" if summary is None else f"create ({summary!r})"
                problems.append(
                    f"{count} conversations listed from {sent.get(summary, 0)} {what} "
                    "request(s) of the client (one request made more than one)"
                )
    twice = sorted({c for c in paged if paged.count(c) > 1})
    if twice:
        problems.append(f"listed twice: {twice}")
    missing = sorted(set(created) - set(paged))
    if missing:
        problems.append(f"not listed: {missing}")
    if list(reverse) != list(paged)[::-1]:
        problems.append(f"newest first lists {list(reverse)}, not {list(paged)[::-1]}")
    return problems


class Threads:
    """The conversation clients of one workload run (see the module docstring)."""

    def __init__(
        self,
        clients: Any,
        count: int,
        messages: int,
        stream_fraction: float,
        *,
        orphans: bool = False,
        recompiles: bool = False,
    ) -> None:
        self.clients = clients
        self.orphans = orphans  # (fork_orphans) read every listed fork the client never used
        self.recompiles = recompiles  # (conversation_recompiles) see _recompile
        self.recompiled = 0  # recompiles checked
        self.count = count
        self.messages = messages
        self.stream_fraction = stream_fraction
        self.ids: dict[tuple[str, str], str] = {}  # (agent, thread) -> conversation id
        self.created: dict[str, list[str]] = {}  # agent -> conversation ids, in order
        self.forks: dict[tuple[str, str], str] = {}
        self.summaries: dict[str, str | None] = {}  # conversation id -> summary, as listed
        self.acks: list[ThreadAck] = []
        self.histories: dict[tuple[str, str], list[str]] = {}
        self.problems: list[str] = []
        self.auditor: ThreadAuditor = clients.world.auditor.threads

    # -- driving ------------------------------------------------------------------------------
    async def client(self, plan: Any, k: int) -> None:
        """Conversation ``c<k>`` of ``plan``'s agent, once the agent exists."""
        clients, link = self.clients, self.clients.link
        key = f"a{plan.number} create"
        while link.server_id(plan) is None:
            record = clients.record.requests.get(key)
            if record is not None and record.outcome == "failed":
                return
            await trio.sleep(0.5)
        rng = clients.ctx.rng(f"threads/{plan.number}/{k}")
        state = {"node": rng.choice(clients.world.node_names)}
        thread = f"c{k}"
        conv = await self._create(plan, thread, rng, state)
        if conv is None:
            return
        for j in range(1, self.messages + 1):
            if not await self._send(plan, thread, j, rng, state):
                return
        if k == 0:
            fork = await self._fork(plan, conv, rng, state)
            if fork is not None:
                self.forks[(plan.agent_id, f"{thread}f")] = thread
                await self._send(plan, f"{thread}f", 1, rng, state)
        if self.recompiles:
            await self._recompile(plan, thread, conv, rng, state)

    async def _create(self, plan: Any, thread: str, rng: Any, state: dict[str, str]) -> str | None:
        server_id = self.clients.link.server_id(plan)
        summary = f"conv-a{plan.number}-{thread}"

        async def attempt(node: str, number: int) -> str:
            sdk = self.clients.link.sdk(node)
            if number > 1:  # the first attempt may have created it
                found = await sdk.conversations.list(
                    agent_id=server_id, summary_search=summary, archive_status="all"
                )
                if found:
                    return str(found[0].id)
            conv = await sdk.conversations.create(agent_id=server_id, summary=summary)
            return str(conv.id)

        try:
            conv = await self.clients._call(
                f"a{plan.number} {thread} create", plan.agent_id, attempt, rng, state
            )
        except Exception:
            return None
        self.ids[(plan.agent_id, thread)] = conv
        self.created.setdefault(plan.agent_id, []).append(conv)
        return str(conv)

    async def _fork(self, plan: Any, conv: str, rng: Any, state: dict[str, str]) -> str | None:
        async def attempt(node: str, _: int) -> str:
            fork = await self.clients.link.sdk(node).conversations.fork(conv)
            return str(fork.id)

        try:  # a retried fork may leave an orphan copy: listed, never used
            fork = await self.clients._call(
                f"a{plan.number} c0 fork", plan.agent_id, attempt, rng, state
            )
        except Exception:
            return None
        self.ids[(plan.agent_id, "c0f")] = fork
        return str(fork)

    async def _send(self, plan: Any, thread: str, j: int, rng: Any, state: dict[str, str]) -> bool:
        conv = self.ids[(plan.agent_id, thread)]
        tag = f"tag-a{plan.number}-{thread}-m{j}"
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 4)))
        body = {"role": "user", "content": f"{tag} chat: {words}", "otid": f"otid-{tag[4:]}"}
        tokens = rng.random() < self.stream_fraction  # else one frame per message

        async def attempt(node: str, _: int) -> str:
            sdk = self.clients.link.sdk(node)
            stream = await sdk.conversations.messages.create(
                conv, messages=[body], stream_tokens=tokens
            )
            run_id, stop = "", None
            async for chunk in stream:
                if chunk.message_type == "stop_reason":
                    stop = chunk.stop_reason
                elif chunk.message_type not in ("ping", "usage_statistics"):
                    run_id = run_id or (chunk.run_id or "")
            if stop is None:
                from ._agent_http import IncompleteStreamError, unterminated

                self.clients.link.unterminated.append(unterminated(f"{tag} (attempt on {node})"))
                raise IncompleteStreamError("the stream ended before its stop reason")
            return run_id

        try:
            run_id = await self.clients._call(
                f"a{plan.number} {thread} #{j}", plan.agent_id, attempt, rng, state
            )
        except Exception:
            return False
        self.acks.append(ThreadAck(plan.agent_id, thread, j, tag, str(run_id)))
        return True

    async def _recompile(
        self, plan: Any, thread: str, conv: str, rng: Any, state: dict[str, str]
    ) -> None:
        """Recompile the thread's system prompt, a dry run and then for real, reading the
        thread's stored system message around each: a dry run stores nothing, and the real one
        stores, in this thread, the prompt it returned (no turn of the thread runs meanwhile:
        its client is this task)."""

        async def attempt(node: str, _: int) -> tuple[str, str, Any, str]:
            sdk = self.clients.link.sdk(node)
            before = await _system_of(sdk, conv)
            await sdk.conversations.recompile(conv, dry_run=True)
            after_dry = await _system_of(sdk, conv)
            # the SDK hands back the body as it came: the prompt as a JSON string
            prompt = json.loads(await sdk.conversations.recompile(conv))
            return before, after_dry, prompt, await _system_of(sdk, conv)

        try:
            before, after_dry, prompt, stored = await self.clients._call(
                f"a{plan.number} {thread} recompile", plan.agent_id, attempt, rng, state
            )
        except Exception:
            return
        self.recompiled += 1
        where = f"a{plan.number} {thread} ({conv})"
        if after_dry != before:
            self.problems.append(f"{where}: a dry-run recompile changed its stored system message")
        if stored != prompt:
            self.problems.append(
                f"{where}: after a recompile its stored system message reads "
                f"{_from(stored, prompt)} where the prompt the recompile returned reads "
                f"{_from(prompt, stored)}"
            )

    # -- the final read -----------------------------------------------------------------------
    async def read_back(self, plans: Iterable[Any], rng: Any) -> None:
        """Every thread's stored inputs, and each agent's conversations listed both ways."""
        for plan in plans:
            if plan.agent_id not in self.created:
                continue
            state = {"node": rng.choice(self.clients.world.node_names)}
            own = self.clients.record.histories.get(plan.agent_id, [])
            self.histories[(plan.agent_id, "")] = [
                t for t in (_input_tag(m.text) for m in own if m.type == "user_message") if t
            ]
            for (agent, thread), conv in sorted(self.ids.items()):
                if agent != plan.agent_id:
                    continue
                try:
                    self.histories[(agent, thread)] = await self._inputs(plan, conv, rng, state)
                    await self._runs(plan, thread, conv, rng, state)
                except Exception as error:  # a 404 or 500: the oracle says so, not a crash
                    self.problems.append(f"a{plan.number} {thread}: reading it: {error!r}")
            size = int(rng.choice((1, 2, 3)))
            try:
                paged = await self._listing(plan, "asc", size, rng, state)
                reverse = await self._listing(plan, "desc", 1000, rng, state)
            except Exception as error:
                self.problems.append(f"a{plan.number} conversations: listing: {error!r}")
                continue
            sent = self._sent(plan.number)
            created = self.created[plan.agent_id]
            if self.orphans:
                await self._orphans(plan, paged, rng, state)
            for problem in check_listing(created, paged, reverse, sent, self.summaries):
                self.problems.append(f"a{plan.number} conversations: {problem}")

    async def _orphans(
        self, plan: Any, paged: Sequence[str], rng: Any, state: dict[str, str]
    ) -> None:
        """A fork the client never used (a retried fork's first copy, listed) is still a
        whole copy: its inputs are its source's, as stored (rtU). Only forks of ``c0`` are
        made, after all of its inputs."""
        source = self.histories.get((plan.agent_id, "c0"))
        used = set(self.ids.values())
        for conv in dict.fromkeys(paged):
            if conv in used or self.summaries.get(conv) is not None or source is None:
                continue
            try:
                tags = await self._inputs(plan, conv, rng, state)
            except Exception as error:  # a 404 or 500: the oracle says so, not a crash
                self.problems.append(f"a{plan.number} fork {conv}: reading it: {error!r}")
                continue
            if tags != source:
                self.problems.append(
                    f"a{plan.number} fork {conv} (listed, never used) holds inputs {tags}, "
                    f"not its source c0's {source}: a fork listed without its whole history"
                )

    async def _runs(
        self, plan: Any, thread: str, conv: str, rng: Any, state: dict[str, str]
    ) -> None:
        """The runs of the thread's acknowledged inputs are the conversation's runs."""
        server_id = self.clients.link.server_id(plan)

        async def runs(node: str, _: int) -> dict[str, str | None]:
            page = await self.clients.link.sdk(node).runs.list(
                agent_id=server_id, conversation_id=conv, limit=1000
            )
            return {r.id: r.conversation_id for r in page.items}

        listed = await self.clients._call(
            f"a{plan.number} {thread} runs", plan.agent_id, runs, rng, state
        )
        for run_id, where in sorted(listed.items()):
            if where != conv:
                self.problems.append(f"{run_id} is listed in {conv} but is {where}'s")
        for ack in self.acks:
            mine = ack.agent == plan.agent_id and ack.thread == thread and ack.run_id
            if mine and ack.run_id not in listed:
                self.problems.append(f"{ack.tag}: its run {ack.run_id} is not {conv}'s")

    async def _inputs(self, plan: Any, conv: str, rng: Any, state: dict[str, str]) -> list[str]:
        tags: list[str] = []
        after: str | None = None
        size = int(rng.choice((3, 1000)))
        while True:

            async def page(node: str, _: int, after: str | None = after) -> list[Any]:
                got = await self.clients.link.sdk(node).conversations.messages.list(
                    conv, after=after, limit=size, order="asc"
                )
                return list(got.items)

            got = await self.clients._call(
                f"a{plan.number} {conv} read", plan.agent_id, page, rng, state
            )
            for m in got:
                if m.message_type == "user_message":
                    tag = _input_tag(str(m.content))
                    if tag:
                        tags.append(tag)
            if len(got) < size:
                return tags
            after = got[-1].id

    async def _listing(
        self, plan: Any, order: str, size: int, rng: Any, state: dict[str, str]
    ) -> list[str]:
        server_id = self.clients.link.server_id(plan)
        ids: list[str] = []
        while True:
            after = ids[-1] if ids else None

            async def page(node: str, _: int, after: str | None = after) -> list[str]:
                got = await self.clients.link.sdk(node).conversations.list(
                    agent_id=server_id, after=after, limit=size, order=order
                )
                self.summaries.update((str(c.id), c.summary) for c in got)
                return [str(c.id) for c in got]

            got: list[str] = await self.clients._call(
                f"a{plan.number} conversations {order}", plan.agent_id, page, rng, state
            )
            if any(c in ids for c in got):  # a cursor off by one: the oracle reports it
                return ids + got
            ids += got
            if len(got) < size or len(ids) > 1000:
                return ids

    def _sent(self, number: int) -> dict[str | None, int]:
        """Create requests sent for agent ``number``'s conversations (every attempt), by the
        summary they carry; forks (no summary) under None."""
        made = re.compile(rf"a{number} (c[0-9]+) (create|fork)")
        sent: dict[str | None, int] = {None: 0}
        for key, record in self.clients.record.requests.items():
            found = made.fullmatch(key)
            if found is not None:
                summary = f"conv-a{number}-{found[1]}" if found[2] == "create" else None
                sent[summary] = sent.get(summary, 0) + record.attempts
        return sent

    def check(self) -> list[str]:
        return (
            self.problems
            + check_threads(self.acks, self.histories, self.forks, self.auditor.shown)
            + self.auditor.problems
        )


def _input_tag(text: str) -> str | None:
    found = thread_of(text)
    return found[2] if found is not None else None
