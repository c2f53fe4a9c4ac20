"""What every part of the service shares: the dispatcher, reads, and retrying agent requests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

from kelpie_agent.actors import ActorId, ActorStoppedError, Dispatcher, LeaseLostError
from kelpie_agent.agent import (
    AgentRecord,
    AgentStorageError,
    BlockStore,
    CancelTable,
    LoopConfig,
    Reader,
    ToolStore,
    load_agent,
)
from kelpie_agent.embeddings import Embedder, HashingEmbedder
from kelpie_agent.ports import Ports
from kelpie_agent.storage import KV, Transaction

from ._errors import NotFoundError, ServiceError, UnavailableError, translate
from ._scheduler import Scheduler
from ._types import ServiceOptions
from ._validate import ident

__all__ = ["SETTLED", "Observer", "ServiceBase", "ServiceReader"]

T = TypeVar("T")
Observer = Callable[..., None]
SETTLED: Any = object()  # a retried request found its earlier attempt had succeeded

KIND = "agent"


def _ignore(kind: str, **fields: Any) -> None:
    pass


def _guarded(observer: Observer) -> Observer:
    def observe(kind: str, **fields: Any) -> None:
        try:
            observer(kind, **fields)
        except Exception:  # an observer's failure never reaches a request
            pass

    return observe


class ServiceReader(Reader):
    """The agent core's retrying reader, failing as the service does: a read that storage
    kept refusing is an :class:`UnavailableError` (503), a node going down too."""

    async def __call__(self, op: Callable[[], Awaitable[T]], what: str) -> T:
        try:
            return await super().__call__(op, what)
        except (AgentStorageError, ConnectionError) as error:
            mapped = translate(error)
            assert mapped is not None
            raise mapped from error

    async def transact(self, build: Callable[[Transaction], Awaitable[T]], what: str) -> T:
        """A write the same way (step feedback, MCP server records): storage giving up is a
        503, not the agent core's ``AgentStorageError`` (Dlead11-5)."""
        try:
            return await super().transact(build, what)
        except (AgentStorageError, ConnectionError) as error:
            mapped = translate(error)
            assert mapped is not None
            raise mapped from error


