"""Recall search across conversations, conversation updates, forks and deletes, and step
records, under faults (``agent_recall``).

Server nodes (``topology.nodes``) share the database host, each running the production node
with a model (:class:`RecallPolicy`) that answers a plain input with ``ack`` and the input's
text, and a probe input (``recallprobe N``, naming the client's N-th planned call, so the
input itself holds none of the searched words) with exactly that tool call, then ``probe
done``. A client makes ``agents`` agents with ``conversation_search``; each agent gets two
conversations (``c0``, ``c1``). For ``span`` seconds, per agent, on random live nodes, the
client:

* sends inputs ``t<agent>-<thread>-<k> w w w`` (words from a small vocabulary) to the agent's
  own history or a conversation, with an otid, retried until acknowledged;
* asks the model, in one of those threads, for a ``conversation_search`` of one vocabulary
  word, with ``roles`` (a random subset, or none), ``limit`` (or none) and whole-day
  ``start_date``/``end_date`` (the epoch's day, the day before or after, or none);
* sets ``c0``'s or ``c1``'s summary (``conversations.update``);
* forks ``c0`` once, cut at one of its inputs (``message_id``), and then talks in the fork;
* deletes ``c1`` once, late;
* rates a step of an acknowledged run (positive, negative, or clears it).

The properties (``recall_consistent``, :mod:`._agent_recall_checks`): every search result
is a message of the searched thread (not another conversation's, not the agent's own history's
when searched in a conversation), of a role asked for, containing the word and dated within the
days asked, and a search answers ``min(limit, matching)`` results with ``matching`` between the
messages certainly and possibly there (the client's model, not the server's search code); each
thread holds exactly its acknowledged inputs, in order, a fork its source's up to and including
the message it was cut at, then its own; a deleted conversation is gone and the others are
whole; a conversation's summary is the last one set, whatever was sent to it since; each step's
tokens are those the model reported for the answer the step stored; a step's feedback is the
last one given (a clear included), and ``steps.list(has_feedback=...)`` agrees.
"""

from __future__ import annotations

import datetime as _dt
import json
import random
from typing import Any

import attrs
import httpx
import trio

import kelpie_dst
from kelpie_agent.agent import CreateAgent, InputMessage, builtin_id
from kelpie_agent.agent._config import LoopConfig
from kelpie_agent.agent._messages import AssistantMessage, ToolReturnMessage, UserMessage
from kelpie_agent.api import create_app
from kelpie_agent.http import serve
from kelpie_agent.llm import LlmRequest
from kelpie_agent.service import AgentService, NotFoundError, ServiceError
from kelpie_agent.service import _archives as archives
from kelpie_agent.service import _folders as folders

from ..scenario import WorkloadContext, invariant, workload
from ..shims import LlmTiming, SimLlmClient, open_kv, sim_ports
from ..shims.llm import Call, Reply
from ..shims.llm._turns import latest_turn
from ._agent_coherence import coherence_options
from ._agent_coherence import memory_matches_storage as memory_matches_storage
from ._agent_http import _tls
from ._agent_recall_checks import (
    ROLES,
    Entry,
    Recall,
    StepSeen,
    check_agent_patches,
    check_archived,
    check_feedback,
    check_open_files,
    check_recalls,
    check_shelf_search,
    check_shelves,
    check_steps,
    check_summaries,
    check_threads,
)
from ._agent_schedules import _FAILURES, OPTIONS, SERVICE, Client
from ._agent_world import PORT, SERVER
from .agent_memory import StickyClient

__all__ = ["RecallPolicy", "agent_recall", "recall_consistent"]

WORDS = ("kelp", "tide", "otter", "reef", "urchin")
PROBE = "recallprobe"
FEEDBACKS = ("positive", "negative", None)
MAX_FILES_OPEN = 2
OPEN_GAP = 5.0  # seconds between opens: more than twice the clocks' largest skew
AGENT_TAGS = ("blue", "deep", "warm")


@attrs.define
class Thread:
    """One thread of an agent as the client knows it."""

    label: str  # own, c0, c1, c0f
    conv: str | None  # the conversation id (None: the agent's own history)
    entries: list[Entry] = attrs.Factory(list)  # searchable messages it holds
    inputs: list[str] = attrs.Factory(list)  # acknowledged inputs, in order
    optional: set[str] = attrs.Factory(set)  # sent, never acknowledged
    summaries: list[str] = attrs.Factory(list)  # acknowledged summary updates, in order
    archived: bool = False  # as last set (acknowledged)
    deleted: bool = False


