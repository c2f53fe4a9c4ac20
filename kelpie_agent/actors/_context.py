"""What an actor is given when it activates: its address, the ports, and fenced transactions."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import trio

from kelpie_agent.ports import Ports
from kelpie_agent.storage import KV, Transaction

from ._errors import LeaseLostError
from ._lease import OWNER, actor_key, decode_owner
from ._types import ActorId

__all__ = ["ActorContext"]


class _Lease(Protocol):
    """The activation's view of its lease (implemented by the runtime)."""

    @property
    def epoch(self) -> int: ...

    @property
    def token(self) -> str: ...

    def lease_usable(self) -> bool: ...

    def lease_lost(self, why: str) -> None: ...

    def invalidate(self) -> None: ...


class ActorContext:
    """Handed to :meth:`Actor.activate`; valid for that one activation.

    ``kv`` reads are unfenced (a stale read is harmless); every *write* of actor state must go
    through :meth:`transaction`, which is what keeps a node that lost the lease from
    overwriting the new owner's state.
    """

    def __init__(
        self,
        actor_id: ActorId,
        kv: KV,
        ports: Ports,
        node_id: str,
        lease: _Lease,
        request: Callable[[ActorId, Any], Awaitable[Any]],
    ) -> None:
        self.actor_id = actor_id
        self.kv = kv
        self.ports = ports
        self.node_id = node_id
        self._lease = lease
        self._request = request

    @property
    def epoch(self) -> int:
        """This activation's lease epoch: it grows with every activation of the actor."""
        return self._lease.epoch

    @property
    def activation_id(self) -> str:
        """A token unique to this activation (the lease record names it)."""
        return self._lease.token

    def transaction(self) -> AbstractAsyncContextManager[Transaction]:
        """A KV transaction fenced by this activation's lease.

        It reads the lease's owner record inside the transaction and raises
        :class:`LeaseLostError` (writing nothing) if another activation owns the actor now, or
        if this node's own deadline for the lease has passed. Because the record is read in the
        transaction, a takeover that commits before this transaction does makes it fail with
        ``ConflictError`` (retry it: the retry then raises ``LeaseLostError``). Other storage
        errors propagate as usual.
        """
        return self._fenced()

    @asynccontextmanager
    async def _fenced(self) -> AsyncIterator[Transaction]:
        lease = self._lease
        if not lease.lease_usable():
            raise LeaseLostError(f"actor {self.actor_id}: this activation's lease has lapsed")
        async with self.kv.transaction() as txn:
            owner = decode_owner(await txn.get(actor_key(OWNER, self.actor_id)))
            if owner is None or owner.token != lease.token:
                holder = "nobody" if owner is None or owner.node is None else repr(owner.node)
                error = LeaseLostError(
                    f"actor {self.actor_id}: lease epoch {lease.epoch} was lost "
                    f"(now held by {holder})"
                )
                lease.lease_lost(str(error))
                raise error
            yield txn

    def invalidate(self) -> None:
        """Drop this activation after the current message, *without* calling ``deactivate``:
        use it when the in-memory state can no longer be trusted (say, a commit whose outcome
        is unknown). The next message activates the actor again from the KV."""
        self._lease.invalidate()

    async def request(self, actor_id: ActorId, message: Any) -> Any:
        """Send a request to another actor through this node's dispatcher.

        Requesting this same actor (directly or through a cycle) deadlocks: its mailbox is busy
        with the current message.
        """
        if actor_id == self.actor_id:
            raise ValueError(f"actor {actor_id} cannot send a request to itself")
        await trio.lowlevel.checkpoint()
        return await self._request(actor_id, message)
