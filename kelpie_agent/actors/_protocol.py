"""The lease protocol of one dispatcher: acquire (with handoff requests), renew, release.

Timing (see docs/actors.md, "Clock skew"): a lease record stores its expiry in the wall-clock
seconds of the node that wrote it, so other nodes compare it with their own ``clock.now()``.
The holder never trusts its wall clock for its own deadline: it considers the lease valid until
``start + lease_duration - lease_margin`` on trio's monotonic clock, where ``start`` is when the
last successful acquire or renewal *began*. While every two wall clocks differ by less than
``lease_margin``, the holder stops before anyone else may take over. When that assumption
breaks (clock jumps, a paused process), fencing still holds: every state write reads the owner
record in its transaction, so a stale holder's write conflicts or fails.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from typing import TypeVar

import attrs
import trio

from kelpie_agent.ports import Ports
from kelpie_agent.storage import KV, ChecksumError, ConflictError, StorageError
from kelpie_agent.storage._keys import prefix_end

from ._errors import ActorUnavailableError
from ._lease import (
    LEASE,
    OWNER,
    WANTED,
    Owner,
    Wanted,
    actor_key,
    decode_lease,
    decode_owner,
    decode_wanted,
    encode,
    lease_value,
    owner_value,
    parse_actor_key,
)
from ._types import ActorId, DispatcherOptions

__all__ = ["Held", "Leases", "Observer"]

Observer = Callable[..., None]


T = TypeVar("T")

_RELEASE_ATTEMPTS = 5  # serialization conflicts a release retries before giving up


class _Unreadable(enum.Enum):
    UNREADABLE = "unreadable"


_UNREADABLE = _Unreadable.UNREADABLE


@attrs.frozen
class _Unknown:
    """A lease record that cannot be read (corrupt or malformed): the owner record itself
    (``holder`` None) or the expiry of ``holder``'s lease; first seen at ``since``."""

    holder: str | None
    since: float


@attrs.frozen
class _Yield:
    """The lease was just released for a handoff to ``node``: let it go first."""

    node: str


@attrs.define
class Held:
    """A lease this dispatcher holds: its epoch and token, and its local deadline."""

    epoch: int
    token: str
    valid_until: float  # trio time after which this node must not use the lease


