"""Running one ProcessSandbox command: in namespaces (bubblewrap and the supervisor), or plain.

:func:`run` starts the process, drains its output into capped buffers, waits for it under the
command's cancel scope (its timeout), and kills whatever is left when it ends or is cancelled.
:class:`Running` is the handle ``pause``/``resume``/``stop`` use meanwhile.

* Namespaces (``isolation="namespaces"``): ``bwrap ... python -I -S -c SUPERVISOR CONFIG
  COMMAND...``. The supervisor is PID 1 of the sandbox; pause and resume are bytes on its
  control socket (it stops every process of the namespace, including ones that left the
  command's session); its last word is the command's wait status, and whether it was killed
  for filling the disk. Killing bubblewrap's process group kills the supervisor (parent-death
  signal, and end of file on the control socket), and with it the namespace.
* Plain (``isolation="none"``, ``kelpie serve --unsafe-sandbox``): the command runs through a
  small wrapper that sets the rlimits and ``execv``'s it, as its own process group; pause and
  stop signal that group. Nothing else is isolated.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs
import trio

from ._checks import DISK_MESSAGE, OutputBuffer
from ._errors import SandboxError
from ._lifecycle import Lifecycle
from ._port import ExecResult, SandboxLimits
from ._supervisor import FIELDS

__all__ = ["PLAIN_WRAPPER", "SUPERVISOR", "Running", "run", "signal_group"]

SUPERVISOR = Path(__file__).with_name("_supervisor.py").read_text(encoding="utf-8")
PLAIN_WRAPPER = """\
import os, resource as r, sys
cpu, mem, fsize = (int(v) for v in sys.argv[1:4])
def cap(kind, soft, hard):
    top = r.getrlimit(kind)[1]
    if top != r.RLIM_INFINITY:
        soft, hard = min(soft, top), min(hard, top)
    r.setrlimit(kind, (soft, hard))
cap(r.RLIMIT_CPU, cpu, cpu + 1)
cap(r.RLIMIT_AS, mem, mem)
cap(r.RLIMIT_FSIZE, fsize, fsize)
cap(r.RLIMIT_CORE, 0, 0)
try:
    os.execv(sys.argv[4], sys.argv[4:])
except OSError as error:
    sys.stderr.write(f"sandbox: cannot run {sys.argv[4]}: {error.strerror}\\n")
    sys.exit(127)
"""
DRAIN_GRACE = 0.5  # seconds to collect output after a plain command exits (escaped grandchildren)


def signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone (or its id reused by someone else's process): nothing to do


@attrs.define
class Running:
    """A command in flight: its process group, and the supervisor's control channel."""

    pgid: int
    control: trio.SocketStream | None = None

    async def pause(self) -> None:
        if self.control is None:
            os.killpg(self.pgid, signal.SIGSTOP)  # raises if it cannot: the caller undoes
            return
        await self.control.send_all(b"S")

    async def resume(self) -> None:
        if self.control is None:
            signal_group(self.pgid, signal.SIGCONT)
            return
        try:
            await self.control.send_all(b"C")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # it just finished

    def kill(self) -> None:
        signal_group(self.pgid, signal.SIGKILL)


@attrs.frozen
class Launch:
    """How to start one command: the argv, its environment, and in namespaces the
    supervisor's configuration (``None`` for a plain command)."""

    argv: list[str]
    env: dict[str, str]
    workdir: str
    supervised: bool
    pass_fds: tuple[int, ...] = ()


def plain_argv(limits: SandboxLimits, command: Sequence[str]) -> list[str]:
    return [
        sys.executable,
        "-I",
        "-S",
        "-c",
        PLAIN_WRAPPER,
        str(limits.cpu_seconds),
        str(limits.memory_bytes),
        str(limits.file_size_bytes),
        *command,
    ]


def supervisor_argv(script: str, settings: dict[str, str], command: Sequence[str]) -> list[str]:
    """The supervisor (its source at ``script``, as the sandbox sees it) running ``command``."""
    values = [settings[name] for name in FIELDS]
    return [sys.executable, "-I", "-S", script, *values, "--", *command]


async def _drain(stream: trio.abc.ReceiveStream | None, buffer: OutputBuffer) -> None:
    assert stream is not None
    while chunk := await stream.receive_some(65536):
        buffer.add(chunk)


async def _last_word(control: trio.SocketStream, into: dict[str, str]) -> None:
    """The supervisor's line, ``WAIT_STATUS REASON`` (read until end of file)."""
    data = b""
    try:
        while chunk := await control.receive_some(4096):
            data += chunk
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return
    status, _, reason = data.decode("ascii", "replace").strip().partition(" ")
    if status.isdigit():
        into.update(status=status, reason=reason)
    # else it died before it could say: the process's own exit code stands


async def run(
    launch: Launch,
    limits: SandboxLimits,
    life: Lifecycle,
    running: dict[int, Running],
    timeout: float,
    what: str,
) -> ExecResult:
    """Run one command to its end (or its timeout: ``ExecTimeoutError``)."""
    from ._errors import ExecTimeoutError

    start = trio.current_time()
    ours, theirs = socket.socketpair() if launch.supervised else (None, None)
    try:
        proc = await trio.lowlevel.open_process(
            launch.argv,
            stdin=theirs.fileno() if theirs is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=launch.workdir,
            env=launch.env,
            start_new_session=True,
            pass_fds=launch.pass_fds,
        )
    except OSError as error:
        if ours is not None:
            ours.close()
        raise SandboxError(f"could not start a process for {what}: {error}") from error
    finally:
        if theirs is not None:
            theirs.close()
    control = trio.SocketStream(trio.socket.from_stdlib_socket(ours)) if ours else None
    out = OutputBuffer(limits.max_output_bytes)
    err = OutputBuffer(limits.max_output_bytes)
    word: dict[str, str] = {}
    exited = False
    try:
        with life.command(timeout):
            handle = running[proc.pid] = Running(proc.pid, control)
            if life.state.value == "paused":  # paused while we were spawning
                try:
                    await handle.pause()
                except (OSError, trio.BrokenResourceError):
                    pass
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_drain, proc.stdout, out)
                nursery.start_soon(_drain, proc.stderr, err)
                if control is not None:
                    nursery.start_soon(_last_word, control, word)
                await proc.wait()
                exited = True
                handle.kill()  # whatever it left behind
                nursery.cancel_scope.deadline = trio.current_time() + DRAIN_GRACE
    finally:
        running.pop(proc.pid, None)
        if not exited:
            signal_group(proc.pid, signal.SIGKILL)
        with trio.CancelScope(shield=True):
            await proc.wait()
            for stream in (proc.stdout, proc.stderr, control):
                if stream is not None:
                    await stream.aclose()
    life.check_alive(what)
    if not exited:
        raise ExecTimeoutError(
            f"{what} ran past its {timeout:g} s timeout and was killed",
            timeout=timeout,
            stdout=out.text,
            stderr=err.text,
        )
    assert proc.returncode is not None
    code = proc.returncode
    if "status" in word:
        code = os.waitstatus_to_exitcode(int(word["status"]))
    stderr = err.text
    if word.get("reason") == "disk":
        code = -signal.SIGXFSZ
        stderr += DISK_MESSAGE.format(limits.disk_bytes)
    duration = trio.current_time() - start
    return ExecResult(out.text, stderr, code, duration, out.truncated or err.truncated)
