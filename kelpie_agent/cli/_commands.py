"""The ``kelpie`` command line: ``kelpie serve`` (docs/deployment.md).

Other tooling depends on the flag spellings; keep them stable. Usage errors (a bad flag, a
database or port the server cannot use) print one line to stderr and exit 64, never a
traceback, like ``kelpie-dst``. The heavy imports (FastAPI, the agent runtime) happen only
once the flags are checked.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import attrs
import click

from ._config import (
    DEFAULT_PORT,
    ServeConfig,
    ServeUsageError,
    check_node_id,
    default_data_dir,
    parse_db,
)

__all__ = ["EXIT_USAGE", "cli", "main"]

EXIT_USAGE = 64
_NO_ARGS_IS_HELP: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kelpie", prog_name="kelpie")
def cli() -> None:
    """Kelpie's Letta-compatible agent server."""


@cli.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="TCP port; 0 picks a free one (printed at startup).",
)
@click.option(
    "--db",
    metavar="URL",
    default=None,
    help="sqlite:///PATH or postgresql://USER@HOST/DB (default: sqlite in the data dir).",
)
@click.option(
    "--llm",
    type=click.Choice(["anthropic", "sim"]),
    default=None,
    help="anthropic (needs ANTHROPIC_API_KEY) or sim, the local deterministic model "
    "(default: anthropic if ANTHROPIC_API_KEY is set, else sim).",
)
@click.option(
    "--api-key",
    default=None,
    metavar="KEY",
    help="Discouraged (any local user can read a command line): prefer KELPIE_API_KEY or "
    "--api-key-file.",
)
@click.option(
    "--api-key-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    metavar="PATH",
    help="Require 'Authorization: Bearer KEY' on every route but health, KEY being this "
    "file's content (or set KELPIE_API_KEY).",
)
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where the default database and tool sandboxes live (default: $KELPIE_HOME or ~/.kelpie).",
)
@click.option(
    "--node-id",
    default=None,
    help="This process's name in leases (default: the host name with SQLite, host:port "
    "with PostgreSQL). Unique among live nodes; reuse it on restart.",
)
@click.option(
    "--lease-duration",
    type=click.FloatRange(1, 3600),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="How long an agent stays with a node that stopped renewing (a killed node's agents "
    "move after this).",
)
@click.option(
    "--shutdown-grace",
    type=click.FloatRange(0, 3600),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="On SIGTERM/SIGINT, how long requests in flight may take to finish.",
)
@click.option(
    "--sandbox-allow-host",
    "sandbox_allow",
    multiple=True,
    metavar="HOST",
    help="A host (api.example.com, *.example.com, HOST:PORT) tools may reach when their "
    "agent's metadata.sandbox_allow_hosts names it too; repeat for more. Default: none.",
)
@click.option(
    "--tool-timeout",
    type=click.FloatRange(0.1, 3600),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="How long one custom, sandbox or MCP tool call may run before it is killed.",
)
@click.option(
    "--sandbox-memory",
    type=click.IntRange(16, 1 << 20),
    default=512,
    show_default=True,
    metavar="MB",
    help="Address space of each process a tool starts.",
)
@click.option(
    "--sandbox-disk",
    type=click.IntRange(1, 1 << 24),
    default=256,
    show_default=True,
    metavar="MB",
    help="Size of an agent's sandbox working directory (one file: at most a quarter of it).",
)
@click.option(
    "--sandbox-processes",
    type=click.IntRange(1, 4096),
    default=64,
    show_default=True,
    metavar="N",
    help="Processes and threads one tool call may have at once.",
)
@click.option(
    "--unsafe-sandbox",
    is_flag=True,
    default=False,
    help="Run custom and sandbox tools without namespaces (when bubblewrap is missing): "
    "tool code can then read what the server can.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="Of the problems logged to stderr (the request log is on stdout).",
)
def serve_command(
    host: str,
    port: int,
    db: str | None,
    llm: str | None,
    api_key: str | None,
    api_key_file: Path | None,
    data_dir: Path | None,
    node_id: str | None,
    lease_duration: float,
    shutdown_grace: float,
    sandbox_allow: tuple[str, ...],
    tool_timeout: float,
    sandbox_memory: int,
    sandbox_disk: int,
    sandbox_processes: int,
    unsafe_sandbox: bool,
    log_level: str,
) -> None:
    """Serve the Letta-compatible REST API until SIGTERM or SIGINT."""
    config = _config(
        Flags(
            host=host,
            port=port,
            db=db,
            llm=llm,
            api_key=api_key,
            api_key_file=api_key_file,
            data_dir=data_dir,
            node_id=node_id,
            lease_duration=lease_duration,
            shutdown_grace=shutdown_grace,
            sandbox_allow=sandbox_allow,
            tool_timeout=tool_timeout,
            sandbox_sizes=(sandbox_memory, sandbox_disk, sandbox_processes),
            unsafe_sandbox=unsafe_sandbox,
            log_level=log_level,
        )
    )
    # Until the server's own signal handling takes over, SIGTERM (like SIGINT) stops the
    # start cleanly; nothing has been opened yet that needs more.
    received: list[str] = []

    def stop_starting(number: int, _: object) -> None:
        received.append(signal.Signals(number).name)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_starting)
    signal.signal(signal.SIGINT, stop_starting)
    from ._output import configure_logging, say

    try:
        configure_logging(log_level)
        import trio

        from ._serve import serve_main

        signal.signal(signal.SIGINT, signal.default_int_handler)  # trio's, safe in its core
        trio.run(serve_main, config)
    except KeyboardInterrupt:
        say(f"{received[-1] if received else 'SIGINT'}: stopped during startup")


