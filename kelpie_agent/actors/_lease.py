"""Lease records in the KV and the transactions that acquire, renew and release them.

Three keys per actor (``<kind>/<id>`` after each prefix):

* ``actors/owner/``: who owns the actor: node, session (one per Dispatcher instance), epoch
  (bumped by every acquisition) and token (unique per activation). Written only when the
  lease changes hands, so fenced transactions read it without conflicting with renewals.
* ``actors/lease/``: the expiry, in wall-clock seconds of the node that last renewed it.
* ``actors/wanted/``: a handoff request from another node, naming the activation (token and
  epoch) it wants to displace.

Values are msgpack maps. See docs/actors.md for the protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import msgpack

from kelpie_agent.storage import KVOps

from ._types import ActorId

__all__ = [
    "LEASE",
    "OWNER",
    "WANTED",
    "LeaseRecord",
    "Owner",
    "Wanted",
    "actor_key",
    "decode_lease",
    "decode_owner",
    "decode_wanted",
    "encode",
    "parse_actor_key",
    "read_lease",
]

OWNER = b"actors/owner/"
LEASE = b"actors/lease/"
WANTED = b"actors/wanted/"


def actor_key(prefix: bytes, actor_id: ActorId) -> bytes:
    return prefix + f"{actor_id.kind}/{actor_id.id}".encode("utf-8", "surrogatepass")


def parse_actor_key(prefix: bytes, key: bytes) -> ActorId | None:
    """The actor a key under ``prefix`` belongs to, or None for a malformed key."""
    if not key.startswith(prefix):
        return None
    kind, sep, ident = key[len(prefix) :].decode("utf-8", "surrogatepass").partition("/")
    if not sep:
        return None
    try:
        return ActorId(kind, ident)
    except ValueError:
        return None


@attrs.frozen
class Owner:
    """The owner record. ``node`` is None once the lease was released (the epoch is kept, so
    epochs only grow)."""

    node: str | None
    session: str | None
    epoch: int
    token: str | None


@attrs.frozen
class Wanted:
    node: str
    target: str  # the owner token this request wants released
    epoch: int  # ... and its epoch (kept in the owner record after the release)


@attrs.frozen
class LeaseRecord:
    """What :func:`read_lease` reports: the owner (None if released) and the expiry."""

    node: str | None
    epoch: int
    token: str | None
    expires: float | None  # wall-clock seconds of the renewing node; None when released
    wanted_by: str | None


def encode(fields: Mapping[str, Any]) -> bytes:
    data: bytes = msgpack.packb(dict(fields), use_bin_type=True)
    return data


def _decode(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = msgpack.unpackb(raw, raw=False)
    except Exception:  # malformed bytes: treat like an unreadable record
        return None
    return value if isinstance(value, dict) else None


def decode_owner(raw: bytes | None) -> Owner | None:
    d = _decode(raw)
    if d is None:
        return None
    return Owner(d.get("node"), d.get("session"), int(d.get("epoch", 0)), d.get("token"))


def decode_lease(raw: bytes | None) -> tuple[str | None, int, float] | None:
    """``(token, epoch, expires)`` of a lease record."""
    d = _decode(raw)
    if d is None:
        return None
    return d.get("token"), int(d.get("epoch", 0)), float(d.get("expires", 0.0))


def decode_wanted(raw: bytes | None) -> Wanted | None:
    d = _decode(raw)
    if d is None or not isinstance(d.get("node"), str) or not isinstance(d.get("target"), str):
        return None
    return Wanted(d["node"], d["target"], int(d.get("epoch", 0)))


def owner_value(owner: Owner) -> bytes:
    return encode(
        {"node": owner.node, "session": owner.session, "epoch": owner.epoch, "token": owner.token}
    )


def lease_value(token: str, epoch: int, expires: float) -> bytes:
    return encode({"token": token, "epoch": epoch, "expires": expires})


async def read_lease(kv: KVOps, actor_id: ActorId) -> LeaseRecord | None:
    """Who holds ``actor_id``'s lease, as stored (None if it was never activated)."""
    owner = decode_owner(await kv.get(actor_key(OWNER, actor_id)))
    if owner is None:
        return None
    lease = decode_lease(await kv.get(actor_key(LEASE, actor_id)))
    wanted = decode_wanted(await kv.get(actor_key(WANTED, actor_id)))
    held = owner.node is not None
    return LeaseRecord(
        node=owner.node,
        epoch=owner.epoch,
        token=owner.token,
        expires=lease[2] if held and lease is not None and lease[0] == owner.token else None,
        wanted_by=wanted.node if wanted is not None and wanted.target == owner.token else None,
    )
