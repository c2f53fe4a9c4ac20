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
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

from kelpie_agent.sandbox import Sandbox, SandboxState
from kelpie_agent.storage import ConflictError, StorageError, Transaction

from ._checkpoint import SessionCheckpoint
from ._codec import Keys, pack, unpack
from ._config import ActorContextLike, AgentEnv
from ._errors import AgentNotFoundError, AgentStorageError
from ._messages import AgentMessage
from ._models import AgentRecord, Block

__all__ = ["AgentRuntime", "format_time", "zone"]

T = TypeVar("T")
_PAGE = 500


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

    async def get(self, key: bytes) -> bytes | None:
        return await self._txn.get(key)

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


class AgentRuntime:
    """The live state of one agent actor."""

    def __init__(self, ctx: ActorContextLike, env: AgentEnv) -> None:
        self.ctx = ctx
        self.env = env
        self.config = env.config
        self.agent_id = ctx.actor_id.id
        self.keys = Keys(self.agent_id)
        self.agent: AgentRecord | None = None
        self.blocks: dict[str, Block] = {}
        self.history: deque[AgentMessage] = deque(maxlen=self.config.history_window)
        self.next_seq = 1
        self.session: SessionCheckpoint | None = None
        self.archive: Any = None  # _archive.Archive, loaded on first use
        self.sandbox: Sandbox | None = None
        self.stale = True

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
        seq = self.next_seq
        self.next_seq += 1
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
    async def _backoff(self, attempt: int) -> None:
        base = self.config.storage_backoff * (2 ** min(attempt, 6))
        await trio.sleep(base * (0.5 + 0.5 * self.ctx.ports.rng.random()))

    async def read(self, op: Callable[[], Awaitable[T]], what: str) -> T:
        """A read, retried on storage errors."""
        attempts = self.config.storage_attempts
        for attempt in range(attempts):
            try:
                return await op()
            except StorageError as error:
                if attempt + 1 == attempts:
                    self.stale = True
                    raise AgentStorageError(
                        f"agent {self.agent_id}: reading {what} failed {attempts} times: {error}"
                    ) from error
            await self._backoff(attempt)
        raise AssertionError("unreachable")

    async def get(self, key: bytes, what: str) -> bytes | None:
        """One key, read with retries."""
        kv = self.ctx.kv
        return await self.read(lambda: kv.get(key), what)

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
                self.stale = True
                raise AgentStorageError(
                    f"agent {self.agent_id}: writing {what} failed {attempts} times: {failure}"
                ) from failure
            await self._backoff(attempt)
        raise AssertionError("unreachable")

    async def _landed(self, written: WriteLog, what: str) -> bool:
        """Did a commit whose outcome is unknown apply ``written``? Its keys hold exactly the
        values it wrote (transactions apply whole or not at all)."""
        kv = self.ctx.kv
        for key, value in written.writes.items():
            stored = await self.read(lambda key=key: kv.get(key), f"what {what} wrote")  # type: ignore[misc]
            if stored != value:
                return False
        return bool(written.writes)

    async def write(self, writes: list[tuple[bytes, bytes]], what: str) -> None:
        async def build(txn: Transaction) -> None:
            for key, value in writes:
                await txn.set(key, value)

        await self.commit(build, what)

    async def scan_all(self, prefix: bytes, what: str) -> list[tuple[bytes, bytes]]:
        """Every pair under ``prefix``, read in pages."""
        kv = self.ctx.kv
        rows: list[tuple[bytes, bytes]] = []
        start = prefix
        end = Keys.prefix_end(prefix)
        while True:
            page = await self.read(lambda s=start: kv.scan(s, end, limit=_PAGE), what)  # type: ignore[misc]
            rows.extend(page)
            if len(page) < _PAGE:
                return rows
            start = page[-1][0] + b"\x00"

    # -- loading --------------------------------------------------------------------------------
    async def load(self) -> None:
        """(Re)load everything from storage, as a fresh activation does."""
        kv = self.ctx.kv
        keys = self.keys
        raw = await self.read(lambda: kv.get(keys.agent), "the agent record")
        self.agent = unpack(raw) if raw is not None else None
        self.blocks = {}
        self.history = deque(maxlen=self.config.history_window)
        self.session = None
        self.archive = None
        self.next_seq = 1
        if self.agent is not None:
            for block_id in self.agent.block_ids:
                key = Keys.block(block_id)
                data = await self.get(key, f"block {block_id}")
                if data is not None:
                    self.blocks[block_id] = unpack(data)
            window = self.config.history_window
            recent = await self.read(
                lambda: kv.scan_prefix(keys.messages, limit=window, reverse=True), "history"
            )
            for _, value in reversed(recent):
                self.history.append(unpack(value))
            if self.history:
                self.next_seq = self.history[-1].seq + 1
            raw = await self.read(lambda: kv.get(keys.session), "the session checkpoint")
            self.session = unpack(raw) if raw is not None else None
        self.stale = False

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
        """The agent's sandbox, booted on first use (and again after it died)."""
        factory = self.env.sandbox_factory
        if factory is None:
            raise RuntimeError("no sandbox is configured for this server")
        if self.sandbox is not None and self.sandbox.state in (
            SandboxState.RUNNING,
            SandboxState.PAUSED,
        ):
            if self.sandbox.state is SandboxState.PAUSED:
                await self.sandbox.resume()
            return self.sandbox
        self.sandbox = factory()
        await self.sandbox.boot()
        return self.sandbox

    async def close_sandbox(self) -> None:
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            with trio.move_on_after(5):
                await sandbox.stop()

    # -- helpers used by several modules -------------------------------------------------------
    def message_writes(self, messages: list[AgentMessage]) -> list[tuple[bytes, bytes]]:
        writes: list[tuple[bytes, bytes]] = []
        for message in messages:
            writes.append((self.keys.message(message.seq), pack(message)))
            writes.append((self.keys.message_id(message.id), pack(message.seq)))
        return writes

    def remember(self, messages: list[AgentMessage]) -> None:
        """Append committed messages to the in-memory window."""
        self.history.extend(messages)
