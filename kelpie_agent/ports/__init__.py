"""The small ports every kelpie_agent layer uses for time, randomness and ids.

kelpie_agent never reads the wall clock, the global random module, or the operating system's
entropy itself (``tests/test_repo.py`` enforces it). It asks a :class:`Clock` for epoch
seconds, an :class:`Ids` for new identifiers, and uses a ``random.Random`` it was given.
Production passes :func:`system_ports`; the simulator passes ``kelpie_dst.shims.sim_ports(node)``,
whose clock is the node's (skewable) wall clock and whose ids and randomness come from the seed.
Monotonic time, sleeps and timeouts are trio's and need no port.
"""

from ._clock import Clock as Clock
from ._clock import SystemClock as SystemClock
from ._clock import utc_datetime as utc_datetime
from ._hazards import NO_HAZARDS as NO_HAZARDS
from ._hazards import Hazards as Hazards
from ._hazards import NoHazards as NoHazards
from ._ids import Ids as Ids
from ._ids import SeededIds as SeededIds
from ._ids import SystemIds as SystemIds
from ._ports import Ports as Ports
from ._ports import system_ports as system_ports

__all__ = [
    "NO_HAZARDS",
    "Clock",
    "Hazards",
    "Ids",
    "NoHazards",
    "Ports",
    "SeededIds",
    "SystemClock",
    "SystemIds",
    "system_ports",
    "utc_datetime",
]
