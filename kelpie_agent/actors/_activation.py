"""One activation of one actor: its lease, its mailbox and the task that serves it.

Life: acquire the lease -> ``activate`` -> serve messages one at a time -> (idle, handoff,
requested) ``deactivate`` -> release the lease. A lease that is lost (or lapses) ends the
activation at once, without ``deactivate``. The activation task runs in the dispatcher's
nursery, so a caller that stops waiting never interrupts a message in progress.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable
from typing import Any, Protocol

import trio

from kelpie_agent.ports import Ports
from kelpie_agent.storage import KV

from ._context import ActorContext
from ._errors import ActorStoppedError, LeaseLostError
from ._protocol import Held, Leases, Observer
from ._types import Actor, ActorFactory, ActorId, DispatcherOptions

__all__ = ["Activation", "Envelope", "Host"]


class Host(Protocol):
    """What an activation needs from its dispatcher."""

    kv: KV
    ports: Ports
    node_id: str
    options: DispatcherOptions
    leases: Leases
    observe: Observer

    def factory(self, kind: str) -> ActorFactory: ...

    def unregister(self, activation: Activation) -> None: ...

    async def request(self, actor_id: ActorId, message: Any) -> Any: ...


class Envelope:
    """One request in a mailbox, and where its outcome goes."""

    __slots__ = ("abandoned", "bounced", "done", "error", "message", "started", "value")

    def __init__(self, message: Any) -> None:
        self.message = message
        self.done = trio.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        self.started = False  # handed to the actor: its caller must not retry blindly
        self.abandoned = False  # the caller stopped waiting before it started: skip it
        self.bounced = False  # never processed: the caller may send it again

    def finish(self, value: Any) -> None:
        self.value = value
        self.done.set()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.done.set()

    def bounce(self) -> None:
        self.bounced = True
        self.done.set()


class Activation:
    def __init__(self, host: Host, actor_id: ActorId) -> None:
        self.host = host
        self.actor_id = actor_id
        self.state = "starting"  # -> active -> stopping -> stopped
        self.held: Held | None = None
        self.stopped = trio.Event()
        self.deactivate_error: BaseException | None = None
        self.attempted = trio.Event()  # set after each deactivation attempt (and at the end)
        self._queue: deque[Envelope] = deque()
        self._lot = trio.lowlevel.ParkingLot()
        self._stop: str | None = None  # "explicit" or "handoff"
        self._lost: str | None = None
        self._invalid = False
        self._actor: Actor | None = None
        self._needs_deactivate = False
        self._current: Envelope | None = None
        self._failure: BaseException | None = None  # why the activation could not start
        self._scope: trio.CancelScope | None = None  # around the current activate/handle
        self._served = 0
        self._last_active = trio.current_time()

    # -- the lease, as ActorContext sees it ----------------------------------------------------

    @property
    def epoch(self) -> int:
        return self.held.epoch if self.held is not None else 0

    @property
    def token(self) -> str:
        return self.held.token if self.held is not None else ""

    def lease_usable(self) -> bool:
        held = self.held
        return self._lost is None and held is not None and trio.current_time() < held.valid_until

    def lease_lost(self, why: str) -> None:
        if self._lost is None:
            self._lost = why
            self.host.observe("actor.lease_lost", actor=str(self.actor_id), why=why)
            if self._scope is not None:
                self._scope.cancel()
            self._lot.unpark_all()

    def invalidate(self) -> None:
        self._invalid = True

    # -- requests from the dispatcher ----------------------------------------------------------

    def enqueue(self, envelope: Envelope) -> None:
        self._queue.append(envelope)
        self._lot.unpark_all()

    def request_stop(self, reason: str) -> None:
        if self._stop != "explicit":
            self._stop = reason
        self._lot.unpark_all()

    # -- the activation task -------------------------------------------------------------------

    async def run(self) -> None:
        host = self.host
        try:
            try:
                self.held = await host.leases.acquire(self.actor_id)
            except Exception as error:  # unavailable, or the store failed: nothing started
                self._fail_waiting(error)
                return
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._keep_lease)
                await self._live()
                nursery.cancel_scope.cancel()
        except Exception as error:  # a bug in the runtime: never take the dispatcher down
            host.observe("actor.crashed", actor=str(self.actor_id), error=repr(error))
            self._fail_waiting(error)
        finally:
            await self._clean_up()

    async def _live(self) -> None:
        host = self.host
        ctx = ActorContext(self.actor_id, host.kv, host.ports, host.node_id, self, host.request)
        try:
            actor = host.factory(self.actor_id.kind)(self.actor_id)
            if not await self._guarded(actor.activate(ctx)):
                return
        except Exception as error:
            host.observe("actor.activate_failed", actor=str(self.actor_id), error=repr(error))
            self._fail_waiting(error)
            return
        self._actor = actor
        self._needs_deactivate = True
        self.state = "active"
        self._last_active = trio.current_time()
        host.observe("actor.activated", actor=str(self.actor_id), epoch=self.epoch)
        while True:
            reason = await self._serve(actor)
            if reason in ("lost", "invalidated"):
                self._needs_deactivate = False
                return
            self.state = "stopping"
            self.deactivate_error = None
            try:
                completed = await self._guarded(actor.deactivate())
            except Exception as error:
                self.deactivate_error = error
                host.observe("actor.deactivate_failed", actor=str(self.actor_id), error=repr(error))
                if isinstance(error, LeaseLostError):
                    self.lease_lost(str(error))
                    self._needs_deactivate = False
                    return
                # Unsaved state would be lost: stay active and try again later.
                self.state = "active"
                self._stop = None
                self._last_active = trio.current_time()
                self.attempted.set()
                self.attempted = trio.Event()
                continue
            self._needs_deactivate = False
            if completed:
                host.observe("actor.deactivated", actor=str(self.actor_id), reason=reason)
            return

    async def _guarded(self, call: Awaitable[Any]) -> bool:
        """Run ``activate``/``deactivate`` under the lease's deadline; False if it lapsed."""
        assert self.held is not None
        with trio.CancelScope(deadline=self.held.valid_until) as scope:
            self._scope = scope
            try:
                await call
            finally:
                self._scope = None
        if scope.cancel_called:
            self.lease_lost("the lease lapsed")
            return False
        return True

    async def _serve(self, actor: Actor) -> str:
        opts = self.host.options
        while True:
            if self._lost is not None:
                return "lost"
            if self._invalid:
                return "invalidated"
            if self._stop == "explicit":
                return "explicit"
            pending = self._next()
            if self._stop == "handoff" and (self._served or pending is None):
                if pending is not None:
                    self._queue.appendleft(pending)
                return "handoff"
            if pending is None:
                with trio.move_on_at(self._last_active + opts.idle_timeout):
                    await self._lot.park()
                    continue
                if not self._queue and self._stop is None:
                    return "idle"
                continue
            assert self.held is not None
            if trio.current_time() >= self.held.valid_until:
                # Past the lease's local deadline before the request started (a process that
                # was paused thaws here): another node may own the actor by now, and a handler
                # would answer from memory that may be stale (Dlead11-4). Never started, so it
                # is bounced with the rest of the queue, to be served by the lease's holder.
                self._queue.appendleft(pending)
                self.lease_lost("the lease lapsed before the request started")
                continue
            await self._process(actor, pending)

    def _next(self) -> Envelope | None:
        while self._queue:
            envelope = self._queue.popleft()
            if not envelope.abandoned:
                return envelope
        return None

    async def _process(self, actor: Actor, envelope: Envelope) -> None:
        assert self.held is not None
        envelope.started = True
        self._current = envelope
        self._served += 1
        try:
            with trio.CancelScope(deadline=self.held.valid_until) as scope:
                self._scope = scope
                value = await actor.handle(envelope.message)
        except LeaseLostError as error:
            self.lease_lost(str(error))
            envelope.fail(error)
        except Exception as error:
            envelope.fail(error)
        else:
            if scope.cancelled_caught:
                envelope.fail(self._unknown_outcome())
            else:
                envelope.finish(value)
        finally:
            self._scope = None
            self._last_active = trio.current_time()
        self._current = None  # left set when cancelled from outside: _clean_up settles it
        if scope.cancel_called:
            self.lease_lost("the lease lapsed while a message was being handled")

    def _unknown_outcome(self) -> LeaseLostError:
        return LeaseLostError(
            f"actor {self.actor_id}: lost its lease while handling the request "
            f"({self._lost or 'the lease lapsed'}); its outcome is unknown"
        )

    async def _keep_lease(self) -> None:
        """Renew the lease every ``renew_every``; retry failures every ``poll_interval`` until
        the lease's local deadline, then give it up."""
        host, held, opts = self.host, self.held, self.host.options
        assert held is not None
        next_at = trio.current_time() + opts.renew_every
        while self._lost is None:
            await trio.sleep_until(min(next_at, held.valid_until))
            await host.ports.hazards.point("actors.renew")  # a late renewal lets the lease lapse
            before = held.valid_until
            with trio.move_on_at(held.valid_until):
                try:
                    if not await host.leases.renew(self.actor_id, held):
                        self.lease_lost("another activation owns the lease now")
                        return
                except Exception as error:  # storage trouble (or a crashed node): retry
                    host.observe("actor.renew_failed", actor=str(self.actor_id), error=repr(error))
            now = trio.current_time()
            if now >= held.valid_until:
                self.lease_lost("could not renew the lease in time")
                return
            if held.valid_until > before:
                if self._scope is not None:
                    self._scope.deadline = held.valid_until
                next_at = now + opts.renew_every
            else:
                next_at = now + opts.poll_interval

    # -- ending --------------------------------------------------------------------------------

    def abort(self) -> None:
        """End an activation whose task never started (its dispatcher stopped first)."""
        self._finish()

    def _fail_waiting(self, error: BaseException) -> None:
        """Fail the waiting requests with ``error`` once the activation has ended (after its
        lease is released, so a caller that retries at once does not find it held)."""
        self._failure = error

    async def _clean_up(self) -> None:
        """Deactivate if nobody did (the dispatcher is stopping), release the lease, and settle
        every request still waiting. Shielded, bounded by ``shutdown_timeout``."""
        host = self.host
        self.state = "stopping"
        current, self._current = self._current, None
        if current is not None:  # interrupted mid-message: its state is suspect
            self._needs_deactivate = False
            current.fail(
                ActorStoppedError(
                    f"actor {self.actor_id}: the dispatcher stopped while handling the request; "
                    "its outcome is unknown"
                )
            )
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + host.options.shutdown_timeout
            actor = self._actor
            if actor is not None and self._needs_deactivate and self.lease_usable():
                try:
                    if await self._guarded(actor.deactivate()):
                        host.observe("actor.deactivated", actor=str(self.actor_id), reason="stop")
                except Exception as error:
                    host.observe(
                        "actor.deactivate_failed", actor=str(self.actor_id), error=repr(error)
                    )
            if self.held is not None:
                await host.ports.hazards.point("actors.release")  # deactivated, still held
                try:
                    await host.leases.release(self.actor_id, self.held)
                except Exception as error:  # it expires on its own
                    host.observe(
                        "actor.release_failed", actor=str(self.actor_id), error=repr(error)
                    )
        self._finish()

    def _finish(self) -> None:
        self.state = "stopped"
        self.host.unregister(self)
        while self._queue:
            envelope = self._queue.popleft()
            if self._failure is not None:
                envelope.fail(self._failure)
            else:
                envelope.bounce()
        self.stopped.set()
        self.attempted.set()
