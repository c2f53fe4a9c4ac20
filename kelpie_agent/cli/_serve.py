"""``kelpie serve``: one production node (docs/deployment.md).

Startup, in order: the data directory, the listening socket (so a port in use fails before
anything else is touched), the database, the LLM, the node (``open_agent_node`` with
``system_ports()``), ``repair()``, then the HTTP server on the socket, and the line naming
the URL. Any of these failing is a :class:`ServeUsageError` (one line, exit 64).

Stopping: the first SIGTERM or SIGINT stops accepting, lets requests in flight finish for up
to ``--shutdown-grace`` seconds, then leaves the node, which deactivates the agents and
releases their leases, and closes the database: exit 0. A second signal cancels the drain
(leases are still released). A signal during startup stops it.
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import trio

from kelpie_agent.actors import DispatcherOptions
from kelpie_agent.agent import LoopConfig
from kelpie_agent.api import create_app
from kelpie_agent.http import HttpServer, ServerOptions
from kelpie_agent.llm import LlmClient
from kelpie_agent.ports import system_ports
from kelpie_agent.sandbox import (
    ProcessSandbox,
    Sandbox,
    SandboxNetwork,
    SandboxRequest,
    isolation_problem,
)
from kelpie_agent.service import AgentService, ServiceOptions, open_agent_node
from kelpie_agent.storage import KV, PostgresKV, SqliteKV, StorageError

from ._config import PostgresDb, ServeConfig, ServeUsageError, SqliteDb, default_node_id
from ._output import LOGGER, MIN_SECRET, access_line, observe, say, set_secrets

__all__ = ["dispatcher_options", "sandbox_factory", "serve_main", "sim_llm"]

SANDBOXES = "sandboxes"  # in the data dir: the working directories of custom tools' runs


def dispatcher_options(lease_duration: float) -> DispatcherOptions:
    """The actor runtime's timing from ``--lease-duration`` (30 s gives the defaults:
    renewal every 10 s, a 5 s margin for clock skew, polls every second)."""
    return DispatcherOptions(
        lease_duration=lease_duration,
        renew_every=lease_duration / 3,
        lease_margin=lease_duration / 6,
        poll_interval=min(1.0, lease_duration / 10),
        acquire_timeout=max(60.0, 2 * lease_duration),
    )


def sim_llm() -> LlmClient:
    """The local deterministic model: kelpie_dst's "helpful" policy with timing like a fast
    hosted model (50-250 ms to the first token, 150 tokens/s), so streaming is visible."""
    from kelpie_dst.shims import HelpfulPolicy, LlmTiming, SimLlmClient

    timing = LlmTiming(ttft_min=0.05, ttft_max=0.25, tokens_per_second=150.0)
    return SimLlmClient(HelpfulPolicy(), timing=timing)


@attrs.define
class _Lifecycle:
    """Shared between the server and the signal watcher."""

    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    stop: trio.Event = attrs.Factory(trio.Event)
    serving: bool = False
    signal_name: str = ""


async def serve_main(config: ServeConfig) -> None:
    """Run the server until a signal stops it."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        life = _Lifecycle()
        async with trio.open_nursery() as root:
            root.start_soon(_watch_signals, signals, life)
            with life.scope:
                await _run(config, life)
            root.cancel_scope.cancel()
    say("stopped")


async def _watch_signals(signals: AsyncIterator[int], life: _Lifecycle) -> None:
    async for number in signals:
        name = signal.Signals(number).name
        if life.serving and not life.stop.is_set():
            life.signal_name = name
            life.stop.set()
        else:  # during startup, or a second signal: stop now
            say(f"{name}: stopping now")
            life.scope.cancel()


def sandbox_factory(config: ServeConfig) -> Callable[[SandboxRequest], Sandbox]:
    """Each agent's sandbox: in the data dir, which (with the database) its commands cannot
    see; reaching only the hosts both the agent and ``--sandbox-allow-host`` name."""
    ceiling = SandboxNetwork(config.sandbox_allow)
    hidden = [config.data_dir]
    if isinstance(config.db, SqliteDb):
        hidden.append(config.db.path.parent)

    def make(request: SandboxRequest) -> Sandbox:
        return ProcessSandbox(
            config.sandbox_limits,
            parent_dir=config.data_dir / SANDBOXES,
            isolation="none" if config.unsafe_sandbox else "namespaces",
            network=request.network.under(ceiling),
            hide=hidden,
        )

    return make


async def _check_sandbox(config: ServeConfig) -> None:
    """Say once, at startup, when tool code cannot be isolated (the tools will refuse)."""
    if config.unsafe_sandbox:
        say(
            "warning: --unsafe-sandbox: custom and sandbox tools run without namespaces and can "
            "read whatever this server's user can"
        )
        return
    problem = await isolation_problem(config.data_dir / SANDBOXES)
    if problem is not None:
        say(
            f"sandbox: {problem}: custom and sandbox tools are refused (install Debian's "
            "bubblewrap, or start with --unsafe-sandbox to run them without isolation)"
        )