@attrs.define
class Shelf:
    """One of an agent's archives (with ``archives``) as the client knows it."""

    id: str
    name: str  # as last set
    texts: list[str] = attrs.Factory(list)  # passages added, acknowledged
    maybe: list[str] = attrs.Factory(list)  # passages whose add had no answer
    attached: bool = False
    deleted: bool = False


@attrs.define
class RecallLog:
    plans: dict[int, tuple[str, dict[str, Any]]] = attrs.Factory(dict)  # probe N -> call
    recalls: list[Recall] = attrs.Factory(list)
    threads: dict[str, dict[str, Thread]] = attrs.Factory(dict)  # agent -> label -> thread
    stored: dict[str, list[str] | None] = attrs.Factory(dict)  # "<agent> <label>" -> inputs
    found_summaries: dict[str, str | None] = attrs.Factory(dict)  # thread -> summary read
    found_archived: dict[str, bool] = attrs.Factory(dict)  # thread -> archived flag read
    # (agent, archive_status) -> the conversations conversations.list gave
    listed: dict[tuple[str, str], set[str]] = attrs.Factory(dict)
    runs: dict[str, list[str]] = attrs.Factory(dict)  # agent -> acknowledged run ids
    # response id -> (input tokens, output tokens, the model asked)
    usage: dict[str, tuple[int, int, str]] = attrs.Factory(dict)
    stops: dict[str, str] = attrs.Factory(dict)  # acknowledged run -> its stop reason
    steps: list[StepSeen] = attrs.Factory(list)
    feedback: dict[str, list[str | None]] = attrs.Factory(dict)  # step -> values set
    found_feedback: dict[str, str | None] = attrs.Factory(dict)
    rated: set[str] = attrs.Factory(set)
    unrated: set[str] = attrs.Factory(set)
    problems: list[str] = attrs.Factory(list)
    forks: int = 0
    # with ``archives``: each search after an attach, detach or delete, and the final reads
    shelf_searches: list[tuple[str, list[str], list[str], int, list[str]]] = attrs.Factory(list)
    shelves: dict[str, list[Shelf]] = attrs.Factory(dict)  # agent -> its archives
    # agent -> (archives.list(agent_id), the agent's archive_ids, {archive: listed by name})
    shelf_reads: dict[str, tuple[set[str], set[str], dict[str, set[str]]]] = attrs.Factory(dict)
    # with ``files``: per agent, each read of its open files after an open (model, read)
    opened: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = attrs.Factory(list)
    # each read of an agent after a PATCH: (agent, body sent, model (tags, description), read)
    patches: list[tuple[str, str, tuple[Any, ...], tuple[Any, ...]]] = attrs.Factory(list)


class RecallPolicy:
    """The model: ``recallprobe N`` gets the N-th planned call; a tool result gets ``probe
    done``; any other input gets ``ack`` and the input's text."""

    def __init__(self, log: RecallLog) -> None:
        self.log = log

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        turn = latest_turn(request)
        if turn.kind == "tool_result":
            return (f"probe {_probe_of(request)} done",)
        text = turn.text.strip()
        if text.startswith(PROBE + " "):
            plan = self.log.plans.get(int(text.split()[1]))
            if plan is not None:
                return (Call(plan[0], dict(plan[1])),)
        return (f"ack {text}",)


def _probe_of(request: LlmRequest) -> str:
    """The number of the latest probe input the request shows."""
    for message in reversed(request.messages):
        for block in message.content:
            text = getattr(block, "text", None)
            if message.role == "user" and isinstance(text, str) and text.startswith(PROBE + " "):
                return text.split()[1]
    return "?"


class UsageObserver:
    """Keeps the usage of every answer the model planned (an LlmObserver; draws nothing)."""

    def __init__(self, log: RecallLog) -> None:
        self.log = log

    def observe(self, request: LlmRequest, outcome: Any, node: str | None) -> None:
        response = getattr(outcome, "response", None)
        if response is not None:
            usage = response.usage
            said = (usage.input_tokens, usage.output_tokens, request.model)
            self.log.usage[response.id] = said


def _now() -> float:
    return trio.current_time()


