"""ProcessSandbox with real subprocesses: its limits are really enforced, and its file tools
really cannot reach outside the working directory."""

from __future__ import annotations

import functools
import io
import os
import shutil
import signal
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from kelpie_agent.sandbox import (
    CorruptSnapshotError,
    ExecTimeoutError,
    PathOutsideSandboxError,
    ProcessSandbox,
    RestoreError,
    SandboxBootError,
    SandboxCrashedError,
    SandboxFileError,
    SandboxLimits,
    SandboxState,
    SandboxStateError,
)
from kelpie_agent.sandbox._snapshot import seal

pytestmark = [pytest.mark.trio, pytest.mark.bubblewrap]

MiB = 1 << 20


async def booted(tmp_path: Path, **limits: int | float) -> ProcessSandbox:
    sandbox = ProcessSandbox(SandboxLimits(**limits), parent_dir=tmp_path)  # type: ignore[arg-type]
    await sandbox.boot()
    return sandbox


@pytest.fixture
async def sb(tmp_path: Path) -> AsyncIterator[ProcessSandbox]:
    sandbox = await booted(tmp_path, max_output_bytes=64 * 1024, file_size_bytes=MiB)
    yield sandbox
    await sandbox.stop()


BEAT = "(while :; do echo x >> beat; sleep 0.02; done)"  # a heartbeat in the working area


async def stopped_beating(sb: ProcessSandbox, name: str = "beat") -> bool:
    """Whatever appends to ``name`` has died: the file stops growing (the sandbox's processes
    live in their own PID namespace, so their ids mean nothing out here)."""
    path = Path(sb.workdir, name)
    for _ in range(3):
        before = path.stat().st_size if path.exists() else 0
        await trio.sleep(0.2)
        if (path.stat().st_size if path.exists() else 0) == before:
            return True
    return False


# -- limits --------------------------------------------------------------------------------------


async def test_a_tool_that_loops_forever_is_killed_at_its_timeout(sb: ProcessSandbox) -> None:
    code = "while True:\n    open('beat', 'a').write('x')\n"
    start = trio.current_time()
    with pytest.raises(ExecTimeoutError) as caught:
        await sb.exec_python(code, timeout=1.0)
    assert caught.value.timeout == 1.0
    assert trio.current_time() - start < 30  # killed, not left to run
    assert await stopped_beating(sb)
    assert sb.state is SandboxState.RUNNING
    assert (await sb.exec("echo next")).stdout == "next\n"


async def test_the_timeout_kills_everything_the_command_started(sb: ProcessSandbox) -> None:
    with pytest.raises(ExecTimeoutError):
        await sb.exec(f"{BEAT} & while :; do :; done", timeout=0.5)
    assert await stopped_beating(sb)


async def test_a_finished_command_leaves_nothing_running(sb: ProcessSandbox) -> None:
    result = await sb.exec(f"{BEAT} & echo started")
    assert result.exit_code == 0
    assert await stopped_beating(sb)


async def test_cpu_time_limit_kills_a_busy_loop(tmp_path: Path) -> None:
    sandbox = await booted(tmp_path, cpu_seconds=1)
    try:
        result = await sandbox.exec_python("while True:\n    pass", timeout=60)
    finally:
        await sandbox.stop()
    assert result.exit_code in (-signal.SIGXCPU, -signal.SIGKILL)


async def test_a_tool_that_allocates_too_much_memory_is_stopped(tmp_path: Path) -> None:
    sandbox = await booted(tmp_path, memory_bytes=256 * MiB)
    try:
        result = await sandbox.exec_python("x = bytearray(1 << 30)\nprint('allocated')")
        assert result.exit_code == 1
        assert "MemoryError" in result.stderr
        assert "allocated" not in result.stdout
        small = await sandbox.exec_python("x = bytearray(16 << 20)\nprint('fine')")
        assert small.stdout == "fine\n"  # the limit is on the tool, not on the sandbox
    finally:
        await sandbox.stop()


async def test_file_size_limit_applies_to_commands_and_file_tools(sb: ProcessSandbox) -> None:
    py = await sb.exec_python("open('big', 'wb').write(b'x' * (2 << 20))")
    assert py.exit_code == 1 and "File too large" in py.stderr
    shell = await sb.exec("head -c 3000000 /dev/zero > big2")
    assert shell.exit_code != 0
    for name in ("big", "big2"):
        assert os.path.getsize(os.path.join(sb.workdir, name)) <= MiB
    with pytest.raises(SandboxFileError, match="file size limit"):
        await sb.write_file("big3", bytes(MiB + 1))
    with pytest.raises(SandboxFileError, match="file size limit"):  # made outside the limit
        Path(sb.workdir, "huge").write_bytes(bytes(MiB + 1))
        await sb.read_file("huge")


async def test_output_past_the_cap_is_drained_and_dropped(sb: ProcessSandbox) -> None:
    result = await sb.exec("head -c 10000000 /dev/zero; echo tail >&2")
    assert result.exit_code == 0  # the command was never blocked on a full pipe
    assert result.truncated and len(result.stdout) == 64 * 1024
    assert result.stderr == "tail\n"


