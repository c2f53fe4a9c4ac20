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
    envvar="KELPIE_API_KEY",
    default=None,
    metavar="KEY",
    help="Require 'Authorization: Bearer KEY' on every route but health [env: KELPIE_API_KEY].",
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
    data_dir: Path | None,
    node_id: str | None,
    lease_duration: float,
    shutdown_grace: float,
    log_level: str,
) -> None:
    """Serve the Letta-compatible REST API until SIGTERM or SIGINT."""
    config = _config(
        host, port, db, llm, api_key, data_dir, node_id, lease_duration, shutdown_grace, log_level
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


def _config(
    host: str,
    port: int,
    db: str | None,
    llm: str | None,
    api_key: str | None,
    data_dir: Path | None,
    node_id: str | None,
    lease_duration: float,
    shutdown_grace: float,
    log_level: str,
) -> ServeConfig:
    if not host:
        raise ServeUsageError("--host must not be empty")
    if api_key is None and "KELPIE_API_KEY" in os.environ:
        api_key = os.environ["KELPIE_API_KEY"]  # click ignores an empty variable; we refuse it
    if api_key is not None and not api_key.strip():
        raise ServeUsageError("--api-key (or KELPIE_API_KEY) is empty; unset it for no auth")
    has_key = bool(os.environ.get("ANTHROPIC_API_KEY"))
    if llm == "anthropic" and not has_key:
        raise ServeUsageError("--llm anthropic needs ANTHROPIC_API_KEY in the environment")
    data_dir = data_dir if data_dir is not None else default_data_dir()
    return ServeConfig(
        host=host,
        port=port,
        db=parse_db(db, data_dir.absolute()),
        llm=llm or ("anthropic" if has_key else "sim"),
        llm_defaulted=llm is None and not has_key,
        api_key=api_key,
        data_dir=data_dir.absolute(),
        node_id=None if node_id is None else check_node_id(node_id),
        lease_duration=lease_duration,
        shutdown_grace=shutdown_grace,
        log_level=log_level,
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
