"""An idle agent's memory is the database's: the COHERENCE oracle (``coherence``, session 15).

The agent runtime changes its state by one rule, "compute, commit, then apply"
(``kelpie_agent/agent/_runtime.py``): a change is committed in one transaction and only then
applied to the copy in memory, and when storage gives up the runtime marks itself stale and
reloads. So whenever an activation is **idle** (no message being handled, none queued), still
holds its lease, and is not stale, what it keeps in memory must be what the database holds:

* the agent record;
* for its own history and each conversation it has loaded: the messages in its window (the
  last ones stored, in order), a next sequence number above every stored one, the run
  checkpoint, the context window, and for a conversation, that its record still exists and is
  the one in memory;
* its archival passages, once loaded;
* the summary a thread's context window starts from is the message the thread stores at its
  seq (a fork's copy carries the copy's id).

Memory blocks are not judged here: the blocks API edits them outside the agent's actor, and
the runtime reads them again before it uses them (``_agent_fresh`` judges what it shows).

A runtime that forgets to apply a committed change, applies one that did not commit, keeps a
deleted conversation, or loads differently from how it keeps, is caught the moment the request
that did it returns, whether or not any later read would show it. The audit runs in the
server's own request path (an :class:`AgentService` subclass, ``open_agent_node``'s
``service_class``), after each request to an agent returns. It reads the database host's
store directly, awaits nothing and draws no random number, so it moves no seed.

Since session 17 (rtM) the same invariant also judges the store against itself: every index
written in its record's transaction names exactly its records (``_agent_indexes``), checked
after every request to an agent and once the run is over (a pure read as well).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kelpie_agent.actors import ActorId
from kelpie_agent.actors._lease import OWNER, actor_key, decode_owner
from kelpie_agent.agent import Keys
from kelpie_agent.agent._codec import unpack
from kelpie_agent.service import AgentService
from kelpie_agent.storage import ChecksumError

from ..scenario import WorkloadContext, invariant
from ..shims import open_kv
from ._agent_indexes import index_problems

__all__ = ["CoherenceAudit", "audited_service", "coherence_options", "memory_matches_storage"]

_MAX_PROBLEMS = 20


class CoherenceAudit:
    """Compares idle activations with the store; ``problems`` lists what differed."""

    def __init__(self, store: Callable[[], Any]) -> None:
        self.store = store  # the database host's SimKVStore
        self.problems: list[str] = []
        self.audits = 0
        self.index_problems: list[str] = []  # the first disagreement of the store's indexes
        self.index_audits = 0

    def check_indexes(self, when: str) -> None:
        """The store's indexes against its records (``_agent_indexes``); keeps the first
        disagreement seen. A pure read of the committed store: any moment is a fair one."""
        if self.index_problems:
            return
        self.index_audits += 1
        found = index_problems(self.store())
        if found:
            self.index_problems = [f"{when}: {text}" for text in found]

    def check(self, service: AgentService, agent_id: str) -> None:
        self.check_indexes(f"after a request to {agent_id} returned on {service.node_id}")
        activation = service.dispatcher._registry.get(ActorId("agent", agent_id))
        if activation is None or activation.state != "active":
            return
        if activation._current is not None or activation._queue:
            return  # busy: between a commit and its apply, memory may lag
        actor = activation._actor
        rt = getattr(getattr(actor, "inner", actor), "_rt", None)
        if rt is None or rt.stale or rt.agent is None:
            return
        store = self.store()
        try:
            owner = decode_owner(store._get(actor_key(OWNER, activation.actor_id)))
            held = activation.held
            if owner is None or held is None or owner.token != held.token:
                return  # taken over: this activation will find out at its next commit
            self.audits += 1
            self._compare(rt, store, f"{service.node_id}/{agent_id}")
        except ChecksumError:  # a corrupted frame (storage.corruption): not judged
            return

    def _problem(self, text: str) -> None:
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append(text)

    def _compare(self, rt: Any, store: Any, who: str) -> None:
        keys = Keys(rt.agent_id)
        stored = _load(store, keys.agent)
        if stored != rt.agent:
            self._problem(f"{who}: the agent record in memory is not the stored one")
            return
        self._thread(rt.default, store, who, rt.config.history_window)
        for thread_id, thread in sorted(rt.threads.items()):
            record = _load(store, Keys.conversation(thread_id))
            where = f"{who} conversation {thread_id}"
            if record is None:
                self._problem(f"{where}: loaded in memory, but not stored (deleted?)")
                continue
            if thread.conversation is not None and record != thread.conversation:
                self._problem(f"{where}: its record in memory is not the stored one")
            self._thread(thread, store, where, rt.config.history_window)
        archive = rt.archive
        if archive is not None:
            rows = store._scan(keys.passages, Keys.prefix_end(keys.passages), None, False)
            stored_ids = sorted(unpack(v).id for _, v in rows)
            if stored_ids != sorted(archive.records):
                missing = sorted(set(stored_ids) - set(archive.records))[:3]
                extra = sorted(set(archive.records) - set(stored_ids))[:3]
                self._problem(
                    f"{who}: the archive in memory differs from the stored passages "
                    f"(stored, not in memory: {missing}; in memory, not stored: {extra})"
                )

    def _thread(self, thread: Any, store: Any, who: str, window: int) -> None:
        keys = thread.keys
        rows = store._scan(keys.messages, Keys.prefix_end(keys.messages), window, True)
        stored = [unpack(v) for _, v in reversed(rows)]
        memory = list(thread.history)
        if [m.seq for m in memory] != [m.seq for m in stored[len(stored) - len(memory) :]]:
            self._problem(
                f"{who}: the history window in memory holds seqs "
                f"{_seqs(memory)}, the last stored are {_seqs(stored)}"
            )
        elif memory != stored[len(stored) - len(memory) :]:
            tail = stored[len(stored) - len(memory) :]
            wrong = next(m.seq for m, s in zip(memory, tail, strict=True) if m != s)
            self._problem(f"{who}: message {wrong} in memory is not the stored one")
        if len(memory) < len(stored) and len(memory) < window:
            self._problem(
                f"{who}: {len(memory)} messages in memory of a window of {window}, "
                f"{len(stored)}+ stored"
            )
        last = stored[-1].seq if stored else 0
        if thread.next_seq <= last:  # above is fine: a reset deletes messages, seqs go on
            self._problem(f"{who}: the next seq in memory is {thread.next_seq}, stored to {last}")
        session = _load(store, keys.session)
        if session != thread.session:
            self._problem(f"{who}: the run checkpoint in memory is not the stored one")
        context = _load(store, keys.context)
        if context is not None and context != thread.context:
            self._problem(f"{who}: the context window in memory is not the stored one")
        summary = getattr(context, "summary", None)
        if summary is not None:  # the summary a prompt starts from is a message of the thread
            there = _load(store, keys.message(summary.seq))
            if there is None or there.id != summary.id:
                self._problem(
                    f"{who}: the context's summary {summary.id!r} (seq {summary.seq}) is not "
                    f"the thread's stored message {getattr(there, 'id', None)!r}"
                )


def _load(store: Any, key: bytes) -> Any:
    raw = store._get(key)
    return None if raw is None else unpack(raw)


def _seqs(messages: list[Any]) -> str:
    seqs = [m.seq for m in messages]
    return str(seqs) if len(seqs) <= 6 else f"[{seqs[0]}..{seqs[-1]}] ({len(seqs)})"


def audited_service(audit: CoherenceAudit) -> type[AgentService]:
    """An :class:`AgentService` that audits the agent after each request to it returns."""

    class AuditedService(AgentService):
        async def _request(self, agent_id: str, message: object, **options: Any) -> Any:
            result = await super()._request(agent_id, message, **options)
            audit.check(self, agent_id)
            return result

    return AuditedService


def coherence_options(ctx: WorkloadContext, db: Any) -> dict[str, Any]:
    """``open_agent_node`` keywords that audit every node of this run against database host
    ``db`` (one audit per run, kept in ``ctx.state["coherence"]``)."""
    audit = ctx.state.get("coherence")
    if audit is None:
        audit = ctx.state["coherence"] = CoherenceAudit(lambda: open_kv(db).store)
    return {"service_class": audited_service(audit)}


@invariant
def memory_matches_storage(ctx: WorkloadContext) -> None:
    """Whenever a request to an agent returns and its activation is idle, still holds the
    lease and is not stale, the agent's state in memory is the stored one (see the module)."""
    audit: CoherenceAudit | None = ctx.state.get("coherence")
    if audit is None and ctx.state.get("coherence_skipped"):
        ctx.metric("coherence.audits", 0)  # e.g. agent_chaos --set workload.params.via=direct
        return
    assert audit is not None, "memory_matches_storage: this workload's nodes are not audited"
    ctx.metric("coherence.audits", audit.audits)
    problems = audit.problems
    shown = "; ".join(problems[:4]) + (f"; ... ({len(problems)} in all)" if problems[4:] else "")
    assert not problems, f"an idle agent's memory differs from the database: {shown}"
    # ... and the database agrees with itself: every index names exactly its records
    # (session 17, rtM; _agent_indexes.py). A pure read of the store once the run is over.
    audit.check_indexes("once the run was over")
    ctx.metric("coherence.index_audits", audit.index_audits)
    indexes = audit.index_problems
    shown = "; ".join(indexes[:4]) + (f"; ... ({len(indexes)} in all)" if indexes[4:] else "")
    assert not indexes, f"the database's indexes disagree with its records: {shown}"
