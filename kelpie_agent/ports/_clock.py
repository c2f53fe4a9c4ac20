"""The Clock port: wall-clock time in epoch seconds."""

from __future__ import annotations

import datetime as _dt
import time
from typing import Protocol

__all__ = ["Clock", "SystemClock", "utc_datetime"]


class Clock(Protocol):
    """Wall-clock time. Use it for timestamps that users see, never for timeouts (use trio)."""

    def now(self) -> float:
        """Seconds since the Unix epoch. May jump backwards (NTP); never use it for durations."""
        ...


class SystemClock:
    """Production: the host's wall clock."""

    def now(self) -> float:
        return time.time()  # determinism-ok: the production side of the port


def utc_datetime(clock: Clock) -> _dt.datetime:
    """``clock.now()`` as an aware UTC datetime (never the host's local time zone)."""
    return _dt.datetime.fromtimestamp(clock.now(), tz=_dt.UTC)
