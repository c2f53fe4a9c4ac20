"""ProcessSandbox: the production sandbox, real subprocesses isolated in Linux namespaces.

Each command runs in its own namespaces through bubblewrap (``_bwrap.py``), under a supervisor
that is PID 1 there (``_supervisor.py``), with the limits of :class:`SandboxLimits`:

========================= =========================================================================
``limits.timeout``         wall clock: the command's cancel scope deadline; on expiry everything it
                           started is killed and ``ExecTimeoutError`` is raised
``limits.cpu_seconds``     ``RLIMIT_CPU`` (soft; hard = soft + 1): SIGXCPU, exit code ``-SIGXCPU``
``limits.memory_bytes``    ``RLIMIT_AS``: allocations fail (Python raises ``MemoryError``, exit 1)
``limits.file_size_bytes`` ``RLIMIT_FSIZE``: writes past it fail (``EFBIG``; SIGXFSZ for programs
                           that do not ignore it); file tools refuse larger files too
``limits.processes``       ``RLIMIT_NPROC`` of the sandbox's own user: ``fork`` fails (``EAGAIN``)
``limits.disk_bytes``      the working area as a whole: a command that grows it past the limit is
                           killed, with exit code ``-SIGXFSZ`` and a line on stderr
``limits.max_output_bytes`` the first bytes of stdout and stderr are kept, the rest drained away
========================= =========================================================================

A command sees a read-only root with the interpreter, its libraries and little else, its
working directory as the only writable place, no other process, no network (or only the hosts
its :class:`SandboxNetwork` names, through a filtering proxy), and an environment of ``PATH``,
``HOME``/``TMPDIR`` (the working directory), ``LANG``, ``USER``/``LOGNAME`` and the proxy
variables. When it exits, everything it started dies with the namespace.

``isolation="none"`` (``kelpie serve --unsafe-sandbox``) runs commands as plain subprocesses
with the rlimits only, as before namespaces: they can read what the server's user can. With
``isolation="namespaces"`` (the default) and no working bubblewrap, ``boot`` raises
:class:`SandboxIsolationError` and nothing runs.

Pause stops every process of a running command and resume continues them; while paused,
their timeouts stop counting. Snapshots are tars of the working directory (``_tarsnap``) in
the checksummed framing of ``_snapshot``.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING

import trio

from . import _files, _spawn, _tarsnap
from . import _seccomp as seccomp
from ._bwrap import RUN_DIR, Jail, find_bwrap, python_roots
from ._checks import check_bytes, check_command, check_path, check_timeout
from ._errors import (
    NO_BWRAP,
    PauseError,
    SandboxError,
    SandboxIsolationError,
    SandboxStateError,
)
from ._lifecycle import Lifecycle
from ._network import SandboxNetwork
from ._port import ExecResult, SandboxLimits, SandboxState
from ._proxy import serve_proxy
from ._snapshot import seal, unseal
from ._supervisor import PROXY_PORT

if TYPE_CHECKING:
    from ._port import Sandbox

__all__ = ["ISOLATIONS", "ProcessSandbox", "isolation_problem"]

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
BOOT_TIMEOUT = 30.0  # seconds the boot probe may take
SNAPSHOT_KIND = "tar"
SUPERVISOR_FILE = "supervisor.py"
SECCOMP_FILE = "seccomp.bpf"
ISOLATIONS = ("namespaces", "none")
SANDBOX_UID_BASE = 1_500_000_000  # sandbox users of a root server: this plus 24 bits


def _uid_for(path: str) -> int:
    """The user a root server's sandbox runs as: one per live sandbox directory (its inode),
    so ``RLIMIT_NPROC`` counts that sandbox's processes alone."""
    return SANDBOX_UID_BASE + os.stat(path).st_ino % (1 << 24)


