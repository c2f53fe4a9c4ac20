"""Dispatcher timings shared by the test harnesses.

Short leases and idle timeouts, so that leases expire and hand over, and actors deactivate and
move between nodes, within a short virtual run. The margin (2.5 s) exceeds the largest skew
between two nodes when each is skewed by at most 1 s. Harnesses that need another idle timeout
take ``attrs.evolve(SHORT_LEASES, idle_timeout=...)``.
"""

from __future__ import annotations

from kelpie_agent.actors import DispatcherOptions

SHORT_LEASES = DispatcherOptions(
    idle_timeout=4.0,
    lease_duration=6.0,
    renew_every=1.5,
    lease_margin=2.5,
    acquire_timeout=12.0,
    poll_interval=0.5,
    shutdown_timeout=2.0,
)