class Talker:
    """One agent's client."""

    def __init__(self, client: Client, log: RecallLog, number: int) -> None:
        self.client = client
        self.log = log
        self.number = number
        self.rng = client.rng
        self.agent = ""
        self.k = 0
        self.threads: dict[str, Thread] = {}
        self.files: list[str] = []  # file ids, with ``files``
        self.shelves: list[Shelf] = []  # archives, with ``archives``
        self.lru: list[str] = []  # the files, least recently opened first
        self.http: httpx.AsyncClient | None = None  # set by the workload
        # the agent's tags, description and metadata, as last set
        self.shown: tuple[tuple[str, ...], str, dict[str, Any]] = ((), "", {})

    def clock(self) -> float:
        return self.client.clock.now()

    async def make(self) -> None:
        request = CreateAgent(
            name=f"recall-{self.number}",
            tool_ids=(builtin_id("conversation_search"), builtin_id("conversation_search_date")),
            max_files_open=MAX_FILES_OPEN,
        )
        view = await self.client.until_done(lambda s: s.create_agent(request))
        self.agent = view.agent.id
        self.threads["own"] = Thread("own", None)
        self.log.threads[self.agent] = self.threads
        for label in ("c0", "c1"):
            conv = await self._create(label)
            self.threads[label] = Thread(label, conv, summaries=[f"sum-{self.number}-{label}-0"])
        count = int(self.client.ctx.params.get("files", 0))
        if count:
            await self._folder(count)
        for k in range(int(self.client.ctx.params.get("archives", 0))):
            await self._shelf(k)
        self.log.shelves[self.agent] = self.shelves

    async def _shelf(self, k: int) -> None:
        """An archive of the agent's own (made once: a retry looks its name up first) with two
        passages, not attached yet."""
        name = f"arch-{self.number}-{k}"

        async def make(s: AgentService) -> Any:
            found = await archives.list_archives(s, name=name)
            return found[0] if found else await archives.create_archive(s, name)

        record = await self.client.until_done(make)
        shelf = Shelf(record.id, name)
        self.shelves.append(shelf)
        for j in range(2):
            text = f"shelf {self.number}.{k}.{j} " + " ".join(self.rng.sample(WORDS, 2))
            items: list[archives.PassageItem] = [(text, (), {}, None)]
            try:
                await self.client.once(
                    lambda s, i=items: archives.add_archive_passages(  # type: ignore[misc]
                        s, shelf.id, i
                    )
                )
            except _FAILURES:
                shelf.maybe.append(text)
            except ServiceError:
                pass
            else:
                shelf.texts.append(text)

    async def shelve(self) -> None:
        """Attach or detach one of the agent's archives, rename one, or (late) delete one;
        after a change of what is attached, search the agent's archival memory: only the
        attached archives' passages (the agent has none of its own) may answer."""
        rng = self.rng
        live = [a for a in self.shelves if not a.deleted]
        if not live:
            return
        shelf = rng.choice(live)
        roll = rng.random()
        if roll < 0.2:
            name = f"arch-{self.number}-r{self.k}"  # never an initial arch-N-k's name
            self.k += 1
            await self.client.until_done(
                lambda s: archives.update_archive(s, shelf.id, {"name": name})
            )
            shelf.name = name
            return
        if roll < 0.45 and len(live) == len(self.shelves) > 1:  # once, one attached if any
            shelf = next((a for a in live if a.attached), shelf)
            shelf.deleted = True  # from the send on, it may be gone
            try:
                await self.client.until_done(lambda s: archives.delete_archive(s, shelf.id))
            except NotFoundError:
                pass  # a retry of a delete that landed
        elif shelf.attached:
            await self.client.until_done(lambda s: archives.detach_archive(s, self.agent, shelf.id))
            shelf.attached = False
        else:
            await self.client.until_done(lambda s: archives.attach_archive(s, self.agent, shelf.id))
            shelf.attached = True
        top_k = 10
        try:
            hits = await self.client.once(
                lambda s: s.search_passages(self.agent, rng.choice(WORDS), top_k=top_k)
            )
        except (*_FAILURES, ServiceError):
            return
        there = [a for a in self.shelves if a.attached and not a.deleted]
        certain = [t for a in there for t in a.texts]
        possible = certain + [t for a in there for t in a.maybe]
        found = [h.passage.text for h in hits]
        self.log.shelf_searches.append((self.agent, certain, possible, top_k, found))

    async def _folder(self, count: int) -> None:
        """A folder of ``count`` small files, attached; then each file opened in turn, far
        enough apart that the nodes' clock skew cannot reorder them."""
        name = f"folder-{self.number}"

        async def make(s: AgentService) -> Any:
            found = await folders.list_folders(s, name=name)
            return found[0] if found else await folders.create_folder(s, name)

        folder = await self.client.until_done(make)
        for i in range(count):
            data = f"file {i} of agent {self.number}\nkelp and tide\n".encode()
            record = await self.client.until_done(
                lambda s, i=i, d=data: folders.upload_file(  # type: ignore[misc]
                    s, folder.id, f"f{i}.txt", d, declared_type=None, duplicate_handling="skip"
                )
            )
            assert record is not None
            self.files.append(record.id)
        await self.client.until_done(lambda s: folders.attach_folder(s, self.agent, folder.id))
        for file_id in self.files:
            await self.open(file_id, check=False)

    async def open(self, file_id: str, *, check: bool = True) -> None:
        """Open a file (retried: opening an open file changes nothing but its recency); then
        read which files are open: the ``MAX_FILES_OPEN`` most recently opened."""
        await self.client.until_done(lambda s: folders.open_file(s, self.agent, file_id))
        if file_id in self.lru:
            self.lru.remove(file_id)
        self.lru.append(file_id)
        if check:
            found, _ = await self.client.until_done(
                lambda s: folders.agent_files(s, self.agent, is_open=True, limit=50)
            )
            model = tuple(sorted(self.lru[-MAX_FILES_OPEN:]))
            read = tuple(sorted(f.record.id for f in found))
            self.log.opened.append((self.agent, model, read))
        await trio.sleep(OPEN_GAP)

    async def _create(self, label: str) -> str:
        summary = f"sum-{self.number}-{label}-0"
        while True:
            try:
                found = await self.client.once(
                    lambda s: s.list_conversations(
                        agent_id=self.agent, summary_search=summary, archive_status="all"
                    )
                )
                if found:
                    return found[0].id
                record = await self.client.once(
                    lambda s: s.create_conversation(self.agent, summary=summary)
                )
                return record.id
            except _FAILURES:
                await trio.sleep(self.rng.uniform(0.5, 2.0))

    async def _send(self, thread: Thread, text: str, max_steps: int) -> Any:
        self.k += 1
        otid = f"otid-{self.number}-{self.k}"
        message = (InputMessage("user", text, otid=otid),)
        return await self.client.until_done(
            lambda s: s.send_message(
                self.agent, message, max_steps=max_steps, conversation_id=thread.conv
            )
        )

    async def say(self, thread: Thread) -> None:
        self.k += 1
        words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(1, 3)))
        text = f"t{self.number}-{thread.label}-{self.k} {words}"
        sent = self.clock()
        user, reply = Entry("user", text, sent), Entry("assistant", f"ack {text}", sent)
        thread.entries += [user, reply]
        thread.optional.add(text)
        result = await self._send(thread, text, 2)
        acked = self.clock()
        user.acked = acked
        thread.inputs.append(text)
        thread.optional.discard(text)
        if any(
            isinstance(m, AssistantMessage) and m.content == reply.text for m in result.messages
        ):
            reply.acked = acked
        if result.run_id:
            self.log.runs.setdefault(self.agent, []).append(result.run_id)
            self.log.stops[result.run_id] = result.stop_reason

    async def search(self, thread: Thread) -> None:
        """Ask the model for a ``conversation_search`` (or, one time in four, a
        ``conversation_search_date``) in ``thread`` and keep its answer with the thread's
        model as it was when the search was sent."""
        rng = self.rng
        by_date = rng.random() < 0.25
        tool = "conversation_search_date" if by_date else "conversation_search"
        today = _dt.datetime.fromtimestamp(self.clock(), _dt.UTC).date()

        def day() -> str:
            return (today + _dt.timedelta(days=rng.choice((-1, 0, 0, 1)))).isoformat()

        query = rng.choice(WORDS)
        args: dict[str, Any] = {}
        roles: tuple[str, ...] | None = None
        limit: int | None = None
        page: int | None = None
        start_day = end_day = None
        if by_date:
            start_day, end_day = sorted((day(), day()))
            page = rng.choice((0, 0, 0, 1, 2))
            args = {"start_date": start_day, "end_date": end_day, "page": page}
        else:
            if rng.random() < 0.3:  # two words: ranked by how many it holds, phrase first
                query = " ".join(rng.sample(WORDS, 2))
            args["query"] = query if rng.random() < 0.8 else query.upper()
            if rng.random() < 0.6:
                roles = tuple(sorted(rng.sample(ROLES, rng.randint(1, 2))))
                args["roles"] = list(roles)
            if rng.random() < 0.6:
                limit = rng.randint(1, 10)
                args["limit"] = limit
            if rng.random() < 0.5:
                end_day = day()
                args["end_date"] = end_day
            if rng.random() < 0.4:
                start_day = day()
                args["start_date"] = start_day
        n = len(self.log.plans)
        self.log.plans[n] = (tool, args)
        sent = self.clock()
        probe = Entry("user", f"{PROBE} {n}", sent, sent)  # stored before its tool runs
        before = (*(attrs.evolve(e) for e in thread.entries), probe)
        done = Entry("assistant", f"probe {n} done", sent)
        thread.entries += [attrs.evolve(probe, acked=None), done]
        result = await self._send(thread, probe.text, 3)
        acked = self.clock()
        thread.entries[-2].acked = acked
        if any(isinstance(m, AssistantMessage) and m.content == done.text for m in result.messages):
            done.acked = acked
        if result.run_id:
            self.log.runs.setdefault(self.agent, []).append(result.run_id)
            self.log.stops[result.run_id] = result.stop_reason
        for m in result.messages:
            if isinstance(m, ToolReturnMessage):
                try:
                    packaged = json.loads(m.tool_return)
                    answer = str(packaged.get("message"))
                except (ValueError, AttributeError):
                    answer = m.tool_return
                recall = Recall(
                    self.agent,
                    thread.label,
                    query,
                    roles,
                    limit,
                    start_day,
                    end_day,
                    sent,
                    acked,
                    m.status,
                    answer,
                    before,
                    tool,
                    page,
                )
                self.log.recalls.append(recall)
                return

    async def summarize(self, thread: Thread) -> None:
        """Set the conversation's summary (or, one time in three, archive or unarchive it)
        between two inputs to it (the first loads the thread where the update runs, the
        second writes the record again with its new ``last_message_at``)."""
        assert thread.conv is not None
        await self.say(thread)
        conv = thread.conv
        if self.rng.random() < 1 / 3:
            flag = not thread.archived
            await self.client.until_done(lambda s: s.update_conversation(conv, {"archived": flag}))
            thread.archived = flag
        else:
            value = f"sum-{self.number}-{thread.label}-{len(thread.summaries)}"
            await self.client.until_done(lambda s: s.update_conversation(conv, {"summary": value}))
            thread.summaries.append(value)
        await self.say(thread)

    async def fork(self) -> None:
        source = self.threads["c0"]
        assert source.conv is not None
        conv = source.conv
        try:
            listed = await self.client.once(
                lambda s: s.list_messages(self.agent, conversation_id=conv, limit=1000, order="asc")
            )
        except (*_FAILURES, ServiceError):
            return
        inputs = [m for m in listed if isinstance(m, UserMessage) and _tagged(m.content)]
        if not inputs:
            return
        cut = self.rng.choice(inputs)
        kept = listed[: listed.index(cut) + 1]
        try:
            record = await self.client.once(
                lambda s: s.fork_conversation(conv, agent_id=self.agent, message_id=cut.id)
            )
        except (*_FAILURES, ServiceError):
            return  # an unknown outcome may leave an orphan fork: never used
        fork = Thread("c0f", record.id)
        at = next(
            i for i, e in enumerate(source.entries) if (e.role, e.text) == ("user", cut.content)
        )
        fork.entries = [attrs.evolve(e) for e in source.entries[: at + 1]]
        fork.inputs = [m.content for m in kept if isinstance(m, UserMessage) and _tagged(m.content)]
        self.threads["c0f"] = fork
        self.log.forks += 1

    async def delete(self) -> None:
        thread = self.threads["c1"]
        assert thread.conv is not None
        conv = thread.conv
        thread.deleted = True  # from the send on, it may be gone
        try:
            await self.client.until_done(lambda s: s.delete_conversation(conv))
        except NotFoundError:
            pass  # a retry of a delete that landed

    async def rate(self) -> None:
        runs = self.log.runs.get(self.agent)
        if not runs:
            return
        run_id = self.rng.choice(runs)
        try:
            steps = await self.client.once(lambda s: s.list_steps(run_id=run_id, limit=50))
        except (*_FAILURES, ServiceError):
            return
        if not steps:
            return
        step = self.rng.choice(steps).id
        values: list[str | None] = [self.rng.choice(FEEDBACKS[:2])]
        if self.rng.random() < 0.6:  # changed or cleared at once
            values.append(self.rng.choice(FEEDBACKS))
        for value in values:
            await self.client.until_done(
                lambda s, v=value: s.step_feedback(step, v)  # type: ignore[misc]
            )
            self.log.feedback.setdefault(step, []).append(value)

    async def _http(self, method: str, path: str, body: Any = None) -> Any:
        """One REST call, retried on another live node while the answer says to retry (a
        node down, a 5xx, a cut connection); the JSON answer."""
        assert self.http is not None
        while True:
            live = sorted(n for n, s in self.client.services.items() if s.running)
            if not live:
                await trio.sleep(1.0)
                continue
            node = self.rng.choice(live)
            url = f"http://{node}:{PORT}{path}"
            try:
                answer = await self.http.request(method, url, json=body)
            except (httpx.HTTPError, OSError):
                await trio.sleep(self.rng.uniform(0.5, 2.0))
                continue
            if answer.status_code >= 500 or answer.status_code in (408, 429):
                await trio.sleep(self.rng.uniform(0.5, 2.0))
                continue
            answer.raise_for_status()
            return answer.json()

    async def patch(self) -> None:
        """``PATCH /v1/agents/{id}`` with a subset of its tags, description and metadata, a
        field that holds something set empty half the time (``[]``, ``""``, ``{}``), then the
        agent read back: the fields given have their new values, the others keep theirs."""
        rng = self.rng
        tags, description, metadata = self.shown
        body: dict[str, Any] = {}
        if rng.random() < 0.7:
            empty = bool(tags) and rng.random() < 0.5
            tags = () if empty else tuple(rng.sample(AGENT_TAGS, rng.randint(1, 3)))
            body["tags"] = list(tags)
        if not body or rng.random() < 0.5:
            empty = bool(description) and rng.random() < 0.5
            description = "" if empty else f"agent {self.number} mood {self.k}"
            body["description"] = description
        if rng.random() < 0.4:
            empty = bool(metadata) and rng.random() < 0.5
            metadata = {} if empty else {"mood": f"m{self.k}"}
            body["metadata"] = metadata
        self.k += 1
        await self._http("PATCH", f"/v1/agents/{self.agent}", body)
        self.shown = (tags, description, metadata)
        await self.read_agent(json.dumps(body, sort_keys=True))

    async def read_shelves(self) -> None:
        listed = await self.client.until_done(
            lambda s: archives.list_archives(s, agent_id=self.agent, limit=1000)
        )
        view = await self.client.until_done(lambda s: s.get_agent(self.agent))
        named: dict[str, set[str]] = {}
        for shelf in self.shelves:
            found = await self.client.until_done(
                lambda s, n=shelf.name: archives.list_archives(  # type: ignore[misc]
                    s, name=n, limit=1000
                )
            )
            named[shelf.id] = {a.id for a in found}
        ids = {a.id for a in listed}
        self.log.shelf_reads[self.agent] = (ids, set(view.agent.archive_ids), named)

    async def read_agent(self, sent: str) -> None:
        state = await self._http("GET", f"/v1/agents/{self.agent}")
        model = (sorted(self.shown[0]), self.shown[1], self.shown[2])
        read = (
            sorted(state.get("tags") or ()),
            state.get("description") or "",
            state.get("metadata") or {},
        )
        self.log.patches.append((self.agent, sent, model, read))

    async def run(self, span: float) -> None:
        deadline = trio.current_time() + span
        rng = self.rng
        while trio.current_time() < deadline:
            live = [t for t in self.threads.values() if not t.deleted]
            thread = rng.choice(live)
            roll = rng.random()
            late = trio.current_time() > deadline - span / 3
            if roll < 0.35:
                await self.say(thread)
            elif roll < 0.6:
                await self.search(thread)
            elif roll < 0.68 and thread.conv is not None:
                await self.summarize(thread)
            elif roll < 0.74 and "c0f" not in self.threads:
                await self.fork()
            elif roll < 0.78 and late and not self.threads["c1"].deleted:
                await self.delete()
            elif roll < 0.83:
                await self.rate()
            elif roll < 0.89 and self.http is not None:
                await self.patch()
            elif roll < 0.94 and self.files:
                await self.open(rng.choice(self.files))
            elif self.shelves:
                await self.shelve()
            await trio.sleep(rng.uniform(0.1, 0.8))

    async def read_back(self) -> None:
        for label, thread in self.threads.items():
            key = f"{self.agent} {label}"
            conv = thread.conv
            if conv is not None:  # a deleted conversation is a 404 (its keys may linger)
                try:
                    record = await self.client.until_done(
                        lambda s, c=conv: s.get_conversation(c)  # type: ignore[misc]
                    )
                except NotFoundError:
                    self.log.stored[key] = None
                    continue
                self.log.found_summaries[key] = record.summary
                self.log.found_archived[key] = record.archived
            listed = await self.client.until_done(
                lambda s, c=conv: s.list_messages(  # type: ignore[misc]
                    self.agent, conversation_id=c, limit=1000, order="asc"
                )
            )
            self.log.stored[key] = [
                m.content for m in listed if isinstance(m, UserMessage) and _tagged(m.content)
            ]
        for run_id in self.log.runs.get(self.agent, []):
            steps = await self.client.until_done(
                lambda s, r=run_id: s.list_steps(run_id=r, limit=1000)  # type: ignore[misc]
            )
            for step in steps:
                self.log.steps.append(
                    StepSeen(
                        step.id,
                        str(step.response.get("id", "")),
                        step.prompt_tokens,
                        step.completion_tokens,
                        step.feedback,
                        step.run_id,
                        step.number,
                        step.stop_reason,
                        step.model,
                    )
                )
                if step.id in self.log.feedback:
                    self.log.found_feedback[step.id] = step.feedback
        for status in ("archived", "unarchived", "all"):
            listed = await self.client.until_done(
                lambda s, st=status: s.list_conversations(  # type: ignore[misc]
                    agent_id=self.agent, archive_status=st, limit=1000
                )
            )
            self.log.listed[(self.agent, status)] = {c.id for c in listed}
        for label, thread in self.threads.items():
            if thread.deleted or not thread.summaries:
                continue
            summary = thread.summaries[-1]
            found = await self.client.until_done(
                lambda s, q=summary: s.list_conversations(  # type: ignore[misc]
                    agent_id=self.agent, summary_search=q, archive_status="all", limit=1000
                )
            )
            if thread.conv not in {c.id for c in found}:
                self.log.problems.append(
                    f"{self.agent} {label}: conversations.list(summary_search={summary!r}) "
                    f"does not list {thread.conv}"
                )
        if self.shelves:
            await self.read_shelves()
        if self.http is not None:
            await self.read_agent("(the final read)")
        for flag, into in ((True, self.log.rated), (False, self.log.unrated)):
            steps = await self.client.until_done(
                lambda s, f=flag: s.list_steps(  # type: ignore[misc]
                    agent_id=self.agent, has_feedback=f, limit=1000
                )
            )
            into.update(step.id for step in steps)


