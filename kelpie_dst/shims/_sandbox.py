"""SimSandbox: the sandbox port in-process, in virtual time, for simulation.

Same state machine and errors as ProcessSandbox (``kelpie_agent.sandbox._lifecycle``), same
snapshot framing (``_snapshot``), but nothing real: the working area is an in-memory filesystem
(``_memfs``), shell commands run through a small in-process shell (``_minishell``), and Python
code runs with ``exec`` in a fresh namespace. Every operation takes a configurable amount of
virtual time (:class:`SimTimings`). No wall clock, no randomness, no threads, no subprocess, no
real file access, so it runs deterministically under the simulator (or under plain ``trio.run``
with a ``MockClock``).

Python code runs **synchronously**: it cannot be interrupted, so ``while True: pass`` would hang
the whole simulation. Model a hung tool with the ``sandbox.exec_timeout`` fault instead. Its
``open()`` reaches the in-memory working area; other ways to touch the real filesystem
(``os``, ``pathlib``) are not intercepted, so only run test code you trust.

Faults are injected by :class:`~kelpie_dst.shims.FaultySandbox` through the ``_before_op`` and
``_after_snapshot`` seams.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import io
import os
import posixpath
import signal
import sys
import traceback
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kelpie_agent.sandbox._checks import (
    DISK_MESSAGE,
    OutputBuffer,
    check_bytes,
    check_command,
    check_path,
    check_timeout,
    file_too_large,
)
from kelpie_agent.sandbox._errors import (
    NO_BWRAP,
    ExecTimeoutError,
    PathOutsideSandboxError,
    RestoreError,
    SandboxBootError,
    SandboxFileError,
)
from kelpie_agent.sandbox._lifecycle import Lifecycle
from kelpie_agent.sandbox._memfs import FBIG, FsError, MemFS
from kelpie_agent.sandbox._minicmds import COMMANDS
from kelpie_agent.sandbox._minishell import Shell
from kelpie_agent.sandbox._network import SandboxNetwork
from kelpie_agent.sandbox._port import ExecResult, SandboxLimits, SandboxState
from kelpie_agent.sandbox._snapshot import seal, unseal

if TYPE_CHECKING:
    from kelpie_agent.sandbox import Sandbox

__all__ = ["SimSandbox", "SimTimings"]

SNAPSHOT_KIND = "sim"
_ERRNO = {"No such file or directory": errno.ENOENT, "Is a directory": errno.EISDIR}
_ERRNO |= {"Not a directory": errno.ENOTDIR, "Permission denied": errno.EACCES}
_ERRNO |= {"File exists": errno.EEXIST, FBIG: errno.EFBIG}


@attrs.frozen
class SimTimings:
    """Virtual seconds each operation takes (``exec`` is per command, plus ``sleep N``)."""

    boot: float = 0.5
    exec: float = 0.01
    pause: float = 0.01
    resume: float = 0.01
    snapshot: float = 0.05
    restore: float = 0.05
    stop: float = 0.01
    file: float = 0.001


def _oserror(error: FsError, name: str) -> OSError:
    return OSError(_ERRNO.get(error.reason, errno.EIO), error.reason, name)


def _commit(fs: MemFS, path: str, data: bytes) -> None:
    try:
        fs.write(path, data)
    except FsError as error:
        raise _oserror(error, path) from None


class _BytesWriter(io.BytesIO):
    """``open(path, "wb")`` inside SimSandbox: written to the filesystem when closed (which,
    as for a real file, includes dropping the last reference to it)."""

    def __init__(self, fs: MemFS, path: str, initial: bytes) -> None:
        super().__init__(initial)
        self.seek(0, io.SEEK_END)
        self._fs, self._path = fs, path

    def close(self) -> None:
        if not self.closed:
            data = self.getvalue()
            super().close()
            _commit(self._fs, self._path, data)


class _TextWriter(io.StringIO):
    """``open(path, "w")`` inside SimSandbox (UTF-8); see :class:`_BytesWriter`."""

    def __init__(self, fs: MemFS, path: str, initial: bytes) -> None:
        super().__init__(initial.decode())
        self.seek(0, io.SEEK_END)
        self._fs, self._path = fs, path

    def close(self) -> None:
        if not self.closed:
            data = self.getvalue().encode()
            super().close()
            _commit(self._fs, self._path, data)


_Writer = _BytesWriter | _TextWriter


class SimSandbox:
    """An in-process sandbox in virtual time; implements ``kelpie_agent.sandbox.Sandbox``.

    ``isolation`` and ``network`` mirror ProcessSandbox's arguments. ``bubblewrap`` is whether
    the simulated machine has a working bubblewrap: without it, a sandbox that needs isolation
    refuses to boot with ProcessSandbox's :class:`SandboxIsolationError`.
    """

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        timings: SimTimings | None = None,
        isolation: str = "namespaces",
        network: SandboxNetwork | None = None,
        bubblewrap: bool = True,
        services: Mapping[str, Callable[..., Any]] | None = None,
    ) -> None:
        if isolation not in ("namespaces", "none"):
            raise ValueError(f"isolation must be one of ('namespaces', 'none'), got {isolation!r}")
        self._limits = limits if limits is not None else SandboxLimits()
        self.timings = timings if timings is not None else SimTimings()
        self.isolation = isolation
        self.network = network if network is not None else SandboxNetwork()
        self.bubblewrap = bubblewrap
        # Simulated external services the Python code can call, as builtins of these names
        # (a test's stand-in for the network APIs a real tool would reach).
        self.services = dict(services or {})
        self._life = Lifecycle("SimSandbox")
        self.fs = MemFS(max_file_size=self._limits.file_size_bytes)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.state.value} files={len(self.fs.files)}>"

    @property
    def state(self) -> SandboxState:
        return self._life.state

    @property
    def limits(self) -> SandboxLimits:
        return self._limits

    @property
    def workdir(self) -> str:
        return self.fs.root

    # -- fault-injection seams (FaultySandbox overrides these) ----------------------------------

    async def _before_op(self, op: str, **fields: Any) -> None:
        """Runs as each operation does its work (op: boot, exec, pause, resume, snapshot,
        restore, stop, read_file, write_file, list_files); exec's runs inside its timeout."""
        await trio.lowlevel.checkpoint()

    def _after_snapshot(self, snapshot: bytes) -> bytes:
        """The snapshot bytes handed to the caller (where corruption is injected)."""
        return snapshot

    def _crash(self, reason: str) -> None:
        """The sandbox dies: stopped, commands in flight end with ``SandboxCrashedError``."""
        self._life.crash(reason)

    # -- lifecycle -------------------------------------------------------------------------------

    async def _begin(self, op: str, cost: float) -> None:
        self._life.require(op)
        await trio.sleep(cost)
        self._life.check_alive(op)
        self._life.require(op)  # e.g. two concurrent pauses: the second finds it paused

    async def boot(self) -> None:
        self._life.begin_boot()
        if self.isolation == "namespaces" and not self.bubblewrap:
            await trio.lowlevel.checkpoint()
            raise self._life.fail_isolation(NO_BWRAP)
        try:
            await trio.sleep(self.timings.boot)
            await self._before_op("boot")
        except SandboxBootError as error:
            raise self._life.fail_boot(str(error)) from None
        except BaseException:
            self._life.fail_boot("interrupted")
            raise
        self._life.finish_boot()

    async def pause(self) -> None:
        await self._begin("pause", self.timings.pause)
        await self._before_op("pause")
        self._life.require("pause")
        self._life.pause()

    async def resume(self) -> None:
        await self._begin("resume", self.timings.resume)
        await self._before_op("resume")
        self._life.require("resume")
        self._life.resume()

    async def stop(self) -> None:
        if self._life.stop():
            await self._before_op("stop")
            await trio.sleep(self.timings.stop)
        else:
            await trio.lowlevel.checkpoint()

    # -- commands --------------------------------------------------------------------------------

    async def exec(self, command: str, *, timeout: float | None = None) -> ExecResult:
        command = check_command(command)
        seconds = check_timeout(timeout, self._limits.timeout)
        return await self._exec("shell", command, seconds)

    async def exec_python(self, code: str, *, timeout: float | None = None) -> ExecResult:
        code = check_command(code, "code")
        seconds = check_timeout(timeout, self._limits.timeout)
        return await self._exec("python", code, seconds)

    async def _exec(self, kind: str, source: str, timeout: float) -> ExecResult:
        self._life.require("exec")
        start = trio.current_time()
        out = OutputBuffer(self._limits.max_output_bytes)
        err = OutputBuffer(self._limits.max_output_bytes)
        shell = Shell(self.fs, self._sleep, COMMANDS)
        status: int | None = None
        allowed = max(self._limits.disk_bytes, self.fs.usage())
        with self._life.command(timeout):
            await self._sleep(self.timings.exec)
            await self._before_op("exec", language=kind, command=source[:200])
            if kind == "python":
                status = self._run_python(source, out, err)
            else:
                status = await shell.run(source)
        self._life.check_alive("exec")
        if kind == "shell":
            out.add(bytes(shell.out))
            err.add(bytes(shell.err))
        if status is None:
            raise ExecTimeoutError(
                f"exec ran past its {timeout:g} s timeout and was killed",
                timeout=timeout,
                stdout=out.text,
                stderr=err.text,
            )
        stderr = err.text
        if self.fs.usage() > allowed:  # ProcessSandbox kills it; here it has finished
            status = -signal.SIGXFSZ
            stderr += DISK_MESSAGE.format(self._limits.disk_bytes)
        duration = trio.current_time() - start
        return ExecResult(out.text, stderr, status, duration, out.truncated or err.truncated)

    async def _sleep(self, seconds: float) -> None:
        """Virtual work: takes ``seconds``, and holds while the sandbox is paused."""
        await trio.sleep(seconds)
        await self._life.wait_unpaused()

    def _run_python(self, code: str, out: OutputBuffer, err: OutputBuffer) -> int:
        stdout, stderr = io.StringIO(), io.StringIO()
        writers: list[weakref.ref[_Writer]] = []
        namespace = {"__name__": "__main__", "__builtins__": self._builtins(writers)}
        status = 0
        saved_stdin, sys.stdin = sys.stdin, io.StringIO("")
        try:
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                try:
                    exec(compile(code, "<sandbox>", "exec"), namespace)
                except SystemExit as done:
                    status = _exit_status(done.code)
                except Exception as error:
                    traceback.print_exception(type(error), error, error.__traceback__.tb_next)  # type: ignore[union-attr]
                    status = 1
                for ref in writers:  # files the code left open are flushed at exit
                    writer = ref()
                    try:
                        if writer is not None:
                            writer.close()
                    except OSError as error:
                        print(f"close failed: {error}", file=sys.stderr)
                        status = status or 1
        finally:
            sys.stdin = saved_stdin
        out.add(stdout.getvalue().encode())
        err.add(stderr.getvalue().encode())
        return status

    def _builtins(self, writers: list[weakref.ref[_Writer]]) -> dict[str, Any]:
        fs = self.fs

        def sandbox_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            name = os.fspath(file)
            path = fs.abspath(name if isinstance(name, str) else name.decode())
            binary, kind = "b" in mode, mode.replace("b", "").replace("t", "")
            if not fs.inside(path):
                raise PermissionError(errno.EACCES, "outside the SimSandbox working area", name)
            try:
                if kind == "r":
                    data = fs.read(path)
                    return io.BytesIO(data) if binary else io.StringIO(data.decode())
                if kind in ("w", "a", "x"):
                    if kind == "x" and (fs.is_file(path) or fs.is_dir(path)):
                        raise FsError("File exists")
                    initial = fs.read(path) if kind == "a" and fs.is_file(path) else b""
                    fs.write(path, initial)
                    cls = _BytesWriter if binary else _TextWriter
                    writer: _Writer = cls(fs, path, initial)
                    writers.append(weakref.ref(writer))
                    return writer
            except FsError as error:
                raise _oserror(error, name) from None
            raise ValueError(f"SimSandbox's open() does not support mode {mode!r}")

        names = dict(vars(builtins))
        names["open"] = sandbox_open
        names.update(self.services)
        return names

    # -- snapshots -------------------------------------------------------------------------------

    async def snapshot(self) -> bytes:
        await self._begin("snapshot", self.timings.snapshot)
        await self._before_op("snapshot")
        return self._after_snapshot(seal(SNAPSHOT_KIND, self.fs.dump()))

    async def restore(self, snapshot: bytes) -> None:
        snapshot = check_bytes(snapshot, "snapshot")
        await self._begin("restore", self.timings.restore)
        self._life.require_idle("restore")
        await self._before_op("restore")
        payload = unseal(SNAPSHOT_KIND, snapshot)
        try:
            self.fs.load(payload)
        except ValueError as error:
            raise RestoreError(f"could not load the snapshot: {error}") from None

    # -- file tools ------------------------------------------------------------------------------

    async def _file_op(self, op: str, path: str) -> str:
        path = check_path(path)
        await self._begin(op, self.timings.file)
        await self._before_op(op, path=path)
        self._life.require(op)
        resolved = self.fs.abspath(path)
        if not self.fs.inside(resolved):
            raise PathOutsideSandboxError(
                f"path {path!r} leads outside the sandbox working directory {self.fs.root}"
            )
        return resolved

    async def read_file(self, path: str) -> bytes:
        resolved = await self._file_op("read_file", path)
        try:
            return self.fs.read(resolved)
        except FsError as error:
            raise SandboxFileError(f"{path!r}: {error.reason}") from None

    async def write_file(self, path: str, data: bytes) -> None:
        path = check_path(path)
        data = check_bytes(data, "data")
        limit = self._limits.file_size_bytes
        if len(data) > limit:
            raise file_too_large(path, len(data), limit)
        resolved = await self._file_op("write_file", path)
        if resolved == self.fs.root:
            raise SandboxFileError(f"{path!r}: Is a directory")
        try:
            self.fs.makedirs(posixpath.dirname(resolved))
            self.fs.write(resolved, data)
        except FsError as error:
            raise SandboxFileError(f"{path!r}: {error.reason}") from None

    async def list_files(self, path: str = ".") -> list[str]:
        resolved = await self._file_op("list_files", path)
        try:
            return self.fs.listdir(resolved)
        except FsError as error:
            raise SandboxFileError(f"{path!r}: {error.reason}") from None


def _exit_status(code: object) -> int:
    """The exit status ``sys.exit(code)`` gives a real interpreter."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


if TYPE_CHECKING:

    def _implements_the_port(sandbox: SimSandbox) -> Sandbox:
        return sandbox
