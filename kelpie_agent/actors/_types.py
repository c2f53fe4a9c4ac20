"""The values and protocols of the actor runtime: addresses, the actor protocol, options."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs

if TYPE_CHECKING:
    from ._context import ActorContext

__all__ = ["Actor", "ActorFactory", "ActorId", "DispatcherOptions"]

_KIND = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAX_ID_BYTES = 900  # leaves room for the runtime's key prefixes under MAX_KEY_SIZE (1024)


def _check_kind(_: object, __: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not _KIND.fullmatch(value):
        raise ValueError(
            f"ActorId.kind must be 1-64 characters of letters, digits, '_', '.' or '-', "
            f"got {value!r}"
        )


def _check_id(_: object, __: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"ActorId.id must be a non-empty string, got {value!r}")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_ID_BYTES or "\x00" in value:
        raise ValueError(
            f"ActorId.id must be at most {MAX_ID_BYTES} UTF-8 bytes without NUL, "
            f"got {size} bytes: {value[:40]!r}"
        )


@attrs.frozen(order=True)
class ActorId:
    """The address of a virtual actor: its kind (which factory makes it) and its id."""

    kind: str = attrs.field(validator=_check_kind)
    id: str = attrs.field(validator=_check_id)

    def __str__(self) -> str:
        return f"{self.kind}/{self.id}"


class Actor(Protocol):
    """A virtual actor. The runtime calls these one at a time, never concurrently.

    * ``activate(ctx)``: load state from ``ctx.kv``; called once, with the lease held, before
      the first message. An exception fails the requests waiting for the activation and the
      activation is dropped (the next request tries again).
    * ``handle(message)``: process one message, in mailbox order. The return value goes to the
      caller, and so does an exception (the actor stays active, except after
      :class:`LeaseLostError`). Writes of actor state go through ``ctx.transaction()``.
    * ``deactivate()``: persist anything unsaved; called before an idle, requested, handoff or
      shutdown deactivation, never after a lease loss, an invalidation or an interrupted
      ``handle``.
    """

    async def activate(self, ctx: ActorContext) -> None: ...

    async def handle(self, message: Any) -> Any: ...

    async def deactivate(self) -> None: ...


ActorFactory = Callable[[ActorId], Actor]


def _positive(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            f"DispatcherOptions.{attribute.name} must be a positive number of seconds, "
            f"got {value!r}"
        )


@attrs.frozen
class DispatcherOptions:
    """Timing of the actor runtime, in seconds.

    * ``idle_timeout``: an actor with no message for this long is deactivated.
    * ``lease_duration``: how long a lease lasts after a renewal (wall-clock seconds in the
      lease record, so other nodes can compare it with their own clocks).
    * ``renew_every``: how often the owner renews a lease.
    * ``lease_margin``: the owner stops using a lease this much *before* it expires, measured
      on its own monotonic clock from the start of its last successful renewal. It must exceed
      the largest wall-clock skew between two nodes (see docs/actors.md).
    * ``acquire_timeout``: how long a request waits for a lease held by another node.
    * ``poll_interval``: how often a waiting node re-reads a lease, a failed renewal is retried,
      and an owner looks for handoff requests.
    * ``shutdown_timeout``: how long stopping the dispatcher may spend deactivating actors and
      releasing leases.
    """

    idle_timeout: float = attrs.field(default=300.0, validator=_positive)
    lease_duration: float = attrs.field(default=30.0, validator=_positive)
    renew_every: float = attrs.field(default=10.0, validator=_positive)
    acquire_timeout: float = attrs.field(default=60.0, validator=_positive)
    lease_margin: float = attrs.field(default=5.0, validator=_positive)
    poll_interval: float = attrs.field(default=1.0, validator=_positive)
    shutdown_timeout: float = attrs.field(default=10.0, validator=_positive)

    def __attrs_post_init__(self) -> None:
        usable = self.lease_duration - self.lease_margin
        if usable <= 0:
            raise ValueError(
                f"DispatcherOptions.lease_margin ({self.lease_margin}) must be less than "
                f"lease_duration ({self.lease_duration})"
            )
        if self.renew_every >= usable:
            raise ValueError(
                f"DispatcherOptions.renew_every ({self.renew_every}) must be less than "
                f"lease_duration - lease_margin ({usable})"
            )
