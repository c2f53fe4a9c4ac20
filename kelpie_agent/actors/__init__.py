"""Virtual actors: addressed by (kind, id), activated on demand, one mailbox each, and at most
one effective activation across all nodes sharing a KV.

A :class:`Dispatcher` runs on every node. ``await dispatcher.request(ActorId(kind, id), msg)``
activates the actor if needed (its state comes from the KV), queues the message, and returns
the actor's response. Single activation across nodes rests on a lease record in the KV with an
epoch, renewed while the actor is active, and on fencing: every state write goes through
``ActorContext.transaction()``, which fails for an activation that no longer owns the lease.
A request for an actor active on another node asks that node, through the KV, to hand it over.
See docs/actors.md.
"""

from ._context import ActorContext as ActorContext
from ._dispatcher import Dispatcher as Dispatcher
from ._errors import ActorError as ActorError
from ._errors import ActorStoppedError as ActorStoppedError
from ._errors import ActorUnavailableError as ActorUnavailableError
from ._errors import LeaseLostError as LeaseLostError
from ._errors import UnknownActorKindError as UnknownActorKindError
from ._lease import LeaseRecord as LeaseRecord
from ._lease import read_lease as read_lease
from ._types import Actor as Actor
from ._types import ActorFactory as ActorFactory
from ._types import ActorId as ActorId
from ._types import DispatcherOptions as DispatcherOptions

__all__ = [
    "Actor",
    "ActorContext",
    "ActorError",
    "ActorFactory",
    "ActorId",
    "ActorStoppedError",
    "ActorUnavailableError",
    "Dispatcher",
    "DispatcherOptions",
    "LeaseLostError",
    "LeaseRecord",
    "UnknownActorKindError",
    "read_lease",
]
