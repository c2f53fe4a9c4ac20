"""What ``kelpie serve`` writes: status lines and the request log on stdout, problems on stderr.

stdout carries lines an operator (or a supervising script) reads: ``kelpie: ...`` status
lines, among them the one naming the URL, and one access line per request in the format of
:meth:`kelpie_agent.http.AccessRecord.line`. Each line is flushed as it is written, so a pipe
or a log collector sees it at once. Warnings and errors (the HTTP server's logger, the
service's and the runtime's notable events) go to stderr through :mod:`logging`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from kelpie_agent.http import AccessRecord

__all__ = ["LOGGER", "access_line", "configure_logging", "observe", "redact", "say", "set_secrets"]

LOGGER = logging.getLogger("kelpie")
MASK = "***"
MIN_SECRET = 8  # shorter values are not masked: they would garble ordinary words
_secrets: tuple[str, ...] = ()

# What the runtime and the API report through their observer, and at what level it is logged.
_LEVELS = {
    "api.error": logging.ERROR,
    "api.stream_error": logging.ERROR,
    "api.async_run_error": logging.ERROR,
    "actor.lease_lost": logging.WARNING,
    "actor.forced_takeover": logging.WARNING,
    "actor.acquire_error": logging.WARNING,
    "actor.acquired_unreadable": logging.WARNING,
    "service.retry": logging.INFO,
}


def set_secrets(secrets: tuple[str, ...]) -> None:
    """The values (API keys, a database password) that :func:`redact` hides from every line
    ``kelpie serve`` writes (those of at least MIN_SECRET characters)."""
    global _secrets
    _secrets = tuple(sorted({s for s in secrets if len(s) >= MIN_SECRET}, key=len, reverse=True))


def redact(text: str) -> str:
    for secret in _secrets:
        text = text.replace(secret, MASK)
    return text


def say(text: str) -> None:
    """One status line on stdout: ``kelpie: <text>``."""
    sys.stdout.write(redact(f"kelpie: {text}\n"))
    sys.stdout.flush()


def access_line(record: AccessRecord) -> None:
    """The request log: one line per request (a key a client put in a URL is masked)."""
    sys.stdout.write(redact(record.line()) + "\n")
    sys.stdout.flush()


class _RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def observe(kind: str, **fields: Any) -> None:
    """The observer of the service, the dispatcher and the app: logs the notable events
    (errors, lost leases, retries); the routine lifecycle (``actor.acquired``, ...) at debug."""
    level = _LEVELS.get(kind, logging.DEBUG)
    if LOGGER.isEnabledFor(level):
        details = " ".join(f"{key}={value}" for key, value in fields.items())
        LOGGER.log(level, "%s %s", kind, details)


def configure_logging(level: str) -> None:
    """Warnings and errors to stderr, one line each (the request log is on stdout)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter("kelpie: %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