class ServiceBase:
    """The dispatcher and KV of one node, and how requests reach agents."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        kv: KV,
        ports: Ports,
        *,
        loop_config: LoopConfig | None = None,
        options: ServiceOptions | None = None,
        observer: Observer | None = None,
        embedder: Embedder | None = None,
        cancels: CancelTable | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        # the node's embedder (its agents' archives use the same): tool search, models
        self.embedder: Embedder = embedder if embedder is not None else HashingEmbedder()
        self.kv = kv
        self.ports = ports
        self.node_id = dispatcher.node_id
        self.loop_config = loop_config if loop_config is not None else LoopConfig()
        self.options = options if options is not None else ServiceOptions()
        self.observe: Observer = _guarded(observer) if observer is not None else _ignore
        self.read = ServiceReader(
            kv, ports.rng, self.options.storage_attempts, self.options.storage_backoff
        )
        self.tool_store = ToolStore(kv, ports)
        self.block_store = BlockStore(kv, ports)
        self.mcp_servers: Any = None  # the node's ManagedMcp (set by open_agent_node)
        self._state = "new"  # -> running -> stopped
        # the node's run cancels, shared with its agents (AgentEnv.cancels) so that a run
        # resumed without its request still hears that request's cancel
        self.cancels: CancelTable = cancels if cancels is not None else CancelTable()
        self._nursery: trio.Nursery | None = None  # background work; lives as long as the node
        self.scheduler = Scheduler(self)  # sends scheduled messages (runs with the node)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the node's dispatcher until cancelled (``await nursery.start(service.run)``);
        requests are served only while it runs."""
        if self._state != "new":
            raise RuntimeError("AgentService.run can only be called once")
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.dispatcher.run)
                self._nursery = nursery
                self._state = "running"
                if self.options.scheduler:
                    self._spawn("the scheduler", self.scheduler.run)
                task_status.started()
        finally:
            self._state = "stopped"
            self._nursery = None

    def _spawn(self, what: str, fn: Callable[[], Awaitable[object]]) -> None:
        """Run ``fn`` in the background for as long as this node runs (a background run, a
        stream its consumer left). Its failure is reported to the observer, never raised."""
        self._check_running()
        assert self._nursery is not None

        async def guarded() -> None:
            try:
                await fn()
            except Exception as error:
                self.observe("service.background_error", what=what, error=repr(error))

        self._nursery.start_soon(guarded)

    @property
    def running(self) -> bool:
        return self._state == "running"

    def _check_running(self) -> None:
        if self._state != "running":
            what = "has not started" if self._state == "new" else "is stopping"
            raise UnavailableError(f"the agent service of node {self.node_id!r} {what}")

    # -- reads ---------------------------------------------------------------------------------
    async def _agent(self, agent_id: object, field: str = "agent_id") -> AgentRecord:
        """The stored agent record, or NotFoundError (InvalidError for a malformed id)."""
        self._check_running()
        agent = await load_agent(self.read, ident(agent_id, field))
        if agent is None:
            raise NotFoundError("agent", str(agent_id))
        return agent

    async def _store(self, op: Callable[[], Awaitable[T]], what: str, *, retry: bool) -> T:
        """A ToolStore/BlockStore call. Reads (``retry``) are retried on storage errors; the
        stores retry their own writes with identical keys and values."""
        self._check_running()
        try:
            if retry:
                return await self.read(op, what)
            return await op()
        except Exception as error:
            mapped = translate(error)
            if mapped is None or mapped is error:
                raise
            raise mapped from error

    # -- agent requests ------------------------------------------------------------------------
    async def _backoff(self, attempt: int, deadline: float) -> None:
        delay = self.options.retry_backoff * (2 ** min(attempt, 4))
        delay *= 0.5 + 0.5 * self.ports.rng.random()
        await trio.sleep(max(0.0, min(delay, deadline - trio.current_time())))

    async def _request(
        self,
        agent_id: str,
        message: object,
        *,
        retry_unknown: bool | Callable[[], bool] = True,
        idempotent: bool = True,
        settled: Callable[[ServiceError], bool] | None = None,
        attempt: Callable[[Any], Awaitable[Any]] | None = None,
    ) -> Any:
        """Send ``message`` to the agent's actor and return its answer, or raise a service
        error.

        A request that could not be served (the agent is held elsewhere, storage failed) is
        retried for ``request_timeout``. One whose outcome is unknown (a lost lease, storage
        giving up mid-way) is retried too if ``retry_unknown`` (safe for this very request
        object), else it fails at once; after such a retry, an error that ``settled`` accepts
        means the earlier attempt had succeeded: :data:`SETTLED` is returned. A final
        :class:`UnavailableError` with an unknown outcome tells the caller to retry only if
        the request is ``idempotent`` (repeating it cannot apply it twice).
        ``attempt(message)`` replaces the plain dispatcher request (streams use it)."""
        actor = ActorId(KIND, agent_id)
        deadline = trio.current_time() + self.options.request_timeout
        what = type(message).__name__
        unknown = False
        tries = 0
        last: ServiceError | None = None
        while True:
            if last is not None and not self.running:  # stopped while we were backing off
                why = f"agent {agent_id}: node {self.node_id} stopped while serving {what}"
                raise _unavailable(why, last, unknown, idempotent)
            self._check_running()
            try:
                if attempt is not None:
                    return await attempt(message)
                answer = await self.dispatcher.request(actor, message)
                if self._answer_lost(retry_unknown):
                    raise LeaseLostError(f"{what} was applied, but its answer was lost")
                return answer
            except Exception as error:
                mapped = translate(error)
                if mapped is None:
                    raise
                if unknown and settled is not None and settled(mapped):
                    return SETTLED
                if not isinstance(mapped, UnavailableError):
                    raise mapped from error
                unknown = unknown or isinstance(error, _UNKNOWN)
                may_retry = retry_unknown() if callable(retry_unknown) else retry_unknown
                if not self.running or isinstance(error, ConnectionError):
                    why = f"node {self.node_id} stopped while serving {what}"
                elif unknown and not may_retry:
                    why = f"{what} was interrupted"
                elif trio.current_time() >= deadline:
                    why = f"{what} could not be served in {self.options.request_timeout:g}s"
                else:
                    last = mapped
                    self.observe("service.retry", agent=agent_id, request=what, error=repr(error))
                    await self._backoff(tries, deadline)
                    tries += 1
                    continue
                raise _unavailable(
                    f"agent {agent_id}: {why}", mapped, unknown, idempotent
                ) from error

    def _answer_lost(self, retry_unknown: bool | Callable[[], bool]) -> bool:
        """BUGGIFY (``service.answer_lost``): a request was applied, but its answer is lost on
        the way back, as when the lease lapses or the connection drops after the commit. Only
        for requests this loop would repeat, so the caller sees nothing unless repeating one
        is not as safe as ``retry_unknown`` and ``settled`` claim. Production: never."""
        if not (retry_unknown() if callable(retry_unknown) else retry_unknown):
            return False
        return self.ports.hazards.buggify("service.answer_lost")


_UNKNOWN = (LeaseLostError, ActorStoppedError, AgentStorageError, ConnectionError)


def _unavailable(
    why: str, cause: ServiceError, unknown: bool, idempotent: bool
) -> UnavailableError:
    if not unknown:
        return UnavailableError(f"{why} ({cause.detail})")
    advice = "retry it" if idempotent else "repeating it could apply it twice"
    return UnavailableError(
        f"{why}; its outcome is unknown, {advice} ({cause.detail})",
        outcome_unknown=True,
        retryable=idempotent,
    )
