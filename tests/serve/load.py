"""Concurrent clients that keep sending messages while servers are killed and restarted.

Each client is a thread with the unmodified sync ``Letta`` SDK (its own retries off). It sends
``<client>-<n>`` with otid ``otid-<client>-<n>`` to its agent, and retries that very message,
with the same otid, until a server acknowledges it (2xx): through whichever node is up, after
connection errors (a killed server, a refused connection) and 5xx answers. Any other answer
is recorded as a failure. Consecutive messages of a client go to different nodes when several
are up, so an agent moves between them.

:func:`check_history` then reads an agent's whole history and checks that every acknowledged
input is there exactly once, in each client's order, with the reply it was acknowledged with.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import attrs
import letta_client
from letta_client import Letta

GIVE_UP = 120.0  # seconds of retrying one message before the test fails
RETRYABLE = (letta_client.APIConnectionError, letta_client.InternalServerError)


@attrs.frozen
class Sent:
    """One acknowledged message."""

    client: str
    index: int
    agent_id: str
    text: str
    otid: str
    reply_ids: tuple[str, ...]
    node: str
    attempts: int


class Endpoints:
    """The URLs of the nodes that are up, by name; clients wait while none is."""

    def __init__(self) -> None:
        self._urls: dict[str, str] = {}
        self._changed = threading.Condition()
        self._closed = False

    def close(self) -> None:
        """Make waiting clients give up (a test that failed)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def up(self, name: str, url: str) -> None:
        with self._changed:
            self._urls[name] = url
            self._changed.notify_all()

    def down(self, name: str) -> None:
        with self._changed:
            self._urls.pop(name, None)
            self._changed.notify_all()

    def pick(self, turn: int, failed: str | None) -> tuple[str, str]:
        """A live node for this turn; after a failure on ``failed``, wait (briefly) for the
        endpoints to change before offering it again."""
        with self._changed:
            if failed is not None:
                self._changed.wait(timeout=0.1)
            self._changed.wait_for(lambda: bool(self._urls) or self._closed, timeout=120)
            if self._closed:
                raise RuntimeError("the test stopped the clients")
            if not self._urls:
                raise TimeoutError("no server came up within 120 s")
            names = sorted(self._urls)
            name = names[turn % len(names)]
            return name, self._urls[name]


class Load:
    """``clients_per_agent`` sending threads per agent, until :meth:`stop`."""

    def __init__(self, endpoints: Endpoints, agents: Sequence[str], clients_per_agent: int):
        self.endpoints = endpoints
        self.acked: list[Sent] = []
        self.failures: list[str] = []
        self.interrupted = 0  # attempts that ended in a connection error or a 5xx
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(
                target=self._client, args=(f"c{a}{k}", agent), name=f"c{a}{k}", daemon=True
            )
            for a, agent in enumerate(agents)
            for k in range(clients_per_agent)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 120) -> None:
        """Stop after each client's current message is acknowledged."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)
        assert not any(thread.is_alive() for thread in self._threads), "a client hung"

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def per_client(self) -> dict[str, int]:
        """Acknowledged messages per client, every client named (0 for none yet)."""
        counts = {thread.name: 0 for thread in self._threads}
        with self._lock:
            for sent in self.acked:
                counts[sent.client] += 1
        return counts

    def _client(self, name: str, agent_id: str) -> None:
        clients: dict[str, Letta] = {}
        index = 0
        while not self._stop.is_set() and not self.failures:
            try:
                self._send(name, agent_id, index, clients)
            except Exception as error:  # anything but a retryable error fails the test
                with self._lock:
                    self.failures.append(f"{name}-{index}: {type(error).__name__}: {error}")
                return
            index += 1

    def _send(self, name: str, agent_id: str, index: int, clients: dict[str, Letta]) -> None:
        text, otid = f"{name}-{index}", f"otid-{name}-{index}"
        failed: str | None = None
        deadline = time.monotonic() + GIVE_UP
        for attempt in itertools.count(1):
            if time.monotonic() > deadline:
                raise AssertionError(f"{text} was not acknowledged within {GIVE_UP} s")
            node, url = self.endpoints.pick(index + attempt - 1, failed)
            client = clients.get(url) or clients.setdefault(
                url, Letta(base_url=url, max_retries=0, timeout=GIVE_UP)
            )
            try:
                reply = client.agents.messages.create(
                    agent_id, messages=[{"role": "user", "content": text, "otid": otid}]
                )
            except RETRYABLE:
                with self._lock:
                    self.interrupted += 1
                failed = url
                continue
            ids = tuple(message.id for message in reply.messages)
            sent = Sent(name, index, agent_id, text, otid, ids, node, attempt)
            with self._lock:
                self.acked.append(sent)
            return


def history(client: Letta, agent_id: str) -> list[Any]:
    """The agent's whole history, oldest first. The SDK pages with ``after=<last id>``
    until a page is empty; newest first, so a history that grows meanwhile (clients still
    sending) cannot keep the walk going."""
    return list(client.agents.messages.list(agent_id, limit=500, order="desc"))[::-1]


def _alert(content: Any) -> bool:
    """Whether a user message is the server's own (a compaction summary, a system alert, as
    Letta lists them): JSON with ``"type": "system_alert"``, not something a client sent."""
    if not isinstance(content, str) or not content.startswith("{"):
        return False
    try:
        data = json.loads(content)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("type") == "system_alert"


def check_history(client: Letta, agent_id: str, acked: Sequence[Sent], *, complete: bool) -> int:
    """Every acknowledged input of ``agent_id`` is in its history exactly once, in each
    client's order, with the reply it was acknowledged with. With ``complete`` (no client
    is sending) the history holds no other input (the summaries a long history is compacted
    into are the server's, not inputs). Returns the number of messages after the stored
    system message, which every agent's history starts with (Letta's first messages)."""
    messages = history(client, agent_id)
    assert messages and messages[0].message_type == "system_message", "no system message first"
    messages = messages[1:]
    ids = [message.id for message in messages]
    assert len(set(ids)) == len(ids), "a message id appears twice"
    inputs = [m for m in messages if m.message_type == "user_message" and not _alert(m.content)]
    counts = Counter(m.content for m in inputs)
    position = {m.content: i for i, m in enumerate(inputs)}
    otids = {m.content: m.otid for m in inputs}
    mine = sorted((s for s in acked if s.agent_id == agent_id), key=lambda s: (s.client, s.index))
    known = set(ids)
    for sent in mine:
        assert counts[sent.text] == 1, f"{sent} is in the history {counts[sent.text]} times"
        assert otids[sent.text] == sent.otid, sent
        missing = [reply for reply in sent.reply_ids if reply not in known]
        assert not missing, f"the reply {missing} to {sent} is not in the history"
    duplicated = [text for text, count in counts.items() if count > 1]
    assert not duplicated, f"inputs stored twice: {duplicated}"
    for earlier, later in pairwise(mine):
        if earlier.client == later.client:
            assert position[earlier.text] < position[later.text], (earlier, later)
    if complete:
        assert sorted(counts) == sorted(s.text for s in mine), "an input nobody sent"
    return len(messages)
