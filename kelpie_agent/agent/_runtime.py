"""An active agent's state in memory, and the only way it reaches storage.

State changes follow one rule: **compute, commit, then apply**. A change is written in one
fenced transaction (retried on conflicts and storage errors with the same keys and values, so a
retry after an ambiguous commit is harmless), and only after the commit succeeds is the
in-memory copy updated. If storage keeps failing, nothing in memory changes and the runtime
marks itself stale: the next request reloads everything from storage.
"""

from __future__ import annotations

import datetime as _dt
import zoneinfo
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import attrs
import trio

from kelpie_agent.sandbox import (
    Sandbox,
    SandboxRequest,
    SandboxState,
    agent_network,
)
from kelpie_agent.storage import ConflictError, StorageError, Transaction

from ._checkpoint import SessionCheckpoint
from ._codec import Keys, pack, unpack
from ._config import ActorContextLike, AgentEnv
from ._errors import AgentNotFoundError
from ._loading import load_blocks
from ._messages import AgentMessage
from ._models import AgentRecord, Block
from ._retry import Reader
from ._runs import run_record
from ._steps import StepRecord
from ._window import ContextWindow

__all__ = ["AgentRuntime", "format_time", "zone"]

T = TypeVar("T")


def zone(name: str) -> _dt.tzinfo:
    """The agent's time zone (UTC if the name is unknown)."""
    if name in ("", "UTC"):
        return _dt.UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return _dt.UTC


def format_time(epoch: float, timezone: str = "UTC") -> str:
    """Letta's time format: ``2026-01-01 09:30:00 AM UTC+0000``."""
    moment = _dt.datetime.fromtimestamp(epoch, tz=zone(timezone))
    return moment.strftime("%Y-%m-%d %I:%M:%S %p %Z%z")


