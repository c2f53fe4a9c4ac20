"""What ``kelpie serve`` was asked to do: the parsed, checked flags (docs/deployment.md).

Everything here is a value (attrs, frozen) or a pure function of the flags and the
environment, so the checks run before anything heavy is imported and a bad flag costs a
fraction of a second. Problems raise :class:`ServeUsageError`, one line naming the flag.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import attrs

from kelpie_agent.errors import KelpieError

if TYPE_CHECKING:
    from kelpie_agent.sandbox import SandboxLimits

__all__ = [
    "DEFAULT_PORT",
    "Database",
    "PostgresDb",
    "ServeConfig",
    "ServeUsageError",
    "SqliteDb",
    "default_data_dir",
    "default_node_id",
    "parse_db",
]

DEFAULT_PORT = 8283  # Letta's, so letta-client's environment="local" finds the server
DB_FILE = "kelpie.db"
CONNECT_TIMEOUT = 10  # seconds, when the DSN names none (libpq would wait forever)
_NODE_ID = re.compile(r"[A-Za-z0-9_.:@/-]{1,200}")


class ServeUsageError(KelpieError, ValueError):
    """Bad input to ``kelpie serve``: a flag, the environment, a database or port it cannot
    use. The message is one line; the CLI prints it and exits 64."""


@attrs.frozen
class SqliteDb:
    """The embedded default: one SQLite file, one server process."""

    path: Path

    @property
    def url(self) -> str:
        return f"sqlite://{self.path}"  # the path is absolute


@attrs.frozen
class PostgresDb:
    """A libpq connection string (``postgresql://`` or ``postgres://``) for several nodes."""

    dsn: str = attrs.field(repr=False)  # may carry a password

    @property
    def url(self) -> str:
        """The DSN with any password replaced by ``***`` (for the startup line and logs)."""
        parts = urlsplit(self.dsn)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostinfo = netloc.rpartition("@")
            user, has_password, _ = userinfo.partition(":")
            netloc = f"{user}:***@{hostinfo}" if has_password else netloc
        query = re.sub(r"(?i)(^|&)(password=)[^&]*", r"\1\2***", parts.query)
        return urlunsplit(parts._replace(netloc=netloc, query=query))

    def connect_dsn(self, node_id: str) -> str:
        """The DSN to connect with: the user's, plus ``connect_timeout`` (so an unreachable
        server is an error, not a hang) and ``application_name`` (``pg_stat_activity`` shows
        the node) unless the user gave them."""
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        given = conninfo_to_dict(self.dsn)
        extra: dict[str, str | int] = {}
        if "connect_timeout" not in given:
            extra["connect_timeout"] = CONNECT_TIMEOUT
        if "application_name" not in given:
            extra["application_name"] = f"kelpie {node_id}"[:63]
        return make_conninfo(self.dsn, **extra)


Database = SqliteDb | PostgresDb


def parse_db(value: str | None, data_dir: Path) -> Database:
    """``--db``: ``sqlite:///ABSOLUTE/PATH``, ``sqlite:RELATIVE/PATH``, ``postgresql://...``
    (any libpq URI, e.g. ``postgresql:///db?host=/run/postgresql``), or None for
    ``sqlite:///<data dir>/kelpie.db``."""
    if value is None:
        return SqliteDb(data_dir / DB_FILE)
    scheme, colon, rest = value.partition(":")
    if not colon or not scheme:
        raise ServeUsageError(
            f"--db {value!r} is not a URL: use sqlite:///PATH or postgresql://USER@HOST/DB"
        )
    scheme = scheme.lower()
    if scheme == "sqlite":
        return SqliteDb(_sqlite_path(value, rest))
    if scheme in ("postgresql", "postgres"):
        if not rest.startswith("//"):
            raise ServeUsageError(f"--db {value!r}: a PostgreSQL URL starts with {scheme}://")
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict

        try:
            conninfo_to_dict(value)
        except ProgrammingError as error:
            first = str(error).splitlines()[0] if str(error) else "malformed"
            raise ServeUsageError(f"--db: not a valid PostgreSQL URL: {first}") from None
        return PostgresDb(value)
    raise ServeUsageError(
        f"--db: unknown scheme {scheme!r} (use sqlite:///PATH or postgresql://USER@HOST/DB)"
    )


def _sqlite_path(value: str, rest: str) -> Path:
    if "?" in rest or "#" in rest:
        raise ServeUsageError(f"--db {value!r}: SQLite URLs take no query or fragment")
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if host or not slash:
            raise ServeUsageError(
                f"--db {value!r}: a SQLite URL has no host; use sqlite:///ABSOLUTE/PATH "
                "or sqlite:RELATIVE/PATH"
            )
        rest = "/" + path.lstrip("/")  # sqlite:////abs (SQLAlchemy's spelling) works too
    if rest in ("", "/") or rest.endswith("/"):
        raise ServeUsageError(f"--db {value!r}: names no file")
    return Path(os.path.abspath(rest))


def default_data_dir() -> Path:
    """``$KELPIE_HOME``, else ``~/.kelpie``."""
    home = os.environ.get("KELPIE_HOME")
    return Path(home) if home else Path.home() / ".kelpie"


def default_node_id(db: Database, port: int) -> str:
    """The node id when ``--node-id`` is not given.

    SQLite: the host name. The file is locked by one process, so leases in it can only be
    this host's earlier processes', and a restart on any port takes them back at once.
    PostgreSQL: ``host:port`` with the port bound, so two processes on one host differ and a
    process restarted on the same port takes its leases back at once.
    """
    host = socket.gethostname() or "localhost"
    return host if isinstance(db, SqliteDb) else f"{host}:{port}"


def check_node_id(value: str) -> str:
    if not _NODE_ID.fullmatch(value):
        raise ServeUsageError(
            f"--node-id {value!r}: use 1-200 letters, digits or the characters _ . : @ / -"
        )
    return value


@attrs.frozen
class ServeConfig:
    """The checked flags of ``kelpie serve``."""

    host: str
    port: int
    db: Database
    llm: str  # "sim" or "anthropic"
    llm_defaulted: bool  # sim because ANTHROPIC_API_KEY was not set
    api_key: str | None = attrs.field(repr=False)
    data_dir: Path
    node_id: str | None  # None: default_node_id once the port is bound
    lease_duration: float
    shutdown_grace: float
    log_level: str
    api_key_source: str = ""  # "--api-key-file", "KELPIE_API_KEY", "--api-key" or ""
    anthropic_key: str | None = attrs.field(default=None, repr=False)
    sandbox_allow: tuple[str, ...] = ()  # the hosts any agent's tools may be allowed
    tool_timeout: float = 60.0
    sandbox_sizes: tuple[int, int, int] = (512, 256, 64)  # memory MB, disk MB, processes
    unsafe_sandbox: bool = False  # tools run without namespaces

    @property
    def sandbox_limits(self) -> SandboxLimits:
        """Each tool call's limits: ``--tool-timeout``, ``--sandbox-memory``,
        ``--sandbox-disk`` (a quarter of it for one file) and ``--sandbox-processes``."""
        from kelpie_agent.sandbox import SandboxLimits

        memory, disk, processes = self.sandbox_sizes
        return SandboxLimits(
            timeout=self.tool_timeout,
            memory_bytes=memory << 20,
            disk_bytes=disk << 20,
            file_size_bytes=max(1, (disk << 20) // 4),
            processes=processes,
        )

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values no log line may show."""
        found = [self.api_key, self.anthropic_key]
        if isinstance(self.db, PostgresDb):
            from psycopg.conninfo import conninfo_to_dict

            found.append(str(conninfo_to_dict(self.db.dsn).get("password") or "") or None)
        return tuple(sorted({s for s in found if s}, key=len, reverse=True))
