"""The sandbox port: somewhere to run an agent's tool code, with a lifecycle and snapshots.

kelpie_agent runs tool code only through :class:`Sandbox`, so the same agent code uses
:class:`~kelpie_agent.sandbox.ProcessSandbox` (real subprocesses) in production and
``kelpie_dst.shims.SimSandbox`` (in-process, virtual time) in simulation. The semantics every
implementation must honour are written down in ``docs/sandbox.md`` and checked by
``kelpie_agent.sandbox.testing.check_sandbox_conformance``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Protocol

import attrs

from ._network import SandboxNetwork

__all__ = [
    "ALLOW_HOSTS_KEY",
    "ExecResult",
    "Sandbox",
    "SandboxLimits",
    "SandboxRequest",
    "SandboxState",
    "agent_network",
]

ALLOW_HOSTS_KEY = "sandbox_allow_hosts"  # in an agent's metadata: the hosts its tools may reach


class SandboxState(enum.Enum):
    """Where a sandbox is in its life. ``STOPPED`` is final (stopped, failed to boot, crashed)."""

    CREATED = "created"
    BOOTING = "booting"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"


@attrs.frozen
class ExecResult:
    """What one command left behind.

    ``exit_code`` follows ``subprocess``: 0 is success, a negative number ``-N`` means the
    process was killed by signal ``N`` (e.g. ``-SIGXCPU`` for the CPU-time limit).
    ``duration`` is in seconds of trio time (virtual time in a simulation). ``truncated`` is
    true when stdout or stderr went past ``SandboxLimits.max_output_bytes`` and was cut short.
    """

    stdout: str
    stderr: str
    exit_code: int
    duration: float
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def _positive(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"SandboxLimits.{attribute.name} must be a number, not {value!r}")
    if not value > 0:
        raise ValueError(f"SandboxLimits.{attribute.name} must be positive, got {value!r}")


def _positive_int(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"SandboxLimits.{attribute.name} must be an int, not {value!r}")
    if value <= 0:
        raise ValueError(f"SandboxLimits.{attribute.name} must be positive, got {value!r}")


@attrs.frozen
class SandboxLimits:
    """Resource limits for every command a sandbox runs (see docs/sandbox.md for enforcement).

    ``timeout`` is the default wall-clock limit of one exec (callers may pass their own);
    ``cpu_seconds``, ``memory_bytes`` (address space) and ``file_size_bytes`` (largest file a
    command or a file tool may write) apply per process; ``max_output_bytes`` caps what is kept
    of each of stdout and stderr. ``processes`` caps the processes and threads one command may
    have at once; ``disk_bytes`` caps the working area as a whole (a command that grows it past
    the limit is killed).
    """

    timeout: float = attrs.field(default=30.0, validator=_positive)
    cpu_seconds: int = attrs.field(default=30, validator=_positive_int)
    memory_bytes: int = attrs.field(default=512 * 1024 * 1024, validator=_positive_int)
    file_size_bytes: int = attrs.field(default=64 * 1024 * 1024, validator=_positive_int)
    max_output_bytes: int = attrs.field(default=1024 * 1024, validator=_positive_int)
    processes: int = attrs.field(default=64, validator=_positive_int)
    disk_bytes: int = attrs.field(default=256 * 1024 * 1024, validator=_positive_int)


@attrs.frozen
class SandboxRequest:
    """What an agent asks its sandbox factory for: its id (``owner``) and the network its
    configuration allows (``metadata["sandbox_allow_hosts"]``, see :func:`agent_network`).
    A factory may narrow the network (``kelpie serve --sandbox-allow-host``), never widen it."""

    owner: str
    network: SandboxNetwork = attrs.field(factory=SandboxNetwork)


def agent_network(metadata: Mapping[str, Any]) -> SandboxNetwork:
    """The network an agent's metadata allows: ``metadata["sandbox_allow_hosts"]``, a list of
    host patterns (none when absent). ValueError, naming the field, when it is malformed."""
    hosts = metadata.get(ALLOW_HOSTS_KEY)
    if hosts is None:
        return SandboxNetwork()
    field = f"metadata.{ALLOW_HOSTS_KEY}"
    if not isinstance(hosts, list | tuple):
        raise ValueError(f"{field}: must be a list of host patterns, got {type(hosts).__name__}")
    try:
        return SandboxNetwork(hosts)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{field}: {error}") from None


class Sandbox(Protocol):
    """A sandbox: created -> (boot) -> running <-> paused -> stopped.

    An operation that is not legal in the current state raises ``SandboxStateError`` and changes
    nothing. ``stop`` is legal in every state (and a no-op once stopped).
    """

    @property
    def state(self) -> SandboxState:
        """The current state."""
        ...

    @property
    def workdir(self) -> str:
        """The absolute path of the working area, as commands inside the sandbox see it."""
        ...

    @property
    def limits(self) -> SandboxLimits:
        """The limits every command runs under."""
        ...

    async def boot(self) -> None:
        """Created -> booting -> running; ``SandboxBootError`` (and stopped) if it fails."""
        ...

    async def exec(self, command: str, *, timeout: float | None = None) -> ExecResult:
        """Run a shell command in the working area (running only).

        A non-zero exit is a result, not an error. Past ``timeout`` seconds (default
        ``limits.timeout``) the command is killed and ``ExecTimeoutError`` raised; the sandbox
        stays running. ``SandboxCrashedError`` if the sandbox crashes meanwhile.
        """
        ...

    async def exec_python(self, code: str, *, timeout: float | None = None) -> ExecResult:
        """Run Python source like :meth:`exec` runs a command: output printed, ``sys.exit(n)``
        exits with ``n``, an uncaught exception exits with 1 and its traceback on stderr."""
        ...

    async def pause(self) -> None:
        """Running -> paused: running commands freeze (their timeouts stop counting) and new
        commands and file tools are refused. ``PauseError`` if it fails (still running)."""
        ...

    async def resume(self) -> None:
        """Paused -> running."""
        ...

    async def snapshot(self) -> bytes:
        """The working area as self-checking bytes (running or paused); ``SnapshotError``."""
        ...

    async def restore(self, snapshot: bytes) -> None:
        """Replace the working area with a snapshot's (running or paused, no command running).

        ``CorruptSnapshotError`` if the bytes fail their checksum, ``RestoreError`` for any other
        failure; either way the working area is unchanged.
        """
        ...

    async def stop(self) -> None:
        """Kill running commands, release everything; final. Stopping twice is fine."""
        ...

    async def read_file(self, path: str) -> bytes:
        """The contents of a file in the working area (running only).

        ``path`` is relative to :attr:`workdir` or absolute inside it; anything leading outside
        (``..``, absolute paths elsewhere, symlinks out) raises ``PathOutsideSandboxError``.
        ``SandboxFileError`` for a missing file, a directory, or a file over the size limit.
        """
        ...

    async def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a file (and its missing parent directories) in the working area."""
        ...

    async def list_files(self, path: str = ".") -> list[str]:
        """The names in a directory of the working area, sorted; directories end with ``/``."""
        ...
