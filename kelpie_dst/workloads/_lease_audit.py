"""An audit of the actor runtime's lease records against what the dispatchers did (leaseR).

The runtime keeps three records per actor in the shared store (kelpie_agent/actors/_lease.py):
the owner (node, session, epoch, token), the lease (token, epoch, expiry) and a handoff request
(``wanted``: requester, target token, target epoch). :class:`AuditedStore` is the database
host's ordinary :class:`~kelpie_dst.shims.SimKVStore` that also hands every batch of writes to a
:class:`LeaseAudit` at the instant it applies (synchronously: no await, no draw, so the run and
its trace are the same as without it), and the dispatchers' observer events go to it too.

What it judges, model-free (docs/oracles.md, "Lease records after takeovers"):

* **records** (``lease_records_consistent``): the owner record changes only by an acquisition
  (the committing node names itself, with a fresh token and the epoch one past the last) or a
  release (by the node that holds it, keeping the epoch); the lease record is written only with
  its owner record's token and epoch, by the node that holds it, and exists exactly while the
  lease is held; a handoff request names a real activation (a token with its own epoch), is
  written by the node that asks, and is deleted only by an acquisition, by the node that wrote
  it, or because it could not be read.
* **handoffs** (``handoffs_requested``): an activation hands the actor over only after a
  request that named it (its token) was written: no stale or misdirected request moves it.
* **turns** (:func:`check_superseded`): once a newer activation has acquired the lease, an older
  one acts for at most ``lease_duration - lease_margin`` more (virtual seconds): its last
  successful renewal began before the takeover, so its deadline is within that. This holds
  whatever the wall clocks do (jumps, skew), unlike the wall-clock turn-taking checks; only a
  paused process is excused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import msgpack
import trio

from kelpie_agent.actors._lease import LEASE, OWNER, WANTED, parse_actor_key
from kelpie_agent.storage import ChecksumError
from kelpie_agent.storage._txn import Write

from .._nodes import Node
from .._sim import Simulation
from ..shims._sqlite_disk import sqlite_files
from ..shims._storage import SimKVStore
from ..shims._storage_faults import _prune_knob
from ._agent_checks import Owner

__all__ = ["Acquired", "AuditedStore", "LeaseAudit", "audit_store", "check_superseded"]

_PREFIXES = (OWNER, LEASE, WANTED)
_SHOWN = 5  # problems kept in full per kind (the rest are counted)


@attrs.frozen
class Wanted:
    node: str
    target: str
    epoch: int


def _fields(raw: bytes | None) -> dict[str, Any] | None:
    """A record's msgpack map, decoded here rather than by kelpie_agent's own decoders (an
    audit that shared them would share their bugs)."""
    if raw is None:
        return None
    try:
        value = msgpack.unpackb(raw, raw=False)
    except Exception:
        return None
    return value if isinstance(value, dict) else None


def decode_owner(raw: bytes | None) -> Owner | None:
    d = _fields(raw)
    if d is None or not isinstance(d.get("epoch"), int):
        return None
    return Owner(d.get("node"), d["epoch"], d.get("token"))


def decode_lease(raw: bytes | None) -> tuple[str | None, int, float] | None:
    d = _fields(raw)
    if d is None or not isinstance(d.get("epoch"), int):
        return None
    expires = d.get("expires")
    return d.get("token"), d["epoch"], float(expires) if isinstance(expires, int | float) else -1.0


def decode_wanted(raw: bytes | None) -> Wanted | None:
    d = _fields(raw)
    if d is None or not isinstance(d.get("node"), str) or not isinstance(d.get("target"), str):
        return None
    epoch = d.get("epoch")
    return Wanted(d["node"], d["target"], epoch if isinstance(epoch, int) else -1)


@attrs.frozen
class Acquired:
    """One acquisition of an actor's lease, as committed."""

    actor: str
    epoch: int
    token: str
    node: str
    at: float


