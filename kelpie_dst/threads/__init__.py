"""Simulated threads: real OS threads that run one at a time, when the scheduler says.

Inside a simulation, ``threading.Thread``, ``trio.to_thread.run_sync`` (and so anyio's),
``concurrent.futures`` executors and futures, ``queue`` queues, every ``threading`` primitive,
``time.sleep`` and ``threading.Timer`` are simulated: exactly one of the trio loop and the
simulated threads runs at a time, blocking calls hand the baton back to the scheduler, and the
seed decides every interleaving. A real-time watchdog turns a call that blocks outside the
model into a reported liveness failure. See docs/threads.md.
"""

from ._core import ThreadKilled as ThreadKilled
from ._watchdog import DEFAULT_WATCHDOG as DEFAULT_WATCHDOG
from ._watchdog import WatchdogInterrupt as WatchdogInterrupt
