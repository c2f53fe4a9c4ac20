"""The one error root of kelpie_agent.

Every exception that kelpie_agent raises on purpose derives from :class:`KelpieError`, so callers
can catch the package's failures without catching programming errors.
"""

from __future__ import annotations

__all__ = ["KelpieError"]


class KelpieError(Exception):
    """Root of every error kelpie_agent raises on purpose."""