class Leases:
    def __init__(
        self,
        kv: KV,
        ports: Ports,
        node_id: str,
        session: str,
        options: DispatcherOptions,
        observe: Observer,
    ) -> None:
        self.kv = kv
        self.ports = ports
        self.node_id = node_id
        self.session = session
        self.options = options
        self._observe = observe

    # -- acquire -------------------------------------------------------------------------------

    async def acquire(self, aid: ActorId) -> Held:
        """Take the lease, asking the current holder to hand it over; ActorUnavailableError
        after ``acquire_timeout``."""
        opts = self.options
        deadline = trio.current_time() + opts.acquire_timeout
        unknown: _Unknown | None = None  # an unreadable record, first seen at .since
        wanted: str | None = None  # the holder token our handoff request targets
        holder: Owner | None = None
        yielding_since: float | None = None
        while True:
            started = trio.current_time()
            patient = yielding_since is None or started - yielding_since < 2 * opts.poll_interval
            force = None  # an unreadable record that no holder can still be using
            if (
                unknown is not None
                and started - unknown.since >= opts.lease_duration + opts.lease_margin
            ):
                force = unknown
            delay = opts.poll_interval
            try:
                result = await self._attempt(aid, started, force, patient)
                if isinstance(result, Held):
                    result = await self._verify(aid, result, started)
            except ConflictError:
                delay = opts.poll_interval * 0.1 * (0.5 + self.ports.rng.random())
            except StorageError as error:
                self._observe("actor.acquire_error", actor=str(aid), error=repr(error))
            else:
                if isinstance(result, Held):
                    self._observe("actor.acquired", actor=str(aid), epoch=result.epoch)
                    return result
                if isinstance(result, _Yield):
                    yielding_since = started if yielding_since is None else yielding_since
                elif isinstance(result, _Unknown):
                    yielding_since = None
                    if unknown is None or unknown.holder != result.holder:
                        unknown = result
                else:
                    yielding_since = None
                    unknown = None
                    holder = result
                    if holder.token is not None and wanted != holder.token:
                        wanted = await self._want(aid, holder) or wanted
            now = trio.current_time()
            if now >= deadline:
                if wanted is not None:
                    await self._withdraw(aid, wanted)
                who = f"node {holder.node!r} (epoch {holder.epoch})" if holder else "the store"
                raise ActorUnavailableError(
                    f"actor {aid}: could not get its lease within {opts.acquire_timeout}s "
                    f"(held by {who})"
                )
            await trio.sleep(min(delay, deadline - now))

    async def _attempt(
        self, aid: ActorId, started: float, force: _Unknown | None, patient: bool
    ) -> Held | Owner | _Unknown | _Yield:
        """One acquisition transaction: the new lease, the live owner that blocks us, or an
        unreadable record. ``force`` is a record that has been unreadable for longer than any
        holder can use a lease: if it still is (the same one), take over. ``patient``: yield a
        lease that was just released for another node's handoff request."""
        opts = self.options
        okey, lkey = actor_key(OWNER, aid), actor_key(LEASE, aid)
        async with self.kv.transaction() as txn:
            owner = await self._read(txn.get(okey), decode_owner)
            if isinstance(owner, _Unreadable):
                if force is None or force.holder is not None:
                    return _Unknown(None, started)
                lease = await self._read(txn.get(lkey), decode_lease)
                epoch = lease[1] if isinstance(lease, tuple) else 0
                self._observe("actor.forced_takeover", actor=str(aid))
            else:
                epoch = owner.epoch if owner is not None else 0
                if owner is not None and owner.node is None and patient:
                    request = await self._read(txn.get(actor_key(WANTED, aid)), decode_wanted)
                    if (
                        isinstance(request, Wanted)
                        and request.node != self.node_id
                        and request.epoch == owner.epoch
                    ):
                        return _Yield(request.node)
                if owner is not None and not self._free(owner):
                    lease = await self._read(txn.get(lkey), decode_lease)
                    if not isinstance(lease, tuple) or lease[0] != owner.token:
                        if force is None or force.holder != owner.token:
                            return _Unknown(owner.token, started)
                        self._observe("actor.forced_takeover", actor=str(aid))
                    elif self.ports.clock.now() < lease[2]:
                        return owner
            token = self.ports.ids.new("activation")
            new = Owner(self.node_id, self.session, epoch + 1, token)
            await txn.set(okey, owner_value(new))
            expires = self.ports.clock.now() + opts.lease_duration
            await txn.set(lkey, lease_value(token, new.epoch, expires))
            await txn.delete(actor_key(WANTED, aid))
        return Held(new.epoch, token, started + opts.lease_duration - opts.lease_margin)

    async def _verify(self, aid: ActorId, held: Held, started: float) -> Held | _Unknown:
        """Read our new owner record back: if it was stored unreadable (a corrupted write), no
        one can tell we hold the lease, and we could never renew it or write through it; do not
        use it. (Any other storage error propagates, and the next attempt takes over again.)"""
        owner = await self._read(self.kv.get(actor_key(OWNER, aid)), decode_owner)
        if isinstance(owner, Owner) and owner.token == held.token:
            return held
        self._observe("actor.acquired_unreadable", actor=str(aid), epoch=held.epoch)
        return _Unknown(None, started)

    @staticmethod
    async def _read(
        read: Awaitable[bytes | None], decode: Callable[[bytes | None], T]
    ) -> T | _Unreadable:
        """A record, or _UNREADABLE if its bytes fail their checksum or do not decode."""
        try:
            raw = await read
        except ChecksumError:
            return _UNREADABLE
        value = decode(raw)
        return _UNREADABLE if raw is not None and value is None else value

    async def _want(self, aid: ActorId, holder: Owner) -> str | None:
        """Ask ``holder`` to hand the actor over; the token we targeted, or None on failure."""
        assert holder.token is not None
        try:
            request = {"node": self.node_id, "target": holder.token, "epoch": holder.epoch}
            await self.kv.set(actor_key(WANTED, aid), encode(request))
        except StorageError:
            return None
        self._observe("actor.handoff_requested", actor=str(aid), holder=holder.node)
        return holder.token

    def _free(self, owner: Owner) -> bool:
        """Released, or held by an earlier activation of this dispatcher or of this node (a
        node id names one live process at a time, so an earlier session of it is dead)."""
        return owner.node is None or owner.session == self.session or owner.node == self.node_id

    async def _withdraw(self, aid: ActorId, target: str) -> None:
        """Best effort: remove our handoff request after giving up."""
        wkey = actor_key(WANTED, aid)
        with trio.move_on_after(self.options.poll_interval):
            try:
                async with self.kv.transaction() as txn:
                    request = decode_wanted(await txn.get(wkey))
                    if request is not None and (request.node, request.target) == (
                        self.node_id,
                        target,
                    ):
                        await txn.delete(wkey)
            except StorageError:
                pass

    # -- renew and release ---------------------------------------------------------------------

    async def renew(self, aid: ActorId, held: Held) -> bool:
        """Extend the lease; False if another activation owns it now. Raises StorageError when
        the renewal failed or its outcome is unknown (the caller retries)."""
        opts = self.options
        started = trio.current_time()
        okey, lkey = actor_key(OWNER, aid), actor_key(LEASE, aid)
        async with self.kv.transaction() as txn:
            owner = decode_owner(await txn.get(okey))
            if owner is None or owner.token != held.token:
                return False
            expires = self.ports.clock.now() + opts.lease_duration
            await txn.set(lkey, lease_value(held.token, held.epoch, expires))
        # Others can only respect an expiry they can read: a renewal stored unreadable (a
        # corrupted write) does not extend our deadline.
        stored = decode_lease(await self.kv.get(lkey))
        if stored is not None and stored[0] == held.token:
            usable_until = started + opts.lease_duration - opts.lease_margin
            held.valid_until = max(held.valid_until, usable_until)
        return True

    async def release(self, aid: ActorId, held: Held) -> None:
        """Release the lease (keeping its epoch). A serialization conflict is retried: a node
        that stops releases all its leases at once, and PostgreSQL's serializable isolation
        can fail some of those concurrent transactions on distinct keys (its predicate locks
        cover index pages), which would leave their leases held until they expire."""
        for attempt in range(1, _RELEASE_ATTEMPTS + 1):
            try:
                if not await self._release(aid, held):
                    return
                break
            except ConflictError:
                if attempt == _RELEASE_ATTEMPTS:
                    raise
            await trio.sleep(self.options.poll_interval * 0.05 * attempt)
        self._observe("actor.released", actor=str(aid), epoch=held.epoch)

    async def _release(self, aid: ActorId, held: Held) -> bool:
        """One release transaction; False if the lease is no longer ours."""
        okey = actor_key(OWNER, aid)
        async with self.kv.transaction() as txn:
            owner = decode_owner(await txn.get(okey))
            if owner is None or owner.token != held.token:
                return False
            await txn.set(okey, owner_value(Owner(None, None, owner.epoch, None)))
            await txn.delete(actor_key(LEASE, aid))
        return True

    # -- handoff requests ----------------------------------------------------------------------

    async def handoff_requests(self, active: dict[ActorId, str]) -> list[ActorId]:
        """Which of our activations (actor -> token) another node asked us to hand over."""
        wanted: list[ActorId] = []
        try:
            rows = await self.kv.scan(WANTED, prefix_end(WANTED))
        except ChecksumError:  # one unreadable request: look at ours one by one
            return await self._handoff_requests_slowly(active)
        for key, value in rows:
            aid = parse_actor_key(WANTED, key)
            request = decode_wanted(value)
            if aid is not None and request is not None and active.get(aid) == request.target:
                wanted.append(aid)
        return wanted

    async def _handoff_requests_slowly(self, active: dict[ActorId, str]) -> list[ActorId]:
        wanted: list[ActorId] = []
        for aid, token in active.items():
            wkey = actor_key(WANTED, aid)
            try:
                request = decode_wanted(await self.kv.get(wkey))
            except ChecksumError:
                try:  # unreadable: drop it; a node still waiting writes it again
                    await self.kv.delete(wkey)
                except StorageError:
                    pass
                continue
            if request is not None and request.target == token:
                wanted.append(aid)
        return wanted