async def test_environment_is_scrubbed(sb: ProcessSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KELPIE_SECRET_TOKEN", "hunter2")
    env = dict(line.split("=", 1) for line in (await sb.exec("env")).stdout.splitlines())
    assert set(env) - {"PWD"} == {"PATH", "HOME", "LANG", "TMPDIR", "USER", "LOGNAME"}
    assert env["HOME"] == env["TMPDIR"] == sb.workdir and env["LANG"] == "C.UTF-8"
    stdin = await sb.exec("cat")
    assert (stdin.stdout, stdin.exit_code) == ("", 0)  # stdin is /dev/null


async def test_pause_really_stops_running_processes(sb: ProcessSandbox) -> None:
    ticker = "import time\nwhile True:\n    open('ticks', 'a').write('x')\n    time.sleep(0.01)\n"

    async def size() -> int:
        return len(await sb.read_file("ticks"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(functools.partial(sb.exec_python, ticker, timeout=30))
        while not os.path.exists(os.path.join(sb.workdir, "ticks")):
            await trio.sleep(0.02)
        await sb.pause()
        await trio.sleep(0.1)  # let a write that was in flight land
        frozen = len(Path(sb.workdir, "ticks").read_bytes())
        await trio.sleep(0.4)
        assert len(Path(sb.workdir, "ticks").read_bytes()) == frozen
        await sb.resume()
        await trio.sleep(0.3)
        assert await size() > frozen
        nursery.cancel_scope.cancel()


# -- the file tools' fence ---------------------------------------------------------------------


async def test_file_tools_refuse_etc_passwd_by_every_route(sb: ProcessSandbox) -> None:
    await sb.exec("ln -s /etc/passwd link && ln -s /etc etc && ln -s ../../.. up")
    for path in ("/etc/passwd", "../../etc/passwd", "link", "etc/passwd", "up/etc/passwd"):
        with pytest.raises(PathOutsideSandboxError):
            await sb.read_file(path)
    with pytest.raises(PathOutsideSandboxError):
        await sb.list_files("etc")


async def test_writes_through_symlinks_never_land_outside(
    sb: ProcessSandbox, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")
    await sb.exec(f"ln -s {outside} out && ln -s {tmp_path} dir")
    for path in ("out", "dir/outside.txt", "dir/new.txt"):
        with pytest.raises(PathOutsideSandboxError):
            await sb.write_file(path, b"pwned")
    assert outside.read_text() == "untouched"
    assert not (tmp_path / "new.txt").exists()


async def test_symlinks_that_stay_inside_are_followed(sb: ProcessSandbox) -> None:
    await sb.write_file("real/data.txt", b"inside")
    await sb.exec("ln -s real/data.txt alias && ln -s real dir")
    assert await sb.read_file("alias") == b"inside"
    assert await sb.read_file("dir/data.txt") == b"inside"
    assert await sb.list_files() == ["alias", "dir", "real/"]


async def test_a_symlink_swapped_in_after_the_check_is_not_followed(
    sb: ProcessSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key").write_text("s3cret")
    os.symlink(tmp_path / "secret", os.path.join(sb.workdir, "d"))
    # Pretend the path check ran before the symlink appeared: only the O_NOFOLLOW walk is left.
    monkeypatch.setattr(os.path, "realpath", os.path.normpath)  # seen by _files
    with pytest.raises(PathOutsideSandboxError):
        await sb.read_file("d/key")
    with pytest.raises(PathOutsideSandboxError):
        await sb.write_file("d/key", b"x")
    os.symlink(tmp_path / "secret" / "key", os.path.join(sb.workdir, "f"))  # the last component
    with pytest.raises(PathOutsideSandboxError):
        await sb.read_file("f")
    with pytest.raises(PathOutsideSandboxError):
        await sb.write_file("f", b"x")
    assert (tmp_path / "secret" / "key").read_text() == "s3cret"


async def test_file_tools_refuse_fifos_without_blocking(sb: ProcessSandbox) -> None:
    await sb.exec("mkfifo pipe")
    with pytest.raises(SandboxFileError, match="not a regular file"):
        await sb.read_file("pipe")
    with pytest.raises(SandboxFileError, match="not a regular file"):
        await sb.write_file("pipe", b"x")


# -- lifecycle failures and snapshots ----------------------------------------------------------


async def test_boot_fails_cleanly_when_python_cannot_start_under_the_limits(
    tmp_path: Path,
) -> None:
    sandbox = ProcessSandbox(SandboxLimits(memory_bytes=MiB), parent_dir=tmp_path)
    with pytest.raises(SandboxBootError, match="does not start under its limits"):
        await sandbox.boot()
    assert sandbox.state is SandboxState.STOPPED
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(SandboxStateError, match="boot failed"):
        await sandbox.exec("true")


async def test_losing_the_working_directory_is_a_crash(sb: ProcessSandbox) -> None:
    shutil.rmtree(sb.workdir)
    with pytest.raises(SandboxCrashedError, match="working directory disappeared"):
        await sb.exec("true")
    assert sb.state is SandboxState.STOPPED
    with pytest.raises(SandboxStateError, match="crashed"):
        await sb.read_file("x")


async def test_a_crafted_snapshot_cannot_write_outside(sb: ProcessSandbox, tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("../../escaped.txt")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"evil"))
    await sb.write_file("keep.txt", b"kept")
    with pytest.raises(RestoreError):
        await sb.restore(seal("tar", buffer.getvalue()))
    assert not list(tmp_path.rglob("escaped.txt"))
    assert await sb.list_files() == ["keep.txt"]


async def test_a_snapshot_from_another_kind_of_sandbox_is_refused(sb: ProcessSandbox) -> None:
    with pytest.raises(RestoreError, match="'sim' sandbox") as caught:
        await sb.restore(seal("sim", b"payload"))
    assert not isinstance(caught.value, CorruptSnapshotError)


async def test_snapshots_skip_links_leading_outside(sb: ProcessSandbox) -> None:
    await sb.write_file("a.txt", b"a")
    await sb.exec("ln -s /etc/passwd out && ln -s a.txt in && mkfifo fifo")
    snap = await sb.snapshot()
    await sb.exec("rm out in fifo a.txt")
    await sb.restore(snap)
    assert await sb.list_files() == ["a.txt", "in"]
    assert await sb.read_file("in") == b"a"