def _tagged(text: str) -> bool:
    return text.startswith("t") and "-" in text.split(" ", 1)[0]


def _start_servers(ctx: WorkloadContext, log: RecallLog, http: bool) -> dict[str, AgentService]:
    from kelpie_agent.service import open_agent_node

    topology = ctx.topology
    db = ctx.sim.add_node(topology.database or "db")
    services: dict[str, AgentService] = {}
    policy = RecallPolicy(log)
    observer = UsageObserver(log)

    async def server(node: kelpie_dst.Node) -> None:
        async with open_agent_node(
            open_kv(node, host=db),
            sim_ports(node),
            node_id=node.name,
            llm=SimLlmClient(
                policy, timing=LlmTiming(ttft_min=0.05, ttft_max=0.3), observer=observer
            ),
            loop_config=LoopConfig(),
            dispatcher_options=OPTIONS,
            options=SERVICE,
            observer=kelpie_dst.log,
            **coherence_options(ctx, db),
        ) as service:
            services[node.name] = service
            if http:
                await serve(create_app(service), "0.0.0.0", PORT, SERVER)
            else:
                await trio.sleep_forever()

    for name in topology.nodes or ("server-1", "server-2", "server-3"):
        ctx.sim.add_node(name, server)
    return services


@workload(
    params={"agents": 2, "span": 60.0, "files": 0, "http": False, "archives": 0},
    sizes=("agents",),
    bounds={"agents": (1, 20), "span": (1, 3600), "files": (0, 10), "archives": (0, 5)},
)
async def agent_recall(ctx: WorkloadContext) -> None:
    """Recall search across threads, conversation updates, forks and deletes, step records;
    see the module docstring."""
    log = RecallLog()
    ctx.state["log"] = log
    http = bool(ctx.params.get("http", False))
    services = _start_servers(ctx, log, http)
    talkers = [
        Talker(StickyClient(ctx, services, f"recall-{n}"), log, n)
        for n in range(int(ctx.params["agents"]))
    ]
    for talker in talkers:
        await talker.make()
    span = float(ctx.params["span"])
    async with httpx.AsyncClient(timeout=httpx.Timeout(20.0), verify=_tls()) as client:
        for talker in talkers:
            talker.http = client if http else None
        async with trio.open_nursery() as nursery:
            for talker in talkers:
                nursery.start_soon(talker.run, span)
        for talker in talkers:
            await talker.read_back()
    ctx.metric("recall.searches", len(log.recalls))
    ctx.metric(
        "recall.results",
        sum(r.answer.count('"role"') for r in log.recalls),
    )
    ctx.metric("recall.forks", log.forks)
    ctx.metric("recall.steps", len(log.steps))
    ctx.metric("recall.steps_matched", sum(s.response_id in log.usage for s in log.steps))
    ctx.metric("recall.rated", len(log.feedback))
    ctx.metric("recall.opens_checked", len(log.opened))
    ctx.metric("recall.patches", len(log.patches))
    ctx.metric("recall.shelf_searches", len(log.shelf_searches))