@attrs.frozen
class Flags:
    """The flags of ``kelpie serve`` as given (checked by :func:`_config`)."""

    host: str
    port: int
    db: str | None
    llm: str | None
    api_key: str | None = attrs.field(repr=False)
    api_key_file: Path | None
    data_dir: Path | None
    node_id: str | None
    lease_duration: float
    shutdown_grace: float
    sandbox_allow: tuple[str, ...]
    tool_timeout: float
    sandbox_sizes: tuple[int, int, int]  # memory MB, disk MB, processes
    unsafe_sandbox: bool
    log_level: str


def _api_key(flags: Flags) -> tuple[str | None, str]:
    """The API key and where it came from: ``--api-key-file``, ``KELPIE_API_KEY`` or
    ``--api-key`` (at most one of them). The variable is removed from the environment, so no
    child process inherits it."""
    env = os.environ.pop("KELPIE_API_KEY", None)
    given = [
        name
        for name, value in (
            ("--api-key-file", flags.api_key_file),
            ("KELPIE_API_KEY", env),
            ("--api-key", flags.api_key),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise ServeUsageError(f"the API key is given twice ({' and '.join(given)}); give one")
    if flags.api_key_file is not None:
        path = flags.api_key_file
        try:
            key = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or type(error).__name__
            raise ServeUsageError(f"--api-key-file {path}: cannot read it ({reason})") from None
        if not key or "\n" in key:
            raise ServeUsageError(f"--api-key-file {path}: must hold one non-empty line")
        return key, "--api-key-file"
    value = env if env is not None else flags.api_key
    if value is not None and not value.strip():
        raise ServeUsageError(f"{given[0]} is empty; unset it for no auth")
    return value, given[0] if given else ""


def _config(flags: Flags) -> ServeConfig:
    if not flags.host:
        raise ServeUsageError("--host must not be empty")
    api_key, key_source = _api_key(flags)
    anthropic_key = os.environ.pop("ANTHROPIC_API_KEY", None) or None
    llm = flags.llm
    if llm == "anthropic" and not anthropic_key:
        raise ServeUsageError("--llm anthropic needs ANTHROPIC_API_KEY in the environment")
    allow = []
    if flags.sandbox_allow:  # (the sandbox package imports trio: only when needed)
        from kelpie_agent.sandbox import check_host_pattern
    for pattern in flags.sandbox_allow:
        try:
            allow.append(check_host_pattern(pattern))
        except ValueError as error:
            raise ServeUsageError(f"--sandbox-allow-host: {error}") from None
    data_dir = flags.data_dir if flags.data_dir is not None else default_data_dir()
    return ServeConfig(
        host=flags.host,
        port=flags.port,
        db=parse_db(flags.db, data_dir.absolute()),
        llm=llm or ("anthropic" if anthropic_key else "sim"),
        llm_defaulted=llm is None and not anthropic_key,
        api_key=api_key,
        api_key_source=key_source,
        anthropic_key=anthropic_key if (llm or "anthropic") == "anthropic" else None,
        data_dir=data_dir.absolute(),
        node_id=None if flags.node_id is None else check_node_id(flags.node_id),
        lease_duration=flags.lease_duration,
        shutdown_grace=flags.shutdown_grace,
        sandbox_allow=tuple(allow),
        tool_timeout=flags.tool_timeout,
        sandbox_sizes=flags.sandbox_sizes,
        unsafe_sandbox=flags.unsafe_sandbox,
        log_level=flags.log_level,
    )


def _usage_error(message: str) -> NoReturn:
    print(f"kelpie: error: {message}", file=sys.stderr)
    sys.exit(EXIT_USAGE)


def _only_leaf(error: BaseException) -> BaseException:
    """The one exception inside nested exception groups (trio's nurseries wrap), or
    ``error`` itself when there are several."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point: usage errors are one line and exit 64; Ctrl-C while the command
    line is read exits 130; from then on (startup included) SIGINT and SIGTERM stop the
    server gracefully: exit 0."""
    try:
        cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="kelpie",
            standalone_mode=False,
        )
    except _NO_ARGS_IS_HELP as error:
        assert error.ctx is not None
        print(error.ctx.get_help())
        sys.exit(0)
    except click.UsageError as error:
        _usage_error(error.format_message().replace("\n", " "))
    except click.exceptions.Exit as error:
        sys.exit(error.exit_code)
    except (click.Abort, KeyboardInterrupt):
        print("kelpie: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except BaseException as error:
        leaf = _only_leaf(error)
        if isinstance(leaf, ServeUsageError):
            _usage_error(str(leaf))
        raise