class LeaseAudit:
    """The lease records as written, and what is wrong with how they changed."""

    def __init__(self) -> None:
        self.owners: dict[str, Owner] = {}
        self.leases: dict[str, tuple[str | None, int, float]] = {}
        self.wanted: dict[str, Wanted] = {}
        self.by_token: dict[tuple[str, str], Acquired] = {}
        self.by_epoch: dict[tuple[str, int], Acquired] = {}
        self.requested: set[tuple[str, str]] = set()  # (actor, target token): membership only
        self.record_problems: list[str] = []
        self.handoff_problems: list[str] = []
        self.counts: dict[str, int] = {}

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def _problem(self, into: list[str], text: str) -> None:
        self._count("problems")
        if len(into) < _SHOWN:
            into.append(text)

    # -- writes ----------------------------------------------------------------------------------

    def applied(
        self, node: str, at: float, writes: Sequence[Write], readable: Callable[[bytes], bool]
    ) -> None:
        """A batch of writes (one commit, set or delete) is about to apply on the store;
        ``readable(key)``: whether the stored frame of ``key`` reads back (before the batch)."""
        batches: dict[str, dict[bytes, tuple[bytes, bytes | None]]] = {}
        for key, value in writes:
            for prefix in _PREFIXES:
                aid = parse_actor_key(prefix, key) if key.startswith(prefix) else None
                if aid is not None:
                    batches.setdefault(str(aid), {})[prefix] = (key, value)
        for actor, batch in batches.items():
            self._actor_batch(node, at, actor, batch, readable)

    def _actor_batch(
        self,
        node: str,
        at: float,
        actor: str,
        batch: Mapping[bytes, tuple[bytes, bytes | None]],
        readable: Callable[[bytes], bool],
    ) -> None:
        bad = self.record_problems
        where = f"{actor} at t={at:.3f} by {node}"
        acquired = False
        if OWNER in batch:
            okey, raw = batch[OWNER]
            before = self.owners.get(actor)
            new = decode_owner(raw)
            if new is None:
                self._problem(bad, f"{where}: the owner record was deleted or written unreadable")
            elif new.node is not None:
                acquired = True
                self._acquisition(node, at, actor, before, new, batch, readable(okey))
            else:
                self._release(node, at, actor, before, new, batch)
            if new is not None:
                self.owners[actor] = new
        elif LEASE in batch:
            self._renewal(node, at, actor, batch[LEASE][1])
        if LEASE in batch:
            lease = decode_lease(batch[LEASE][1])
            if lease is None:
                self.leases.pop(actor, None)
            else:
                self.leases[actor] = lease
        if WANTED in batch:
            self._request(node, at, actor, batch[WANTED], acquired, readable)
        self._agree(where, actor)

    def _acquisition(
        self,
        node: str,
        at: float,
        actor: str,
        before: Owner | None,
        new: Owner,
        batch: Mapping[bytes, tuple[bytes, bytes | None]],
        known: bool,
    ) -> None:
        bad = self.record_problems
        where = f"{actor} at t={at:.3f} by {node}"
        self._count("acquisitions")
        last = before.epoch if before is not None else 0
        if known and new.epoch != last + 1:
            self._problem(bad, f"{where}: acquired epoch {new.epoch} after epoch {last}")
        if new.node != node:
            self._problem(bad, f"{where}: an acquisition names node {new.node!r}")
        if new.token is None or (actor, new.token) in self.by_token:
            self._problem(bad, f"{where}: acquired with a used token {new.token!r}")
            return
        lease = decode_lease(batch[LEASE][1]) if LEASE in batch else None
        if lease is None or lease[:2] != (new.token, new.epoch):
            self._problem(bad, f"{where}: acquired epoch {new.epoch} with lease record {lease}")
        record = Acquired(actor, new.epoch, new.token, node, at)
        self.by_token[(actor, new.token)] = record
        self.by_epoch.setdefault((actor, new.epoch), record)

    def _release(
        self,
        node: str,
        at: float,
        actor: str,
        before: Owner | None,
        new: Owner,
        batch: Mapping[bytes, tuple[bytes, bytes | None]],
    ) -> None:
        bad = self.record_problems
        where = f"{actor} at t={at:.3f} by {node}"
        self._count("releases")
        if before is None or before.node is None:
            self._problem(bad, f"{where}: released a lease nobody held")
            return
        if before.node != node:
            self._problem(
                bad,
                f"{where}: released the lease of epoch {before.epoch}, held by {before.node}",
            )
        if new.epoch != before.epoch:
            self._problem(bad, f"{where}: a release changed epoch {before.epoch} to {new.epoch}")
        if LEASE not in batch or batch[LEASE][1] is not None:
            self._problem(bad, f"{where}: released epoch {before.epoch} keeping its lease record")

    def _renewal(self, node: str, at: float, actor: str, raw: bytes | None) -> None:
        bad = self.record_problems
        where = f"{actor} at t={at:.3f} by {node}"
        self._count("renewals")
        owner = self.owners.get(actor)
        lease = decode_lease(raw)
        if lease is None:
            self._problem(bad, f"{where}: the lease record was deleted without a release")
        elif owner is None or owner.node is None:
            self._problem(bad, f"{where}: renewed epoch {lease[1]} while nobody held the lease")
        elif lease[:2] != (owner.token, owner.epoch) or owner.node != node:
            self._problem(
                bad,
                f"{where}: renewed with token {lease[0]} (epoch {lease[1]}) while epoch "
                f"{owner.epoch} ({owner.token}) on {owner.node} held the lease",
            )

    def _request(
        self,
        node: str,
        at: float,
        actor: str,
        write: tuple[bytes, bytes | None],
        acquired: bool,
        readable: Callable[[bytes], bool],
    ) -> None:
        bad = self.record_problems
        where = f"{actor} at t={at:.3f} by {node}"
        key, raw = write
        before = self.wanted.pop(actor, None)
        if raw is None:  # a delete: an acquisition, the asker withdrawing, or unreadable
            if not acquired and before is not None and before.node != node and readable(key):
                self._problem(
                    bad, f"{where}: deleted the handoff request of {before.node} (not its own)"
                )
            return
        self._count("requests")
        request = decode_wanted(raw)
        if request is None:
            self._problem(bad, f"{where}: wrote an unreadable handoff request")
            return
        self.wanted[actor] = request
        target = self.by_token.get((actor, request.target))
        if request.node != node:
            self._problem(bad, f"{where}: wrote a handoff request in the name of {request.node}")
        if target is None or target.epoch != request.epoch:
            known = "no activation" if target is None else f"epoch {target.epoch}"
            self._problem(
                bad,
                f"{where}: a handoff request names token {request.target} with epoch "
                f"{request.epoch}, but that token is {known}",
            )
        self.requested.add((actor, request.target))

    def _agree(self, where: str, actor: str) -> None:
        owner = self.owners.get(actor)
        lease = self.leases.get(actor)
        held = owner is not None and owner.node is not None
        if (
            held
            and owner is not None
            and (lease is None or lease[:2] != (owner.token, owner.epoch))
        ):
            self._problem(
                self.record_problems,
                f"{where}: epoch {owner.epoch} ({owner.token}) on {owner.node} holds the "
                f"lease, but the lease record is {lease}",
            )
        elif not held and lease is not None:
            self._problem(
                self.record_problems,
                f"{where}: nobody holds the lease, but a lease record names {lease[0]} "
                f"(epoch {lease[1]})",
            )

    # -- observations ----------------------------------------------------------------------------

    def observe(self, node: str, kind: str, fields: Mapping[str, Any], at: float) -> None:
        """A dispatcher observer event on ``node`` at virtual time ``at``."""
        if kind != "actor.handoff":
            return
        self._count("handoffs")
        actor, epoch = str(fields.get("actor", "")), fields.get("epoch")
        record = self.by_epoch.get((actor, epoch)) if isinstance(epoch, int) else None
        if record is None:
            self._problem(
                self.handoff_problems,
                f"{actor}: {node} handed over epoch {epoch} at t={at:.3f}, an epoch never acquired",
            )
        elif (actor, record.token) not in self.requested:
            self._problem(
                self.handoff_problems,
                f"{actor}: {node} handed over epoch {epoch} ({record.token}) at t={at:.3f}, "
                "but no handoff request ever named it",
            )

    def observer(self, node: str, log: Callable[..., None]) -> Callable[..., None]:
        """An observer for ``node``'s dispatcher: tells the audit, then ``log`` (unchanged)."""

        def observe(kind: str, **fields: Any) -> None:
            self.observe(node, kind, fields, trio.current_time())
            log(kind, **fields)

        return observe

    def next_acquisition(self, actor: str, epoch: int) -> Acquired | None:
        """The acquisition of the epoch after ``epoch`` (the takeover that superseded it)."""
        return self.by_epoch.get((actor, epoch + 1))