def check_recall_log(log: RecallLog) -> list[str]:
    problems = check_recalls(log.recalls)
    expected: dict[str, list[str]] = {}
    optional: dict[str, set[str]] = {}
    summaries: dict[str, tuple[list[str], str | None]] = {}
    for agent, threads in log.threads.items():
        for label, thread in threads.items():
            key = f"{agent} {label}"
            if thread.deleted:
                if log.stored.get(key) is not None:
                    problems.append(f"{key}: deleted, but still readable")
                continue
            expected[key] = thread.inputs
            optional[key] = thread.optional
            if thread.conv is not None and key in log.found_summaries:
                summaries[key] = (thread.summaries, log.found_summaries[key])
    for agent, threads in log.threads.items():
        convs = {t.conv: t for t in threads.values() if t.conv is not None}
        problems += check_archived(
            {c: (t.archived, t.deleted) for c, t in convs.items()},
            {c: log.found_archived.get(f"{agent} {t.label}") for c, t in convs.items()},
            {st: log.listed.get((agent, st), set()) for st in ("archived", "unarchived", "all")},
        )
    stored = {k: v for k, v in log.stored.items() if k in expected}
    problems += check_threads(expected, optional, stored)
    problems += check_summaries(summaries)
    problems += check_steps(log.steps, log.usage, log.stops)
    problems += check_feedback(log.feedback, log.found_feedback, log.rated, log.unrated)
    problems += check_open_files(log.opened)
    problems += check_agent_patches(log.patches)
    problems += check_shelf_search(log.shelf_searches)
    for agent, shelves in log.shelves.items():
        if agent in log.shelf_reads:
            model = {a.id: (a.attached, a.deleted) for a in shelves}
            problems += check_shelves(agent, model, log.shelf_reads[agent])
    return problems + log.problems


@invariant
def recall_consistent(ctx: WorkloadContext) -> None:
    """Recall search, threads, summaries and steps are what the client's model says; see
    :func:`check_recall_log`."""
    log: RecallLog = ctx.state["log"]
    problems = check_recall_log(log)
    shown = "; ".join(problems[:4]) + (f"; ... ({len(problems)} in all)" if problems[4:] else "")
    assert not problems, shown