class ProcessSandbox:
    """Real subprocesses isolated in Linux namespaces, in a private working directory.

    ``parent_dir`` is where the sandbox's temporary directory is made (default: the system's);
    ``path`` is the ``PATH`` commands get; ``isolation`` is ``"namespaces"`` (bubblewrap,
    required unless) or ``"none"``; ``network`` the hosts commands may reach; ``hide`` more
    directories commands must not see even where a bound directory would show them (the
    parent directory is always hidden); ``bwrap`` the bubblewrap executable (default: found
    on ``PATH``).
    """

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        parent_dir: str | os.PathLike[str] | None = None,
        path: str = DEFAULT_PATH,
        isolation: str = "namespaces",
        network: SandboxNetwork | None = None,
        hide: Sequence[str | os.PathLike[str]] = (),
        bwrap: str | None = None,
    ) -> None:
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
        self._limits = limits if limits is not None else SandboxLimits()
        self._parent = None if parent_dir is None else os.fspath(parent_dir)
        self._path = path
        self.isolation = isolation
        self.network = network if network is not None else SandboxNetwork()
        self._hide = tuple(os.path.realpath(os.fspath(p)) for p in hide)
        self._bwrap = bwrap
        self._life = Lifecycle("ProcessSandbox")
        self._base = ""
        self._workdir = ""
        self._jail: Jail | None = None
        self._owner: tuple[int, int] | None = None
        self._running: dict[int, _spawn.Running] = {}
        self._ids = itertools.count()

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
        except SandboxIsolationError as error:
            self._cleanup()
            raise self._life.fail_isolation(str(error)) from None
        except OSError as error:
            self._cleanup()
            raise self._life.fail_boot(f"cannot create its directory: {error}") from error
        # Probe: the interpreter must start under the limits (a tiny memory limit fails here),
        # in the namespaces (a bubblewrap that cannot make them fails here).
        try:
            probe = await self._run([sys.executable, "-I", "-c", "pass"], BOOT_TIMEOUT, "boot")
        except SandboxError as error:
            self._cleanup()
            raise self._life.fail_boot(str(error)) from error
        if probe.exit_code != 0:
            self._cleanup()
            lines = probe.stderr.strip().splitlines()
            bwrap = [line for line in lines if line.startswith("bwrap:")]
            if self._jail is not None and (bwrap or not lines):
                why = bwrap[0] if bwrap else f"it exited with {probe.exit_code} and said nothing"
                raise self._life.fail_isolation(f"bubblewrap cannot isolate: {why}")
            detail = lines[-1:] or [f"exit code {probe.exit_code}"]
            raise self._life.fail_boot(f"Python does not start under its limits: {detail[0]}")
        self._life.finish_boot()

    async def pause(self) -> None:
        self._life.require("pause")
        paused: list[_spawn.Running] = []
        for running in list(self._running.values()):
            try:
                await running.pause()
            except ProcessLookupError:
                continue  # it just finished
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as error:
                if isinstance(error, trio.BrokenResourceError | trio.ClosedResourceError):
                    continue  # it just finished
                for done in paused:
                    await done.resume()
                raise PauseError(f"could not stop a running command: {error}") from error
            paused.append(running)
        self._life.pause()
        await trio.lowlevel.checkpoint()

    async def resume(self) -> None:
        self._life.require("resume")
        for running in list(self._running.values()):
            await running.resume()
        self._life.resume()
        await trio.lowlevel.checkpoint()

    async def stop(self) -> None:
        if self._life.stop():
            for running in self._running.values():
                running.kill()
            self._cleanup()
        await trio.lowlevel.checkpoint()

    def _make_directories(self) -> None:
        # Small synchronous filesystem calls, here and below: kelpie_agent runs no threads.
        bwrap = None
        if self.isolation == "namespaces":
            bwrap = self._bwrap or find_bwrap()
            if bwrap is None:
                raise SandboxIsolationError(NO_BWRAP)
            if not os.access(bwrap, os.X_OK):
                raise SandboxIsolationError(f"bubblewrap {bwrap} is not an executable")
        self._base = os.path.realpath(tempfile.mkdtemp(prefix="kelpie-sandbox-", dir=self._parent))
        self._workdir = os.path.join(self._base, "work")
        os.mkdir(self._workdir, 0o755)
        run_dir = os.path.join(self._base, "run")
        os.mkdir(run_dir, 0o700)
        if bwrap is None:
            return
        os.chmod(run_dir, 0o755)  # inside the 0700 base: only the sandbox reaches it
        as_root = os.geteuid() == 0
        uid, gid = (_uid_for(self._base),) * 2 if as_root else (os.getuid(), os.getgid())
        if as_root:
            self._owner = (uid, gid)
            os.chown(self._workdir, uid, gid)
        with open(os.path.join(run_dir, "passwd"), "w", encoding="utf-8") as file:
            file.write(f"sandbox:x:{uid}:{gid}:Kelpie sandbox:{self._workdir}:/bin/sh\n")
        with open(os.path.join(run_dir, "group"), "w", encoding="utf-8") as file:
            file.write(f"sandbox:x:{gid}:\n")
        with open(os.path.join(run_dir, SUPERVISOR_FILE), "w", encoding="utf-8") as file:
            file.write(_spawn.SUPERVISOR)
        filter_ = seccomp.program()
        if filter_ is not None:
            with open(os.path.join(run_dir, SECCOMP_FILE), "wb") as binary:
                binary.write(filter_)
        parent = os.path.dirname(self._base)
        self._jail = Jail(
            bwrap=bwrap,
            workdir=self._workdir,
            run_dir=run_dir,
            roots=python_roots(),
            hide=tuple(sorted({parent, *self._hide})),
            as_root=as_root,
        )

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
        script, seen_as = self._write_script(code)
        try:
            return await self._run([sys.executable, "-I", seen_as], seconds, "exec")
        finally:
            try:
                os.unlink(script)
            except FileNotFoundError:
                pass

    def _write_script(self, code: str) -> tuple[str, str]:
        """Python code goes to a file outside the working area (so it never shows up in
        listings or snapshots), which the interpreter then runs; returns its path here and
        as the command sees it."""
        name = f"exec-{next(self._ids)}.py"
        script = os.path.join(self._base, "run", name)
        with open(script, "w", encoding="utf-8") as file:
            file.write(code)
        if self._jail is None:
            return script, script
        os.chmod(script, 0o644)
        return script, f"{RUN_DIR}/{name}"

    def _ready(self, operation: str) -> None:
        self._life.require(operation)
        if not os.path.isdir(self._workdir):
            self._life.crash("its working directory disappeared")
            self._life.check_alive(operation)

    def _environment(self) -> dict[str, str]:
        env = {"PATH": self._path, "HOME": self._workdir, "LANG": "C.UTF-8"}
        if self._jail is None:
            return env
        env |= {"TMPDIR": self._workdir, "USER": "sandbox", "LOGNAME": "sandbox"}
        if self.network:
            proxy = f"http://127.0.0.1:{PROXY_PORT}"
            for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
                env[name] = env[name.lower()] = proxy
        return env

    async def _run(self, argv: list[str], timeout: float, what: str) -> ExecResult:
        limits = self._limits
        if self._jail is None:
            launch = _spawn.Launch(
                _spawn.plain_argv(limits, argv), self._environment(), self._workdir, False
            )
            return await _spawn.run(launch, limits, self._life, self._running, timeout, what)
        config = {
            "uid": str(self._owner[0]) if self._owner else "-",
            "gid": str(self._owner[1]) if self._owner else "-",
            "processes": str(limits.processes),
            "cpu": str(limits.cpu_seconds),
            "memory": str(limits.memory_bytes),
            "fsize": str(limits.file_size_bytes),
            "disk": str(limits.disk_bytes),
            "workdir": self._workdir,
            "proxy": "-",
        }
        if not self.network:
            return await self._run_jailed(argv, config, timeout, what)
        failure: Exception | None = None
        async with trio.open_nursery() as nursery:
            name = f"net-{next(self._ids)}.sock"
            try:
                socket = os.path.join(self._base, "run", name)
                try:
                    await nursery.start(serve_proxy, socket, self.network)
                except OSError as error:
                    raise SandboxError(f"could not start the network proxy: {error}") from error
                config["proxy"] = f"{RUN_DIR}/{name}"
                result = await self._run_jailed(argv, config, timeout, what)
            except Exception as error:  # raised as itself, not in an ExceptionGroup
                failure = error
            finally:
                nursery.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return result

    def _open_filter(self) -> int | None:
        """A new descriptor of the seccomp filter's file (bubblewrap reads it to the end)."""
        try:
            return os.open(os.path.join(self._base, "run", SECCOMP_FILE), os.O_RDONLY)
        except FileNotFoundError:
            return None  # no filter for this architecture

    async def _run_jailed(
        self, argv: list[str], config: dict[str, str], timeout: float, what: str
    ) -> ExecResult:
        assert self._jail is not None
        script = f"{RUN_DIR}/{SUPERVISOR_FILE}"
        supervised = _spawn.supervisor_argv(script, config, argv)
        fd = self._open_filter()
        try:
            command = self._jail.argv(supervised, seccomp_fd=fd)
            fds = (fd,) if fd is not None else ()
            launch = _spawn.Launch(command, self._environment(), self._workdir, True, fds)
            return await _spawn.run(launch, self._limits, self._life, self._running, timeout, what)
        finally:
            if fd is not None:
                os.close(fd)

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
        _tarsnap.unpack(self._base, self._workdir, unseal(SNAPSHOT_KIND, snapshot), self._owner)

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
        _files.write_file(self._workdir, path, data, self._limits.file_size_bytes, self._owner)

    async def list_files(self, path: str = ".") -> list[str]:
        path = check_path(path)
        await trio.lowlevel.checkpoint()
        self._ready("list_files")
        return _files.list_dir(self._workdir, path)


if TYPE_CHECKING:

    def _implements_the_port(sandbox: ProcessSandbox) -> Sandbox:
        return sandbox


async def isolation_problem(
    parent_dir: str | os.PathLike[str] | None = None, *, bwrap: str | None = None
) -> str | None:
    """Why ProcessSandbox cannot isolate commands here (``None`` when it can): boots and stops
    a throwaway sandbox in ``parent_dir``. ``kelpie serve`` says this once at startup."""
    probe = ProcessSandbox(parent_dir=parent_dir, bwrap=bwrap)
    try:
        await probe.boot()
    except SandboxIsolationError as error:
        return error.reason
    except SandboxError:
        return None  # booting failed for another reason; the sandboxes will say which
    finally:
        await probe.stop()
    return None