async def _run(config: ServeConfig, life: _Lifecycle) -> None:
    set_secrets(config.secrets)
    _prepare_data_dir(config.data_dir)
    listeners = await _listen(config.host, config.port)
    try:
        port = int(listeners[0].socket.getsockname()[1])
        node_id = config.node_id or default_node_id(config.db, port)
        async with (
            _open_kv(config, node_id) as kv,
            _open_llm(config) as llm,
            open_agent_node(
                kv,
                system_ports(),
                node_id=node_id,
                llm=llm,
                sandbox_factory=sandbox_factory(config),
                loop_config=LoopConfig(tool_timeout=config.tool_timeout),
                dispatcher_options=dispatcher_options(config.lease_duration),
                options=ServiceOptions(request_timeout=max(60.0, 2 * config.lease_duration)),
                observer=observe,
            ) as service,
        ):
            await _repair(service)
            await _check_sandbox(config)
            app = create_app(service, api_key=config.api_key, observer=observe)
            options = ServerOptions(shutdown_grace=config.shutdown_grace)
            server = HttpServer(app, options, logger=LOGGER, access_log=access_line)
            async with trio.open_nursery() as nursery:
                await nursery.start(server.serve_listeners, listeners)
                listeners = []  # the server owns them now
                _notices(config)
                say(_listening_line(config, port, node_id))
                life.serving = True
                await life.stop.wait()
                say(f"{life.signal_name}: draining requests (up to {config.shutdown_grace:g} s)")
                await server.shutdown(config.shutdown_grace)
            say("releasing leases")
    finally:
        for listener in listeners:
            await trio.aclose_forcefully(listener)


def _prepare_data_dir(path: Path) -> None:
    """Create the data directory if needed and check that files can be written in it."""
    probe = path / f".kelpie-write-check-{os.getpid()}"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        (path / SANDBOXES).mkdir(mode=0o700, exist_ok=True)
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ServeUsageError(f"--data-dir {path}: not a writable directory ({reason})") from None


async def _listen(host: str, port: int) -> list[trio.SocketListener]:
    try:
        return await trio.open_tcp_listeners(port, host=host)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            reason = "the address is already in use (another server on that port?)"
        else:
            reason = error.strerror or str(error)
        raise ServeUsageError(f"cannot listen on {host}:{port}: {reason}") from None


@asynccontextmanager
async def _open_kv(config: ServeConfig, node_id: str) -> AsyncIterator[KV]:
    db = config.db
    kv: KV
    try:
        if isinstance(db, SqliteDb):
            if not db.path.parent.is_dir():
                raise ServeUsageError(f"--db {db.url}: the directory {db.path.parent} is missing")
            kv = await SqliteKV.open(db.path)
        else:
            assert isinstance(db, PostgresDb)
            kv = await PostgresKV.open(db.connect_dsn(node_id))
    except StorageError as error:
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        if isinstance(db, SqliteDb) and "locked" in detail:
            detail += " (is another kelpie serve using this file?)"
        raise ServeUsageError(f"--db {db.url}: cannot open the database: {detail}") from None
    try:
        yield kv
    finally:
        with trio.CancelScope(shield=True):
            await kv.close()


@asynccontextmanager
async def _open_llm(config: ServeConfig) -> AsyncIterator[LlmClient]:
    if config.llm == "sim":
        yield sim_llm()
        return
    from kelpie_agent.llm import AnthropicLlm

    async with AnthropicLlm(api_key=config.anthropic_key) as llm:
        yield llm


async def _repair(service: AgentService) -> None:
    """What ``kelpie serve`` does once at start (docs/service.md, "Repair"); says what it
    fixed, if anything (a crash during an agent deletion, data written without the service)."""
    report = await service.repair()
    fixed = {name: value for name, value in attrs.asdict(report).items() if value}
    fixed.pop("agents", None)
    if fixed:
        details = ", ".join(f"{name} {value}" for name, value in fixed.items())
        say(f"repaired the agent index of {report.agents} agents: {details}")


def _notices(config: ServeConfig) -> None:
    if config.llm_defaulted:
        say("ANTHROPIC_API_KEY is not set: using the local deterministic model (llm sim)")
    if config.api_key_source == "--api-key":
        say(
            "warning: --api-key is visible to every local user (ps, /proc); use KELPIE_API_KEY "
            "or --api-key-file"
        )
    if config.api_key is not None and len(config.api_key) < MIN_SECRET:
        say(
            f"warning: the API key is shorter than {MIN_SECRET} characters: easy to guess, "
            "and log lines cannot mask it"
        )
    if config.api_key is None and config.host not in ("127.0.0.1", "localhost", "::1"):
        say(f"warning: no API key, and {config.host} may be reachable from other hosts")


def _listening_line(config: ServeConfig, port: int, node_id: str) -> str:
    host = f"[{config.host}]" if ":" in config.host else config.host
    auth = "on" if config.api_key else "off"
    return (
        f"listening on http://{host}:{port} (db {config.db.url}, llm {config.llm}, "
        f"node {node_id}, auth {auth})"
    )
