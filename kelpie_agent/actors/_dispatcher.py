"""The Dispatcher: a node's registry of activations, request routing and background work."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import trio

from kelpie_agent.ports import Ports
from kelpie_agent.storage import KV

from ._activation import Activation, Envelope
from ._errors import ActorStoppedError, ActorUnavailableError, UnknownActorKindError
from ._protocol import Leases, Observer
from ._types import ActorFactory, ActorId, DispatcherOptions

__all__ = ["Dispatcher"]


def _ignore(kind: str, **fields: Any) -> None:
    pass


def _guarded(observer: Observer) -> Observer:
    """An observer whose own failures never reach the runtime."""

    def observe(kind: str, **fields: Any) -> None:
        try:
            observer(kind, **fields)
        except Exception:
            pass

    return observe


class Dispatcher:
    """Virtual actors on one node: activates them on demand, one mailbox each, and keeps single
    activation across nodes with leases in the shared KV (see docs/actors.md).

    ``observer(kind, **fields)``, if given, is told about lease and lifecycle events
    (``actor.acquired``, ``actor.lease_lost``, ``actor.deactivated``, ...); in a simulation pass
    ``kelpie_dst.log`` to put them in the trace.
    """

    def __init__(
        self,
        kv: KV,
        ports: Ports,
        *,
        node_id: str,
        factories: Mapping[str, ActorFactory],
        options: DispatcherOptions | None = None,
        observer: Observer | None = None,
    ) -> None:
        if not isinstance(node_id, str) or not node_id:
            raise ValueError(f"Dispatcher node_id must be a non-empty string, got {node_id!r}")
        for kind in factories:
            ActorId(kind, "x")  # the same rule as ActorId.kind, with its message
        self.kv = kv
        self.ports = ports
        self.node_id = node_id
        self.options = options if options is not None else DispatcherOptions()
        self.observe: Observer = _guarded(observer) if observer is not None else _ignore
        self.session = ports.ids.new("dispatcher")
        self.leases = Leases(kv, ports, node_id, self.session, self.options, self.observe)
        self._factories = dict(factories)
        self._registry: dict[ActorId, Activation] = {}
        self._spawn: trio.MemorySendChannel[Activation] | None = None
        self._state = "new"  # -> running -> stopped

    # -- Host (for activations) ----------------------------------------------------------------

    def factory(self, kind: str) -> ActorFactory:
        return self._factories[kind]

    def unregister(self, activation: Activation) -> None:
        if self._registry.get(activation.actor_id) is activation:
            del self._registry[activation.actor_id]

    # -- public API ----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled: hosts the activations, and hands actors over to other nodes
        that ask for them. When cancelled, it deactivates every actor that is between messages
        (an interrupted message's caller gets ActorStoppedError), releases every lease, and
        fails waiting requests with ActorStoppedError, within ``shutdown_timeout``."""
        if self._state != "new":
            raise RuntimeError("Dispatcher.run can only be called once per Dispatcher")
        send, receive = trio.open_memory_channel[Activation](math.inf)
        async with trio.open_nursery() as nursery:
            self._spawn = send
            self._state = "running"
            try:
                # Activations start from this task's context, not from the first caller's, so
                # they carry the dispatcher's context variables (a simulated node, say).
                nursery.start_soon(self._spawner, receive, nursery)
                task_status.started()
                await self._watch_handoffs()
            finally:
                self._state = "stopped"
                send.close()
                while True:
                    try:
                        receive.receive_nowait().abort()  # created but never started
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break

    async def request(self, actor_id: ActorId, message: Any) -> Any:
        """Send ``message`` to the actor and return its response (or raise its exception).

        Activates the actor if needed (waiting at most ``acquire_timeout`` for another node to
        hand it over: ActorUnavailableError). If the caller is cancelled before the actor took
        the message, the actor never sees it; once taken, it is handled to the end and the
        response is dropped.
        """
        if not isinstance(actor_id, ActorId):
            raise TypeError(f"actor_id must be an ActorId, not {type(actor_id).__name__}")
        if actor_id.kind not in self._factories:
            known = ", ".join(sorted(self._factories)) or "none"
            raise UnknownActorKindError(
                f"no factory for actor kind {actor_id.kind!r} (known kinds: {known})"
            )
        deadline = trio.current_time() + self.options.acquire_timeout
        while True:
            activation = self._activation(actor_id)
            envelope = Envelope(message)
            activation.enqueue(envelope)
            try:
                await envelope.done.wait()
            except BaseException:
                envelope.abandoned = True
                raise
            if envelope.error is not None:
                raise envelope.error
            if not envelope.bounced:
                return envelope.value
            # The activation ended before taking the message (idle, handoff, lease lost): the
            # actor never saw it, so sending it again is safe.
            if trio.current_time() >= deadline:
                raise ActorUnavailableError(
                    f"actor {actor_id}: no activation took the request within "
                    f"{self.options.acquire_timeout}s"
                )

    async def deactivate(self, actor_id: ActorId) -> None:
        """Deactivate the actor now (after its current message), persisting its state and
        releasing its lease. Raises the actor's exception if ``deactivate`` failed: the actor
        then stays active, unless the exception is LeaseLostError (the activation is gone and
        its unsaved state with it). A no-op for an actor that is not active here."""
        activation = self._registry.get(actor_id)
        if activation is None:
            await trio.lowlevel.checkpoint()
            return
        activation.request_stop("explicit")
        await activation.attempted.wait()
        if activation.deactivate_error is not None:
            raise activation.deactivate_error

    def active(self) -> tuple[ActorId, ...]:
        """The actors activated on this node now, in activation order."""
        return tuple(
            aid for aid, activation in self._registry.items() if activation.state != "starting"
        )

    # -- internals -----------------------------------------------------------------------------

    def _activation(self, actor_id: ActorId) -> Activation:
        if self._state != "running" or self._spawn is None:
            what = "has not started" if self._state == "new" else "has stopped"
            raise ActorStoppedError(
                f"the dispatcher of node {self.node_id!r} {what}; cannot reach actor {actor_id}"
            )
        activation = self._registry.get(actor_id)
        if activation is None:
            activation = Activation(self, actor_id)
            self._registry[actor_id] = activation
            self._spawn.send_nowait(activation)
        return activation

    @staticmethod
    async def _spawner(
        receive: trio.MemoryReceiveChannel[Activation], nursery: trio.Nursery
    ) -> None:
        async for activation in receive:
            nursery.start_soon(activation.run, name=f"kelpie_agent.actor[{activation.actor_id}]")

    async def _watch_handoffs(self) -> None:
        """Every ``poll_interval``, look for other nodes' requests to hand over our actors."""
        while True:
            await trio.sleep(self.options.poll_interval)
            held = {
                aid: activation.held.token
                for aid, activation in self._registry.items()
                if activation.state == "active" and activation.held is not None
            }
            if not held:
                continue
            try:
                wanted = await self.leases.handoff_requests(held)
            except Exception as error:  # storage trouble: look again next time
                self.observe("actor.handoff_scan_failed", error=repr(error))
                continue
            for aid in wanted:
                activation = self._registry.get(aid)
                if (
                    activation is not None
                    and activation.held is not None
                    and activation.held.token == held[aid]
                ):
                    self.observe("actor.handoff", actor=str(aid), epoch=activation.epoch)
                    activation.request_stop("handoff")