class WriteLog:
    """A transaction that remembers what it wrote, to tell whether an ambiguous commit
    landed."""

    def __init__(self, txn: Transaction) -> None:
        self._txn = txn
        self.writes: dict[bytes, bytes | None] = {}
        self.before: dict[bytes, bytes | None] = {}  # what a key held when first read

    async def get(self, key: bytes) -> bytes | None:
        value = await self._txn.get(key)
        if key not in self.before and key not in self.writes:
            self.before[key] = value
        return value

    async def set(self, key: bytes, value: bytes) -> None:
        await self._txn.set(key, value)
        self.writes[key] = value

    async def delete(self, key: bytes) -> None:
        await self._txn.delete(key)
        self.writes[key] = None

    async def scan(
        self,
        start: bytes = b"",
        end: bytes | None = None,
        *,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[tuple[bytes, bytes]]:
        return await self._txn.scan(start, end, limit=limit, reverse=reverse)

    async def scan_prefix(
        self, prefix: bytes, *, limit: int | None = None, reverse: bool = False
    ) -> list[tuple[bytes, bytes]]:
        return await self._txn.scan_prefix(prefix, limit=limit, reverse=reverse)


class Thread:
    """One history of the agent, loaded: its own (``id`` is the agent's) or a conversation's
    (``id`` is the conversation's). It has its messages (the last ``history_window`` in
    memory), its run checkpoint and its context window; memory blocks, tools and archival
    memory are the agent's (docs/conversations.md)."""

    def __init__(self, thread_id: str, window: int, conversation: Any = None) -> None:
        self.id = thread_id
        self.keys = Keys(thread_id)
        self.history: deque[AgentMessage] = deque(maxlen=window)
        self.next_seq = 1
        self.session: SessionCheckpoint | None = None
        self.context = ContextWindow()  # what of the history is in context (_compaction)
        self.conversation = conversation  # its ConversationRecord; None for the agent's own


class AgentRuntime:
    """The live state of one agent actor. Requests run one at a time, each in one thread
    (:meth:`enter`): ``history``, ``session``, ``context`` and ``tkeys`` are the current
    thread's."""

    def __init__(self, ctx: ActorContextLike, env: AgentEnv) -> None:
        self.ctx = ctx
        self.env = env
        self.config = env.config
        self.agent_id = ctx.actor_id.id
        self.keys = Keys(self.agent_id)
        self.agent: AgentRecord | None = None
        self.blocks: dict[str, Block] = {}
        self.default = Thread(self.agent_id, self.config.history_window)
        self.threads: dict[str, Thread] = {}  # conversations loaded so far
        self.thread = self.default
        self.archive: Any = None  # _archive.Archive, loaded on first use
        self.sandbox: Sandbox | None = None
        self.sandbox_request: SandboxRequest | None = None
        self.image: Any = None  # _teleport.SandboxImage of the sandbox's saved files
        self.stale = True
        self.reader = Reader(
            ctx.kv,
            ctx.ports.rng,
            self.config.storage_attempts,
            self.config.storage_backoff,
            name=f"agent {self.agent_id}",
            on_give_up=self._mark_stale,
        )

    def _mark_stale(self) -> None:
        self.stale = True

    # -- the current thread ---------------------------------------------------------------------
    @property
    def history(self) -> deque[AgentMessage]:
        return self.thread.history

    @property
    def session(self) -> SessionCheckpoint | None:
        return self.thread.session

    @session.setter
    def session(self, cp: SessionCheckpoint | None) -> None:
        self.thread.session = cp

    @property
    def context(self) -> ContextWindow:
        return self.thread.context

    @context.setter
    def context(self, window: ContextWindow) -> None:
        self.thread.context = window

    @property
    def next_seq(self) -> int:
        return self.thread.next_seq

    @property
    def tkeys(self) -> Keys:
        """The keys of the current thread's history (messages, session, otids, context)."""
        return self.thread.keys

    @property
    def conversation_id(self) -> str | None:
        """The current thread's conversation (None: the agent's own history)."""
        return None if self.thread is self.default else self.thread.id

    async def enter(self, thread_id: str | None) -> Thread:
        """Make ``thread_id`` (a conversation of this agent; None: its own history) the
        current thread, loading it on first use."""
        if thread_id is None or thread_id == self.agent_id:
            self.thread = self.default
            return self.thread
        thread = self.threads.get(thread_id)
        if thread is None:
            from ._conversations import load_conversation

            record = await load_conversation(self, thread_id)
            thread = Thread(thread_id, self.config.history_window, record)
            await self._load_thread(thread)
            self.threads[thread_id] = thread
        self.thread = thread
        return thread

    def forget_thread(self, thread_id: str) -> None:
        """Drop a conversation's loaded state (deleted, or to be read again)."""
        self.threads.pop(thread_id, None)
        if self.thread.id == thread_id:
            self.thread = self.default

    # -- ports ----------------------------------------------------------------------------------
    def now(self) -> float:
        return self.ctx.ports.clock.now()

    def new_id(self, prefix: str) -> str:
        return self.ctx.ports.ids.new(prefix)

    async def hazard(self, site: str) -> None:
        """A risky point (``Hazards.point``): a simulation may delay or crash this node here."""
        await self.ctx.ports.hazards.point(site)

    def time_text(self) -> str:
        return format_time(self.now(), self.agent.timezone if self.agent else "UTC")

    def alloc_seq(self) -> int:
        seq = self.thread.next_seq
        self.thread.next_seq += 1
        return seq

    @property
    def paused_until(self) -> float | None:
        return self.session.paused_until if self.session is not None else None

    def require(self) -> AgentRecord:
        if self.agent is None:
            raise AgentNotFoundError(self.agent_id)
        return self.agent

    def ordered_blocks(self) -> list[Block]:
        agent = self.require()
        return [self.blocks[b] for b in agent.block_ids if b in self.blocks]

    def block_by_label(self, label: str) -> Block | None:
        return next((b for b in self.ordered_blocks() if b.label == label), None)

    # -- storage --------------------------------------------------------------------------------
    async def read(self, op: Callable[[], Awaitable[T]], what: str) -> T:
        """A read, retried on storage errors (then :class:`AgentStorageError`, and stale)."""
        return await self.reader(op, what)

    async def get(self, key: bytes, what: str) -> bytes | None:
        """One key, read with retries."""
        return await self.reader.get(key, what)

    async def commit(self, build: Callable[[Transaction], Awaitable[T]], what: str) -> T:
        """Run ``build`` in a fenced transaction until it commits; ``build`` must only compute
        and write (it may run several times).

        A commit can fail *after* it was applied (the connection drops before the answer:
        ``StorageUnavailableError``, FoundationDB's ``commit_unknown_result``). Running
        ``build`` again would then apply a non-idempotent change twice (a memory edit reads
        the block it edits), so before retrying, the runtime reads back what the failed
        commit wrote: if it is all there, the commit landed and its result stands."""
        attempts = self.config.storage_attempts
        for attempt in range(attempts):
            written: WriteLog | None = None
            try:
                async with self.ctx.transaction() as txn:
                    log = WriteLog(txn)
                    result = await build(log)
                    written = log  # build is done: an error from here on is the commit's
                return result
            except ConflictError as error:  # rolled back: nothing was applied
                failure: StorageError = error
            except StorageError as error:
                failure = error
                if written is not None and await self._landed(written, what):
                    return result
            if attempt + 1 == attempts:
                raise self.reader.give_up("writing", what, failure) from failure
            await self.reader.backoff(attempt)
        raise AssertionError("unreachable")

    async def _landed(self, written: WriteLog, what: str) -> bool:
        """Did a commit whose outcome is unknown apply ``written``? Its keys hold exactly the
        values it wrote (transactions apply whole or not at all).

        A memory block may be written by others meanwhile: the blocks API changes its
        description or limit outside the agent's actor. So a block counts as landed when it
        shows every field the commit changed (from the block the transaction read to the
        one it wrote), whatever its other fields hold; without this, a landed memory edit
        was taken as lost and run again on the block that already held it (DmemE-1). Only
        the fields the commit changed are evidence: a limit-only update that did not land
        leaves the value it did not change, and taking that for proof acknowledged an
        update the database never got (found by agent_api_surface's 1,000-seed sweep,
        Dlead10-4). A block the transaction did not read needs its exact bytes."""
        kv = self.ctx.kv
        for key, value in written.writes.items():
            stored = await self.read(lambda key=key: kv.get(key), f"what {what} wrote")  # type: ignore[misc]
            if stored != value and not _block_change_there(key, stored, value, written):
                return False
        return bool(written.writes)

    async def write(self, writes: Sequence[tuple[bytes, bytes | None]], what: str) -> None:
        """Commit ``writes`` in one transaction (a ``None`` value deletes the key)."""

        async def build(txn: Transaction) -> None:
            for key, value in writes:
                if value is None:
                    await txn.delete(key)
                else:
                    await txn.set(key, value)

        await self.commit(build, what)

    async def scan_all(self, prefix: bytes, what: str) -> list[tuple[bytes, bytes]]:
        """Every pair under ``prefix``, read in pages."""
        return await self.reader.scan_all(prefix, what)

    # -- loading --------------------------------------------------------------------------------
    async def load(self) -> None:
        """(Re)load everything from storage, as a fresh activation does (conversations are
        loaded again when next used)."""
        kv = self.ctx.kv
        keys = self.keys
        raw = await self.read(lambda: kv.get(keys.agent), "the agent record")
        self.agent = unpack(raw) if raw is not None else None
        self.blocks = {}
        self.default = Thread(self.agent_id, self.config.history_window)
        self.threads = {}
        self.thread = self.default
        self.archive = None
        if self.agent is not None:
            self.blocks = {b.id: b for b in await load_blocks(self.reader, self.agent)}
            await self._load_thread(self.default)
        self.stale = False

    async def _load_thread(self, thread: Thread) -> None:
        kv = self.ctx.kv
        keys = thread.keys
        window = self.config.history_window
        recent = await self.read(
            lambda: kv.scan_prefix(keys.messages, limit=window, reverse=True), "history"
        )
        for _, value in reversed(recent):
            thread.history.append(unpack(value))
        if thread.history:
            thread.next_seq = thread.history[-1].seq + 1
        raw = await self.read(lambda: kv.get(keys.session), "the session checkpoint")
        thread.session = unpack(raw) if raw is not None else None
        raw = await self.read(lambda: kv.get(keys.context), "the context window")
        thread.context = unpack(raw) if raw is not None else ContextWindow()

    async def refresh_blocks(self) -> None:
        """Read the agent's blocks again: shared blocks may have been edited elsewhere."""
        for block_id in self.require().block_ids:
            data = await self.get(Keys.block(block_id), f"block {block_id}")
            if data is not None:
                self.blocks[block_id] = unpack(data)
            else:
                self.blocks.pop(block_id, None)

    async def ensure_fresh(self) -> None:
        if self.stale:
            await self.load()

    # -- the sandbox ----------------------------------------------------------------------------
    async def get_sandbox(self) -> Sandbox:
        """The agent's sandbox, booted on first use (and again after it died). When the
        agent's allow-list (``metadata.sandbox_allow_hosts``) changed, a new sandbox with the
        new network takes over the files of the agent's last committed call (its image)."""
        factory = self.env.sandbox_factory
        if factory is None:
            raise RuntimeError("no sandbox is configured for this server")
        agent = self.require()
        try:
            request = SandboxRequest(agent.id, agent_network(agent.metadata))
        except ValueError as error:
            raise RuntimeError(str(error)) from None
        old = self.sandbox
        if old is not None and old.state in (SandboxState.RUNNING, SandboxState.PAUSED):
            if request == self.sandbox_request:
                if old.state is SandboxState.PAUSED:
                    await old.resume()
                return old
            # The network changed: the new sandbox takes the files of the last committed call
            # from the agent's image (teleport), as it would on another node.
            await self.close_sandbox()
        from ._teleport import restore_into

        self.sandbox, self.sandbox_request = factory(request), request
        await self.sandbox.boot()
        try:  # the agent's files from wherever it ran before (docs/teleport.md)
            self.image = await restore_into(self, self.sandbox)
        except BaseException:
            await self.close_sandbox()
            raise
        return self.sandbox

    async def close_sandbox(self) -> None:
        sandbox, self.sandbox, self.sandbox_request = self.sandbox, None, None
        if sandbox is not None:
            with trio.move_on_after(5):
                await sandbox.stop()

    # -- helpers used by several modules -------------------------------------------------------
    def checkpoint_writes(self, cp: SessionCheckpoint) -> list[tuple[bytes, bytes]]:
        """What a commit of run checkpoint ``cp`` writes: the checkpoint and the run's record
        (a session imported from another agent keeps the record its source wrote); in a
        conversation, its run marker too (``1`` while the run runs: an activation finds an
        interrupted run of any thread by it)."""
        writes = [(self.tkeys.session, pack(cp))]
        if cp.transferred_from is None:
            writes.append((Keys.run(cp.session_id), pack(run_record(cp))))
        if self.conversation_id is not None:
            marker = self.keys.open_run(self.conversation_id)
            writes.append((marker, b"1" if cp.running else b"0"))
        return writes

    def message_writes(self, messages: list[AgentMessage]) -> list[tuple[bytes, bytes]]:
        writes: list[tuple[bytes, bytes]] = []
        for message in messages:
            writes.append((self.tkeys.message(message.seq), pack(message)))
            writes.append((self.tkeys.message_id(message.id), pack(message.seq)))
        return writes

    def step_writes(self, step: StepRecord) -> list[tuple[bytes, bytes]]:
        """What a step's commit writes besides its messages: its record and index entry."""
        index = self.keys.step_index(step.created_at, step.number, step.id)
        return [(Keys.step(step.id), pack(step)), (index, b"")]

    def remember(self, messages: list[AgentMessage]) -> None:
        """Append committed messages to the current thread's in-memory window."""
        self.thread.history.extend(messages)


_BLOCK_FIELDS = tuple(
    f.name for f in attrs.fields(Block) if f.name not in ("created_at", "updated_at")
)
"""A block's fields that say what a write did (every writer stamps ``updated_at``)."""


def _block_change_there(
    key: bytes, stored: bytes | None, written: bytes | None, log: WriteLog
) -> bool:
    """Whether ``key`` is a memory block that still shows every field the commit changed
    (from what the transaction read to what it wrote), though other fields differ: the blocks
    API may have changed them since. Without the block as the transaction read it, what the
    commit changed is unknown, and nothing short of the exact bytes is proof."""
    before = log.before.get(key)
    if stored is None or written is None or before is None or not key.startswith(Keys.BLOCKS):
        return False
    try:
        old, new, now = unpack(before), unpack(written), unpack(stored)
        if not all(isinstance(b, Block) for b in (old, new, now)):
            return False
        changed = [name for name in _BLOCK_FIELDS if getattr(old, name) != getattr(new, name)]
        return all(getattr(now, name) == getattr(new, name) for name in changed)
    except Exception:  # not a block record after all: no proof
        return False
