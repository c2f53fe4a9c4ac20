"""A conformance suite for implementations of the sandbox port.

In the spirit of ``trio.testing.check_two_way_stream``: give it a way to make a fresh sandbox
(created, not booted) and it checks what the port promises (docs/sandbox.md)::

    await check_sandbox_conformance(lambda: make(ProcessSandbox))

Each check makes the sandboxes it needs and stops them. ``CHECKS`` names the checks one by one so
a test suite can report them separately (see :func:`run_check`). Checks that wait (timeouts,
pauses) wait well under two seconds of trio time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio

from ._errors import (
    CorruptSnapshotError,
    ExecTimeoutError,
    PathOutsideSandboxError,
    SandboxFileError,
    SandboxStateError,
)
from ._port import ExecResult, Sandbox, SandboxState

__all__ = ["CHECKS", "check_sandbox_conformance", "run_check"]

MakeSandbox = Callable[[], Awaitable[Sandbox]]
Check = Callable[[MakeSandbox], Awaitable[None]]
S = SandboxState


def _fail(message: str) -> None:
    raise AssertionError(message)


def _eq(actual: object, expected: object, what: str) -> None:
    if actual != expected:
        _fail(f"{what}: expected {expected!r}, got {actual!r}")


async def _raises(
    exc_type: type[BaseException],
    what: str,
    fn: Callable[..., Awaitable[Any]],
    *args: Any,
    **kwargs: Any,
) -> BaseException:
    try:
        await fn(*args, **kwargs)
    except exc_type as error:
        return error
    _fail(f"{what}: expected {exc_type.__name__}")
    raise AssertionError  # unreachable


@asynccontextmanager
async def _booted(make: MakeSandbox) -> AsyncIterator[Sandbox]:
    sandbox = await make()
    try:
        await sandbox.boot()
        yield sandbox
    finally:
        with trio.CancelScope(shield=True):
            await sandbox.stop()


async def _run(sandbox: Sandbox, command: str, expect: int = 0) -> ExecResult:
    result = await sandbox.exec(command)
    _eq(result.exit_code, expect, f"exit code of {command!r} (stderr {result.stderr!r})")
    return result


async def check_lifecycle(make: MakeSandbox) -> None:
    sandbox = await make()
    _eq(sandbox.state, S.CREATED, "state of a new sandbox")
    await sandbox.boot()
    _eq(sandbox.state, S.RUNNING, "state after boot")
    await sandbox.pause()
    _eq(sandbox.state, S.PAUSED, "state after pause")
    await sandbox.resume()
    _eq(sandbox.state, S.RUNNING, "state after resume")
    await sandbox.stop()
    _eq(sandbox.state, S.STOPPED, "state after stop")
    await sandbox.stop()  # stopping twice is fine
    never_booted = await make()
    await never_booted.stop()
    _eq(never_booted.state, S.STOPPED, "stopping a created sandbox")


async def check_illegal_transitions(make: MakeSandbox) -> None:
    def calls(sandbox: Sandbox) -> dict[str, Callable[[], Awaitable[Any]]]:
        return {
            "boot": sandbox.boot,
            "exec": lambda: sandbox.exec("true"),
            "exec_python": lambda: sandbox.exec_python("pass"),
            "pause": sandbox.pause,
            "resume": sandbox.resume,
            "snapshot": sandbox.snapshot,
            "restore": lambda: sandbox.restore(b"x"),
            "read_file": lambda: sandbox.read_file("a"),
            "write_file": lambda: sandbox.write_file("a", b""),
            "list_files": sandbox.list_files,
        }

    everything = {"boot", "exec", "exec_python", "pause", "resume", "snapshot", "restore"}
    everything |= {"read_file", "write_file", "list_files"}
    legal = {
        S.CREATED: {"boot"},
        S.RUNNING: everything - {"boot", "resume"},
        S.PAUSED: {"resume", "snapshot", "restore"},
        S.STOPPED: set(),
    }
    sandbox = await make()
    try:
        for state in (S.CREATED, S.RUNNING, S.PAUSED, S.STOPPED):
            if state is S.RUNNING:
                await sandbox.boot()
            elif state is S.PAUSED:
                await sandbox.pause()
            elif state is S.STOPPED:
                await sandbox.stop()
            for name, call in calls(sandbox).items():
                if name in legal[state]:
                    continue
                error = await _raises(SandboxStateError, f"{name} when {state.value}", call)
                _eq(sandbox.state, state, f"state after an illegal {name}")
                if state.value not in str(error) or "\n" in str(error):
                    _fail(f"{name} when {state.value}: unclear message {str(error)!r}")
    finally:
        await sandbox.stop()


async def check_exec_shell(make: MakeSandbox) -> None:
    async with _booted(make) as sb:
        result = await _run(sb, "echo hello world")
        _eq((result.stdout, result.stderr), ("hello world\n", ""), "echo")
        if not (result.ok and result.duration >= 0 and not result.truncated):
            _fail(f"echo: bad result {result!r}")
        _eq((await _run(sb, "true")).stdout, "", "true")
        await _run(sb, "false", 1)
        await _run(sb, "exit 3", 3)
        await _run(sb, "kelpie-no-such-command", 127)
        missing = await _run(sb, "cat missing.txt", 1)
        _eq(missing.stdout, "", "stdout of a failing cat")
        if "missing.txt" not in missing.stderr:
            _fail(f"cat of a missing file: stderr {missing.stderr!r} does not name it")
        _eq((await _run(sb, "echo oops >&2")).stderr, "oops\n", "echo to stderr")
        _eq((await _run(sb, "printf '%s-%d\\n' a 1 b 2")).stdout, "a-1\nb-2\n", "printf")
        _eq((await _run(sb, "false || echo recovered")).stdout, "recovered\n", "||")
        _eq((await _run(sb, "false && echo no", 1)).stdout, "", "&& after failure")
        _eq((await _run(sb, "echo a; echo b")).stdout, "a\nb\n", ";")
        _eq((await _run(sb, "pwd")).stdout, sb.workdir + "\n", "pwd is the working directory")
        script = "mkdir -p d/e && printf 'x\\ny\\nz\\n' > d/f.txt && echo w >> d/f.txt"
        await _run(sb, script)
        _eq((await _run(sb, "cat d/f.txt")).stdout, "x\ny\nz\nw\n", "redirected writes")
        _eq((await _run(sb, "head -n 2 d/f.txt")).stdout, "x\ny\n", "head")
        _eq((await _run(sb, "cat d/f.txt | head -n 1")).stdout, "x\n", "pipeline")
        _eq((await _run(sb, "wc -l < d/f.txt")).stdout.strip(), "4", "wc -l")
        _eq((await _run(sb, "ls d")).stdout, "e\nf.txt\n", "ls")
        await _run(sb, "touch d/g && rm d/f.txt && rm -r d/e")
        _eq((await _run(sb, "ls d")).stdout, "g\n", "ls after touch and rm")
        await _run(sb, "cat nothing-here 2> err.txt", 1)
        if "nothing-here" not in (await sb.read_file("err.txt")).decode():
            _fail("2> did not capture stderr")


async def check_exec_python(make: MakeSandbox) -> None:
    async with _booted(make) as sb:
        result = await sb.exec_python("print('hi from python')\nprint(6 * 7)")
        _eq(
            (result.stdout, result.stderr, result.exit_code),
            ("hi from python\n42\n", "", 0),
            "print",
        )
        _eq((await sb.exec_python("import sys; sys.exit(3)")).exit_code, 3, "sys.exit(3)")
        _eq((await sb.exec_python("raise SystemExit")).exit_code, 0, "bare SystemExit")
        stderr = await sb.exec_python("import sys; sys.stderr.write('warn\\n')")
        _eq((stderr.stderr, stderr.exit_code), ("warn\n", 0), "stderr write")
        crash = await sb.exec_python("x = 1\nprint('before')\n1 / 0")
        _eq((crash.exit_code, crash.stdout), (1, "before\n"), "uncaught exception")
        if "Traceback" not in crash.stderr or "ZeroDivisionError" not in crash.stderr:
            _fail(f"uncaught exception: no traceback in stderr {crash.stderr!r}")
        syntax = await sb.exec_python("def (")
        if syntax.exit_code != 1 or "SyntaxError" not in syntax.stderr:
            _fail(f"syntax error: got {syntax!r}")
        fresh = await sb.exec_python("print('x' in globals())")
        _eq(fresh.stdout, "False\n", "each run gets a fresh namespace")
        await sb.exec_python("with open('made.txt', 'w') as f:\n    f.write('from python\\n')")
        _eq(await sb.read_file("made.txt"), b"from python\n", "a file Python wrote")
        _eq((await _run(sb, "cat made.txt")).stdout, "from python\n", "cat of it")
        await sb.write_file("in.txt", b"tool data")
        read = await sb.exec_python("print(open('in.txt').read())")
        _eq(read.stdout, "tool data\n", "Python reads a file a tool wrote")


async def check_exec_timeout(make: MakeSandbox) -> None:
    async with _booted(make) as sb:
        start = trio.current_time()
        error = await _raises(
            ExecTimeoutError, "sleep past timeout", sb.exec, "echo begun; sleep 5", timeout=0.3
        )
        assert isinstance(error, ExecTimeoutError)
        _eq((error.timeout, error.stdout), (0.3, "begun\n"), "timeout error details")
        if trio.current_time() - start >= 5:
            _fail("the command was not killed at its timeout")
        _eq(sb.state, S.RUNNING, "state after a timeout")
        await _run(sb, "echo still alive")
        _eq((await sb.exec("sleep 0.05", timeout=3)).exit_code, 0, "short sleep within timeout")


async def check_concurrent_exec(make: MakeSandbox) -> None:
    async with _booted(make) as sb:
        results: dict[int, ExecResult] = {}

        async def one(i: int) -> None:
            results[i] = await sb.exec(f"sleep 0.1; echo {i}")

        async with trio.open_nursery() as nursery:
            for i in range(3):
                nursery.start_soon(one, i)
        _eq({i: r.stdout for i, r in results.items()}, {i: f"{i}\n" for i in range(3)}, "outputs")


async def check_stop_during_exec(make: MakeSandbox) -> None:
    sb = await make()
    await sb.boot()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_raises, SandboxStateError, "exec stopped midway", sb.exec, "sleep 5")
        await trio.sleep(0.2)
        await sb.stop()
    _eq(sb.state, S.STOPPED, "state after stop")


async def check_pause_resume(make: MakeSandbox) -> None:
    async with _booted(make) as sb:
        await sb.write_file("kept.txt", b"kept")
        await sb.pause()
        await _raises(SandboxStateError, "exec while paused", sb.exec, "true")
        await sb.resume()
        _eq((await _run(sb, "cat kept.txt")).stdout, "kept", "files survive a pause")
        done: list[ExecResult] = []

        async def slow() -> None:  # 1.2 s of sleep, 1 s of timeout: fits only if the pause
            command = "touch started; sleep 1.2; echo done"  # stops the clock
            done.append(await sb.exec(command, timeout=1.0))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow)
            while "started" not in await sb.list_files():  # however long it takes to start
                await trio.sleep(0.01)
            await trio.sleep(0.1)  # and the sleep after the touch
            await sb.pause()
            await trio.sleep(1.3)
            _eq(done, [], "a command finished while paused")
            await sb.resume()
        _eq(done[0].stdout, "done\n", "a paused command's output after resume")


async def check_snapshot_restore(make: MakeSandbox) -> None:
    async with _booted(make) as sb:
        await sb.write_file("a.txt", b"original")
        await _run(sb, "mkdir -p sub/empty && echo nested > sub/n.txt")
        snap = await sb.snapshot()
        _eq(type(snap), bytes, "type of a snapshot")
        await sb.write_file("a.txt", b"changed")
        await sb.write_file("b.txt", b"new")
        await _run(sb, "rm -r sub")
        await sb.restore(snap)
        _eq(await sb.read_file("a.txt"), b"original", "restored file")
        _eq(await sb.list_files(), ["a.txt", "sub/"], "restored listing")
        _eq(await sb.list_files("sub"), ["empty/", "n.txt"], "restored subdirectory")
        _eq((await _run(sb, "cat a.txt sub/n.txt")).stdout, "originalnested\n", "cat after restore")
        await sb.pause()
        paused_snap = await sb.snapshot()  # legal while paused
        await sb.resume()
        await sb.write_file("a.txt", b"again")
        await sb.restore(paused_snap)
        _eq(await sb.read_file("a.txt"), b"original", "restore of a snapshot taken paused")
        async with _booted(make) as other:  # a snapshot moves to another sandbox
            await other.restore(snap)
            _eq(await other.read_file("sub/n.txt"), b"nested\n", "restored elsewhere")


async def check_corrupt_snapshot(make: MakeSandbox) -> None:
    async with _booted(make) as sb:
        await sb.write_file("a.txt", b"precious")
        snap = await sb.snapshot()
        await sb.write_file("a.txt", b"current")
        middle = len(snap) // 2
        damaged = [
            snap[:middle] + bytes([snap[middle] ^ 0x01]) + snap[middle + 1 :],
            snap[:-1] + bytes([snap[-1] ^ 0x80]),
            snap[:-1],
            snap[:10],
            b"",
            b"not a snapshot at all" * 10,
        ]
        for index, bad in enumerate(damaged):
            await _raises(CorruptSnapshotError, f"damaged snapshot #{index}", sb.restore, bad)
            _eq(await sb.read_file("a.txt"), b"current", "working area after a refused restore")
        await _raises(TypeError, "restore of a str", sb.restore, "text")


async def check_file_tools(make: MakeSandbox) -> None:
    async with _booted(make) as sb:
        _eq(await sb.list_files(), [], "a new working area is empty")
        data = bytes(range(256)) * 4
        await sb.write_file("notes/deep/a.bin", data)
        _eq(await sb.read_file("notes/deep/a.bin"), data, "binary round trip")
        await sb.write_file("empty", b"")
        _eq(await sb.read_file("empty"), b"", "empty file")
        await sb.write_file("empty", b"replaced")
        _eq(await sb.read_file("empty"), b"replaced", "overwrite")
        _eq(await sb.list_files("."), ["empty", "notes/"], "listing")
        _eq(await sb.list_files("notes"), ["deep/"], "listing a subdirectory")
        _eq(await sb.read_file(sb.workdir + "/notes/deep/a.bin"), data, "absolute path inside")
        _eq(await sb.read_file("notes/../empty"), b"replaced", ".. that stays inside")
        await _raises(SandboxFileError, "read of a missing file", sb.read_file, "missing")
        await _raises(SandboxFileError, "read of a directory", sb.read_file, "notes")
        await _raises(SandboxFileError, "list of a file", sb.list_files, "empty")
        await _raises(SandboxFileError, "write over a directory", sb.write_file, "notes", b"")
        await _raises(SandboxFileError, "write under a file", sb.write_file, "empty/x", b"")
        too_big = bytes(sb.limits.file_size_bytes + 1)
        await _raises(SandboxFileError, "write over the size limit", sb.write_file, "big", too_big)
        await _run(sb, "echo from shell > shell.txt")
        _eq(await sb.read_file("shell.txt"), b"from shell\n", "a file the shell wrote")


async def check_paths_outside(make: MakeSandbox) -> None:
    async with _booted(make) as sb:
        outside = [
            "../x",
            "../../etc/passwd",
            "/etc/passwd",
            "notes/../../x",
            "/",
            sb.workdir + "/../x",
        ]
        for path in outside:
            await _raises(PathOutsideSandboxError, f"read {path!r}", sb.read_file, path)
            await _raises(PathOutsideSandboxError, f"write {path!r}", sb.write_file, path, b"x")
            await _raises(PathOutsideSandboxError, f"list {path!r}", sb.list_files, path)
        _eq(await sb.list_files(), [], "nothing was written by the refused writes")


async def check_bad_arguments(make: MakeSandbox) -> None:
    async with _booted(make) as sb:
        for bad in (0, -1, float("nan")):
            await _raises(ValueError, f"timeout={bad}", lambda b=bad: sb.exec("true", timeout=b))
        await _raises(TypeError, "timeout='1'", lambda: sb.exec("true", timeout="1"))  # type: ignore[arg-type]
        await _raises(TypeError, "bytes command", sb.exec, b"true")
        await _raises(TypeError, "bytes code", sb.exec_python, b"pass")
        await _raises(ValueError, "NUL in command", sb.exec, "echo \x00")
        await _raises(TypeError, "path of bytes", sb.read_file, b"a")
        await _raises(ValueError, "empty path", sb.read_file, "")
        await _raises(TypeError, "str data", sb.write_file, "a", "text")
        _eq(sb.state, S.RUNNING, "state after bad arguments")


async def check_output_limit(make: MakeSandbox) -> None:
    async with _booted(make) as sb:
        limit = sb.limits.max_output_bytes
        result = await sb.exec_python(f"import sys; sys.stdout.write('x' * {limit + 100})")
        _eq(
            (len(result.stdout), result.truncated, result.exit_code), (limit, True, 0), "cut output"
        )


CHECKS: Mapping[str, Check] = {
    "lifecycle": check_lifecycle,
    "illegal_transitions": check_illegal_transitions,
    "exec_shell": check_exec_shell,
    "exec_python": check_exec_python,
    "exec_timeout": check_exec_timeout,
    "concurrent_exec": check_concurrent_exec,
    "stop_during_exec": check_stop_during_exec,
    "pause_resume": check_pause_resume,
    "snapshot_restore": check_snapshot_restore,
    "corrupt_snapshot": check_corrupt_snapshot,
    "file_tools": check_file_tools,
    "paths_outside": check_paths_outside,
    "bad_arguments": check_bad_arguments,
    "output_limit": check_output_limit,
}


async def run_check(name: str, make_sandbox: MakeSandbox) -> None:
    """Run one check (a key of ``CHECKS``); raises AssertionError."""
    await CHECKS[name](make_sandbox)


async def check_sandbox_conformance(make_sandbox: MakeSandbox) -> None:
    """Run every check; raises AssertionError naming what broke."""
    for name in CHECKS:
        await run_check(name, make_sandbox)