class AuditedStore(SimKVStore):
    """A database host's store that shows every write batch to a :class:`LeaseAudit` first."""

    def __init__(self, min_prune: int, audit: LeaseAudit, sim: Simulation) -> None:
        super().__init__(min_prune)
        self.audit = audit
        self._sim = sim

    def _readable(self, key: bytes) -> bool:
        try:
            self._get(key)
        except ChecksumError:
            return False
        return True

    def _apply(self, writes: Sequence[Write]) -> None:
        if any(key.startswith(b"actors/") for key, _ in writes):
            node = self._sim.current_node()
            name = node.name if node is not None else "?"
            self.audit.applied(name, trio.current_time(), writes, self._readable)
        super()._apply(writes)


def audit_store(sim: Simulation, host: Node, name: str = "kv") -> LeaseAudit | None:
    """Put an :class:`AuditedStore` on ``host`` (before any node opens its KV there) and return
    its audit; None with the real SQLite engine (no audit) or if the store already exists."""
    slot = f"kelpie_dst.kv/{name}"
    if sqlite_files(sim) is not None or slot in host.durable:
        return None
    audit = LeaseAudit()
    host.durable[slot] = AuditedStore(_prune_knob(sim), audit, sim)
    return audit


def check_superseded(
    audit: LeaseAudit,
    actor: str,
    acts: Sequence[tuple[float, str, str, str]],
    usable: float,
    paused: Callable[[str, float, float], bool],
) -> list[str]:
    """Acts ``(at, node, token, what)`` of ``actor``'s activations: none more than ``usable``
    (lease_duration - lease_margin) virtual seconds after a newer activation acquired the
    lease, unless the acting node was paused since the takeover (``paused(node, start, end)``)."""
    problems = []
    for at, node, token, what in acts:
        mine = audit.by_token.get((actor, token))
        if mine is None:
            continue
        newer = audit.next_acquisition(actor, mine.epoch)
        if newer is None or at <= newer.at + usable + 1e-6 or paused(node, newer.at, at):
            continue
        problems.append(
            f"activation of epoch {mine.epoch} on {node} acted for {what} at t={at:.3f}, "
            f"{at - newer.at:.3f}s after epoch {newer.epoch} on {newer.node} acquired the lease "
            f"(t={newer.at:.3f}; a superseded holder may act for {usable:g}s at most)"
        )
    return problems
