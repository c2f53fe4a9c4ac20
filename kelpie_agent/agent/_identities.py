"""Identities (Letta's): who an agent acts for (a user, an organisation), attached to agents.

========================================  ==========================================
``identity/<id>``                          :class:`IdentityRecord`
``identitykey/<identifier_key>``           the identity id (keys are unique)
``identityagent/<identity>/<agent>``       agents attached to it (the agents write it)
========================================  ==========================================
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from kelpie_agent.ports import Ports
from kelpie_agent.storage import KV, Transaction

from ._codec import pack, register, unpack
from ._errors import InvalidRequestError, ResourceNotFoundError
from ._models import check_id
from ._retry import Reader

__all__ = ["IDENTITY_TYPES", "IdentityProperty", "IdentityRecord", "IdentityStore", "link_key"]

IDENTITY_TYPES = ("org", "user", "other")
PROPERTY_TYPES = ("string", "number", "boolean", "json")
_ATTEMPTS = 8
_BACKOFF = 0.05
IDENTITIES = b"identity/"


@attrs.frozen
class IdentityProperty:
    key: str
    value: Any = attrs.field(hash=False)
    type: str = "string"

    def __attrs_post_init__(self) -> None:
        if self.type not in PROPERTY_TYPES:
            raise InvalidRequestError(
                f"properties: type must be one of {', '.join(PROPERTY_TYPES)}, got {self.type!r}"
            )


def _properties(value: Iterable[IdentityProperty]) -> tuple[IdentityProperty, ...]:
    return tuple(value)


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class IdentityRecord:
    id: str
    identifier_key: str
    name: str
    identity_type: str = "user"
    project_id: str | None = None
    properties: tuple[IdentityProperty, ...] = attrs.field(default=(), converter=_properties)
    block_ids: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    created_at: float = 0.0
    updated_at: float = 0.0

    def __attrs_post_init__(self) -> None:
        if self.identity_type not in IDENTITY_TYPES:
            raise InvalidRequestError(
                f"identity_type: must be one of {', '.join(IDENTITY_TYPES)}, got "
                f"{self.identity_type!r}"
            )


register("identity", IdentityRecord)
register("identity_property", IdentityProperty)


def identity_key(identity_id: str) -> bytes:
    return IDENTITIES + check_id(identity_id, "identity id").encode()


def key_key(identifier_key: str) -> bytes:
    return b"identitykey/" + identifier_key.encode()


def link_key(identity_id: str, agent_id: str) -> bytes:
    return f"identityagent/{identity_id}/{agent_id}".encode()


class IdentityStore:
    def __init__(self, kv: KV, ports: Ports) -> None:
        self.kv = kv
        self.ports = ports
        self.read = Reader(kv, ports.rng, _ATTEMPTS, _BACKOFF)

    async def create(self, identifier_key: str, name: str, **fields: Any) -> IdentityRecord:
        now = self.ports.clock.now()
        record = IdentityRecord(
            self.ports.ids.new("identity"),
            identifier_key,
            name,
            created_at=now,
            updated_at=now,
            **fields,
        )

        async def build(txn: Transaction) -> IdentityRecord:
            taken = await txn.get(key_key(identifier_key))
            if taken is not None and unpack(taken) == record.id:
                return record  # an ambiguous commit landed: the key is ours (Reader.transact)
            if taken is not None:
                raise InvalidRequestError(
                    f"identifier_key: an identity with key {identifier_key!r} already exists"
                )
            await txn.set(identity_key(record.id), pack(record))
            await txn.set(key_key(identifier_key), pack(record.id))
            return record

        created: IdentityRecord = await self.read.transact(build, f"identity {identifier_key}")
        return created

    async def get(self, identity_id: str) -> IdentityRecord:
        data = await self.read(lambda: self.kv.get(identity_key(identity_id)), "an identity")
        if data is None:
            raise ResourceNotFoundError("identity", identity_id)
        record: IdentityRecord = unpack(data)
        return record

    async def by_key(self, identifier_key: str) -> IdentityRecord | None:
        data = await self.read(lambda: self.kv.get(key_key(identifier_key)), "an identity key")
        return await self.get(unpack(data)) if data is not None else None

    async def all(self) -> list[IdentityRecord]:
        rows = await self.read(lambda: self.kv.scan_prefix(IDENTITIES), "identities")
        found: list[IdentityRecord] = [unpack(v) for _, v in rows]
        return sorted(found, key=lambda r: (r.created_at, r.id))

    async def update(self, identity_id: str, **changes: Any) -> IdentityRecord:
        async def build(txn: Transaction) -> IdentityRecord:
            data = await txn.get(identity_key(identity_id))
            if data is None:
                raise ResourceNotFoundError("identity", identity_id)
            old: IdentityRecord = unpack(data)
            new = attrs.evolve(old, **changes, updated_at=self.ports.clock.now())
            if new.identifier_key != old.identifier_key:
                if await txn.get(key_key(new.identifier_key)) is not None:
                    raise InvalidRequestError(
                        f"identifier_key: {new.identifier_key!r} is taken by another identity"
                    )
                await txn.delete(key_key(old.identifier_key))
                await txn.set(key_key(new.identifier_key), pack(new.id))
            await txn.set(identity_key(identity_id), pack(new))
            return new

        updated: IdentityRecord = await self.read.transact(build, f"identity {identity_id}")
        return updated

    async def agents(self, identity_id: str) -> list[str]:
        prefix = f"identityagent/{identity_id}/".encode()
        rows = await self.read(lambda: self.kv.scan_prefix(prefix), "the identity's agents")
        return [key[len(prefix) :].decode() for key, _ in rows]

    async def delete(self, identity_id: str) -> list[str]:
        """Delete the identity; returns its agents (the caller detaches it from them)."""
        record = await self.get(identity_id)
        attached = await self.agents(identity_id)

        async def build(txn: Transaction) -> None:
            await txn.delete(identity_key(identity_id))
            await txn.delete(key_key(record.identifier_key))

        await self.read.transact(build, f"identity {identity_id}")
        return attached
