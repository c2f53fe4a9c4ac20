"""ProcessSandbox: the production sandbox, real subprocesses in a private temp directory.

Each command runs as ``/bin/sh -c COMMAND`` (Python code as ``python -I FILE``) through a small
wrapper, ``python -I -S -c WRAPPER``, that sets the resource limits and then ``execv``'s the
command, so no ``preexec_fn`` runs between fork and exec in our own (trio) process:

========================= =========================================================================
``limits.timeout``         wall clock: the command's cancel scope deadline; on expiry its whole
                           process group gets SIGKILL and ``ExecTimeoutError`` is raised
``limits.cpu_seconds``     ``RLIMIT_CPU`` (soft; hard = soft + 1): SIGXCPU, exit code ``-SIGXCPU``
``limits.memory_bytes``    ``RLIMIT_AS``: allocations fail (Python raises ``MemoryError``, exit 1)
``limits.file_size_bytes`` ``RLIMIT_FSIZE``: writes past it fail (``EFBIG``; SIGXFSZ for programs
                           that do not ignore it); file tools refuse larger files too
``limits.max_output_bytes`` the first bytes of stdout and stderr are kept, the rest drained away
========================= =========================================================================

Every command is a session (and process group) leader; when it exits, anything it left running
in its group is killed, so no command outlives its exec. The environment is scrubbed to ``PATH``,
``HOME`` (the working directory) and ``LANG``; stdin is ``/dev/null``.

Pause sends SIGSTOP to the process group of every running command and resume SIGCONT; while
paused, their timeouts stop counting. Snapshots are tars of the working directory (``_tarsnap``)
in the checksummed framing of ``_snapshot``.

This isolates resources and the file tools, not the command itself: a shell command can read
whatever the server's user can. Run the server as a dedicated user (or add a namespace jail)
when tool code is untrusted; see docs/sandbox.md.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING

import trio

from . import _files, _tarsnap
from ._checks import OutputBuffer, check_bytes, check_command, check_path, check_timeout
from ._errors import (
    ExecTimeoutError,
    PauseError,
    SandboxError,
    SandboxStateError,
)
from ._lifecycle import Lifecycle
from ._port import ExecResult, SandboxLimits, SandboxState
from ._snapshot import seal, unseal

if TYPE_CHECKING:
    from ._port import Sandbox

__all__ = ["ProcessSandbox"]

_WRAPPER = """\
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
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
BOOT_TIMEOUT = 30.0  # seconds the boot probe may take
DRAIN_GRACE = 0.5  # seconds to collect output after a command exits (escaped grandchildren)
SNAPSHOT_KIND = "tar"


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone (or its id reused by someone else's process): nothing to do


async def _drain(stream: trio.abc.ReceiveStream | None, buffer: OutputBuffer) -> None:
    assert stream is not None
    while chunk := await stream.receive_some(65536):
        buffer.add(chunk)


class ProcessSandbox:
    """Real subprocesses under resource limits, in a private working directory.

    ``parent_dir`` is where the sandbox's temporary directory is made (default: the system's);
    ``path`` is the ``PATH`` commands get.
    """

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        parent_dir: str | os.PathLike[str] | None = None,
        path: str = DEFAULT_PATH,
    ) -> None:
        self._limits = limits if limits is not None else SandboxLimits()
        self._parent = None if parent_dir is None else os.fspath(parent_dir)
        self._path = path
        self._life = Lifecycle("ProcessSandbox")
        self._base = ""
        self._workdir = ""
        self._groups: dict[int, int] = {}  # pid -> process group id, of running commands
        self._scripts = itertools.count()

    def __repr__(self) -> str:
        return f"<ProcessSandbox {self.state.value} {self._workdir or '(not booted)'}>"

    @property
    def state(self) -> SandboxState:
        return self._life.state

    @property
    def limits(self) -> SandboxLimits:
        return self._limits

    @property
    def workdir(self) -> str:
        if not self._workdir:
            raise SandboxStateError("the ProcessSandbox has no working directory until it boots")
        return self._workdir

    # -- lifecycle ---------------------------------------------------------------------------

    async def boot(self) -> None:
        self._life.begin_boot()
        try:
            self._make_directories()
        except OSError as error:
            self._cleanup()
            raise self._life.fail_boot(f"cannot create its directory: {error}") from error
        # Probe: the interpreter must start under the limits (a tiny memory limit fails here).
        try:
            probe = await self._run([sys.executable, "-I", "-c", "pass"], BOOT_TIMEOUT, "boot")
        except SandboxError as error:
            self._cleanup()
            raise self._life.fail_boot(str(error)) from error
        if probe.exit_code != 0:
            self._cleanup()
            detail = probe.stderr.strip().splitlines()[-1:] or [f"exit code {probe.exit_code}"]
            raise self._life.fail_boot(f"Python does not start under its limits: {detail[0]}")
        self._life.finish_boot()

    async def pause(self) -> None:
        self._life.require("pause")
        stopped: list[int] = []
        for pgid in self._groups.values():
            try:
                os.killpg(pgid, signal.SIGSTOP)
            except ProcessLookupError:
                continue  # it just finished
            except OSError as error:
                for done in stopped:
                    _signal_group(done, signal.SIGCONT)
                raise PauseError(f"could not stop a running command: {error}") from error
            stopped.append(pgid)
        self._life.pause()
        await trio.lowlevel.checkpoint()

    async def resume(self) -> None:
        self._life.require("resume")
        for pgid in self._groups.values():
            _signal_group(pgid, signal.SIGCONT)
        self._life.resume()
        await trio.lowlevel.checkpoint()

    async def stop(self) -> None:
        if self._life.stop():
            for pgid in self._groups.values():
                _signal_group(pgid, signal.SIGKILL)
            self._cleanup()
        await trio.lowlevel.checkpoint()

    def _make_directories(self) -> None:
        # Small synchronous filesystem calls, here and below: kelpie_agent runs no threads.
        self._base = os.path.realpath(tempfile.mkdtemp(prefix="kelpie-sandbox-", dir=self._parent))
        self._workdir = os.path.join(self._base, "work")
        os.mkdir(self._workdir, 0o755)
        os.mkdir(os.path.join(self._base, "run"), 0o700)

    def _cleanup(self) -> None:
        if self._base:
            shutil.rmtree(self._base, ignore_errors=True)

    # -- commands ----------------------------------------------------------------------------

    async def exec(self, command: str, *, timeout: float | None = None) -> ExecResult:
        command = check_command(command)
        seconds = check_timeout(timeout, self._limits.timeout)
        self._ready("exec")
        return await self._run(["/bin/sh", "-c", command], seconds, "exec")

    async def exec_python(self, code: str, *, timeout: float | None = None) -> ExecResult:
        code = check_command(code, "code")
        seconds = check_timeout(timeout, self._limits.timeout)
        self._ready("exec")
        script = self._write_script(code)
        try:
            return await self._run([sys.executable, "-I", script], seconds, "exec")
        finally:
            try:
                os.unlink(script)
            except FileNotFoundError:
                pass

    def _write_script(self, code: str) -> str:
        """Python code goes to a file outside the working area (so it never shows up in
        listings or snapshots), which the interpreter then runs."""
        script = os.path.join(self._base, "run", f"exec-{next(self._scripts)}.py")
        with open(script, "w", encoding="utf-8") as file:
            file.write(code)
        return script

    def _ready(self, operation: str) -> None:
        self._life.require(operation)
        if not os.path.isdir(self._workdir):
            self._life.crash("its working directory disappeared")
            self._life.check_alive(operation)

    async def _run(self, argv: list[str], timeout: float, what: str) -> ExecResult:
        limits = self._limits
        wrapped = [sys.executable, "-I", "-S", "-c", _WRAPPER]
        wrapped += [str(limits.cpu_seconds), str(limits.memory_bytes)]
        wrapped += [str(limits.file_size_bytes), *argv]
        env = {"PATH": self._path, "HOME": self._workdir, "LANG": "C.UTF-8"}
        start = trio.current_time()
        try:
            proc = await trio.lowlevel.open_process(
                wrapped,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self._workdir,
                env=env,
                start_new_session=True,
            )
        except OSError as error:
            raise SandboxError(f"could not start a process for {what}: {error}") from error
        out = OutputBuffer(limits.max_output_bytes)
        err = OutputBuffer(limits.max_output_bytes)
        exited = False
        try:
            with self._life.command(timeout):
                self._groups[proc.pid] = proc.pid
                if self._life.state is SandboxState.PAUSED:  # paused while we were spawning
                    _signal_group(proc.pid, signal.SIGSTOP)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_drain, proc.stdout, out)
                    nursery.start_soon(_drain, proc.stderr, err)
                    await proc.wait()
                    exited = True
                    _signal_group(proc.pid, signal.SIGKILL)  # whatever it left behind
                    nursery.cancel_scope.deadline = trio.current_time() + DRAIN_GRACE
        finally:
            self._groups.pop(proc.pid, None)
            if not exited:
                _signal_group(proc.pid, signal.SIGKILL)
            with trio.CancelScope(shield=True):
                await proc.wait()
                for stream in (proc.stdout, proc.stderr):
                    if stream is not None:
                        await stream.aclose()
        self._life.check_alive(what)
        if not exited:
            raise ExecTimeoutError(
                f"{what} ran past its {timeout:g} s timeout and was killed",
                timeout=timeout,
                stdout=out.text,
                stderr=err.text,
            )
        assert proc.returncode is not None
        duration = trio.current_time() - start
        truncated = out.truncated or err.truncated
        return ExecResult(out.text, err.text, proc.returncode, duration, truncated)

    # -- snapshots ---------------------------------------------------------------------------

    async def snapshot(self) -> bytes:
        await trio.lowlevel.checkpoint()
        self._ready("snapshot")
        return seal(SNAPSHOT_KIND, _tarsnap.pack(self._workdir))

    async def restore(self, snapshot: bytes) -> None:
        snapshot = check_bytes(snapshot, "snapshot")
        await trio.lowlevel.checkpoint()
        self._ready("restore")
        self._life.require_idle("restore")
        _tarsnap.unpack(self._base, self._workdir, unseal(SNAPSHOT_KIND, snapshot))

    # -- file tools --------------------------------------------------------------------------

    async def read_file(self, path: str) -> bytes:
        path = check_path(path)
        await trio.lowlevel.checkpoint()
        self._ready("read_file")
        return _files.read_file(self._workdir, path, self._limits.file_size_bytes)

    async def write_file(self, path: str, data: bytes) -> None:
        path = check_path(path)
        data = check_bytes(data, "data")
        await trio.lowlevel.checkpoint()
        self._ready("write_file")
        _files.write_file(self._workdir, path, data, self._limits.file_size_bytes)

    async def list_files(self, path: str = ".") -> list[str]:
        path = check_path(path)
        await trio.lowlevel.checkpoint()
        self._ready("list_files")
        return _files.list_dir(self._workdir, path)


if TYPE_CHECKING:

    def _implements_the_port(sandbox: ProcessSandbox) -> Sandbox:
        return sandbox
