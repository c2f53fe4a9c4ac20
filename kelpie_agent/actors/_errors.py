"""Errors raised by the actor runtime, all under :class:`ActorError`.

``retryable`` tells a caller whether sending the same request again (to this node or another)
can succeed. A retried request may be applied twice when the first attempt's outcome was unknown
(:class:`LeaseLostError`, :class:`ActorStoppedError` for a request that had started), so actors
that need exactly-once effects deduplicate by a request id.
"""

from __future__ import annotations

from kelpie_agent.errors import KelpieError

__all__ = [
    "ActorError",
    "ActorStoppedError",
    "ActorUnavailableError",
    "LeaseLostError",
    "UnknownActorKindError",
]


class ActorError(KelpieError):
    """Root of the actor runtime's errors."""

    retryable: bool = False


class LeaseLostError(ActorError):
    """This node no longer holds the actor's lease (it expired, or another node took it over).

    Raised by ``ActorContext.transaction()`` (nothing was written) and to the caller whose
    request was in flight when the loss was noticed (its outcome is unknown: a transaction it
    committed before the loss stays committed).
    """

    retryable = True


class ActorUnavailableError(ActorError):
    """The actor's lease could not be obtained within ``acquire_timeout`` (another node holds it
    and did not hand it over, or the store was unreachable). The request was not processed."""

    retryable = True


class ActorStoppedError(ActorError):
    """The dispatcher is not running, or stopped before the request completed.

    A request that had not started was not processed; one that was interrupted mid-way may have
    committed part of its work. Another node (or this one, once running again) may serve it.
    """

    retryable = True


class UnknownActorKindError(ActorError, ValueError):
    """A request named an actor kind that has no factory in this dispatcher."""
