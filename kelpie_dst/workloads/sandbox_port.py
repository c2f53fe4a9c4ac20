"""The sandbox port itself, driven directly and judged by a model of its working area
(``sandbox_port``).

The agent scenarios reach the sandbox only through ``run_code`` and custom tools: the agent
never pauses a sandbox, never restores one that already holds files, never lists a directory
after ``rm -r``, never writes a file of exactly the size limit with the file tool, and never
prints exactly ``max_output_bytes``. So a bug there (a paused command that gets its whole
timeout back on resume, ``rm -r d`` that also takes ``d.txt``, a limit off by one) ran
everywhere and failed nowhere (the session-15 blind test, sandK). Here ``boxes`` users, each
on one of the topology's nodes, each own a sandbox (a :class:`~kelpie_dst.shims.FaultySandbox`
with small limits) and run ``ops`` random operations on it: the file tools, shell commands
that write, append, make and remove directories, ``cat``, output at and past the output
limit, exit codes, commands with a timeout that sleep past it or not while the user pauses
and resumes the sandbox (and, while it is paused, tries what the port refuses then),
snapshots, restores of an earlier snapshot into the same or a fresh sandbox (damaged ones
refused), a full read of the working area after every few operations. Sandboxes fail
(``[faults.sandbox]``): a crash or a failed boot starts a fresh sandbox, to which the user
restores its last snapshot.

Each user keeps a model of its files, written from docs/sandbox.md and the port's docstrings
(files over ``file_size_bytes`` are refused by the file tool, and keep what fits when a
command writes them; output past ``max_output_bytes`` is cut there and flagged; a restore
replaces the whole working area; a failed restore changes nothing), and records every
observation with the answers the model allows; ``sandbox_port_contract`` judges them, and
``sandbox_timeouts_kept`` judges each timed command's running time against its timeout
(:mod:`._sandbox_port_checks`).
"""

from __future__ import annotations

import posixpath
from typing import Any

import attrs
import trio

from kelpie_agent.sandbox import (
    CorruptSnapshotError,
    ExecResult,
    ExecTimeoutError,
    PauseError,
    RestoreError,
    Sandbox,
    SandboxBootError,
    SandboxCrashedError,
    SandboxFileError,
    SandboxLimits,
    SandboxState,
    SandboxStateError,
    SnapshotError,
)

from .._nodes import Node
from .._rng import RngStream
from ..scenario import WorkloadContext, invariant, workload
from ..shims import open_sandbox
from ._sandbox_port_checks import Seen, Timed, check_seen, check_timed

__all__ = ["sandbox_port", "sandbox_port_contract", "sandbox_timeouts_kept"]

FILE_BYTES = 96  # the sandboxes' file size limit
OUTPUT_BYTES = 64  # their max_output_bytes
TIMEOUT = 1.0  # their default exec timeout
LIMITS = SandboxLimits(timeout=TIMEOUT, max_output_bytes=OUTPUT_BYTES, file_size_bytes=FILE_BYTES)
DIRS = ("d", "d2", "dx", "d/e")  # names that share prefixes, on purpose
FILES = ("f", "f2", "d.txt", "d2.txt", "dx", "d/a", "d/a2", "d/e/b", "d2/a", "dx/c")
LOG = "log.txt"
BOOTS = 30  # boots a user tries before it gives up on a sandbox


@attrs.define
class Tree:
    """The model: files (path -> bytes) and directories (paths), relative to the workdir."""

    files: dict[str, bytes] = attrs.Factory(dict)
    dirs: set[str] = attrs.Factory(set)

    def copy(self) -> Tree:
        return Tree(dict(self.files), set(self.dirs))

    def parents(self, path: str) -> list[str]:
        parts = path.split("/")[:-1]
        return ["/".join(parts[: i + 1]) for i in range(len(parts))]

    def can_hold(self, path: str) -> bool:
        """``path`` can be a file (no parent is a file, it is not a directory)."""
        return path not in self.dirs and not any(p in self.files for p in self.parents(path))

    def can_be_dir(self, path: str) -> bool:
        return path not in self.files and not any(p in self.files for p in self.parents(path))

    def add_dirs(self, path: str) -> None:
        self.dirs.update(self.parents(path))

    def remove(self, path: str) -> None:
        self.files.pop(path, None)
        self.dirs.discard(path)
        inner = path + "/"
        self.files = {p: v for p, v in self.files.items() if not p.startswith(inner)}
        self.dirs = {d for d in self.dirs if not d.startswith(inner)}

    def listing(self, path: str) -> list[str]:
        """What ``list_files(path)`` answers (``path`` "" is the workdir)."""
        names = [posixpath.basename(p) for p in self.files if posixpath.dirname(p) == path]
        names += [posixpath.basename(d) + "/" for d in self.dirs if posixpath.dirname(d) == path]
        return sorted(names)

    def key(self) -> tuple[tuple[tuple[str, bytes], ...], tuple[str, ...]]:
        return tuple(sorted(self.files.items())), tuple(sorted(self.dirs))


class Lost(Exception):
    """The sandbox crashed or stopped under the user: start a fresh one."""


@attrs.define
class User:
    ctx: WorkloadContext
    name: str
    node: Node
    rng: RngStream
    seen: list[Seen]
    timed: list[Timed]
    sandbox: Any = None
    tree: Tree = attrs.Factory(Tree)
    snapshots: list[tuple[bytes, Tree]] = attrs.Factory(list)
    generation: int = 0  # sandboxes started

    # -- recording --------------------------------------------------------------------------
    def see(self, what: str, got: object, *allowed: object) -> None:
        self.seen.append(Seen(self.name, what, got, allowed))

    # -- the sandbox ------------------------------------------------------------------------
    async def fresh(self) -> None:
        """A new, booted sandbox; its working area is empty (then the last snapshot, if the
        user has one, is restored into it)."""
        if self.sandbox is not None:
            await self.sandbox.stop()
        for _ in range(BOOTS):
            self.generation += 1
            box = open_sandbox(self.node, name=f"{self.name}.{self.generation}", limits=LIMITS)
            try:
                await box.boot()
            except SandboxBootError:
                self.ctx.count("sandbox.boot_failed")
                continue
            self.sandbox, self.tree = box, Tree()
            self.see("the listing of a new sandbox", await box.list_files(), [])
            if self.snapshots:
                await self.restore(len(self.snapshots) - 1)
            return
        raise AssertionError(f"{self.name}: no sandbox booted in {BOOTS} tries")

    async def exec(self, command: str, python: bool = False, **kw: Any) -> ExecResult | None:
        """Run a command; None if it timed out (only a fault makes these commands hang)."""
        sb: Sandbox = self.sandbox
        start = trio.current_time()
        try:
            if python:
                result = await sb.exec_python(command, **kw)
            else:
                result = await sb.exec(command, **kw)
        except ExecTimeoutError:
            self._timed(command, kw, start, "timeout")
            self.ctx.count("sandbox.exec_timeouts")
            return None
        except (SandboxCrashedError, SandboxStateError) as error:
            raise Lost(str(error)) from None
        self._timed(command, kw, start, "ok")
        return result

    def _timed(self, command: str, kw: dict[str, Any], start: float, outcome: str) -> None:
        timeout = kw.get("timeout", TIMEOUT)
        self.timed.append(
            Timed(self.name, command, timeout, 0.0, start, trio.current_time(), (), outcome)
        )

    async def check_tree(self, why: str, *others: Tree) -> None:
        """Read the whole working area and compare it with the model (or one of ``others``,
        when an operation's effect is uncertain: the model becomes the one it matched)."""
        sb: Sandbox = self.sandbox
        files: dict[str, bytes] = {}
        dirs: set[str] = set()
        todo = [""]
        while todo:
            here = todo.pop()
            for name in await sb.list_files(here or "."):
                path = f"{here}/{name}" if here else name
                if name.endswith("/"):
                    dirs.add(path[:-1])
                    todo.append(path[:-1])
                else:
                    files[path] = await sb.read_file(path)
        got = Tree(files, dirs)
        candidates = [self.tree, *others]
        for candidate in candidates:
            if candidate.key() == got.key():
                self.tree = candidate
                break
        self.see(f"the working area {why}", got.key(), *(c.key() for c in candidates))
        if got.key() not in [c.key() for c in candidates]:
            self.tree = got  # judged once; go on from what is there

    # -- operations -------------------------------------------------------------------------
    async def op_write(self) -> None:
        """The file tool: a file up to the size limit is written (parents made), one past it
        refused (nothing changes)."""
        path = self.rng.choice([p for p in FILES if self.tree.can_hold(p)] or ["f"])
        if not self.tree.can_hold(path):
            return
        size = self.rng.choice((0, 7, FILE_BYTES - 1, FILE_BYTES, FILE_BYTES + 1))
        data = bytes((65 + (i * 7 + self.generation) % 26) for i in range(size))
        try:
            await self.sandbox.write_file(path, data)
            got = "written"
        except SandboxFileError:
            got = "refused"
        self.see(
            f"write_file({path!r}, {size} bytes)",
            got,
            "written" if size <= FILE_BYTES else "refused",
        )
        if size <= FILE_BYTES:
            self.tree.add_dirs(path)
            self.tree.files[path] = data
        if got == "written":
            self.see(
                f"read_file({path!r}) after writing it", await self.sandbox.read_file(path), data
            )

    async def op_shell_write(self) -> None:
        """``printf`` redirected into a file: what fits is kept, past the limit it fails."""
        choices = [
            p
            for p in FILES
            if self.tree.can_hold(p) and all(d in self.tree.dirs for d in self.tree.parents(p))
        ]
        if not choices:
            return
        path = self.rng.choice(choices)
        append = self.rng.random() < 0.5 and path in self.tree.files
        old = self.tree.files.get(path, b"") if append else b""
        room = FILE_BYTES - len(old)
        size = max(1, self.rng.choice((3, room - 1, room, room + 1)))
        text = "".join("abcdefghij"[(i + len(old)) % 10] for i in range(size))
        op = ">>" if append else ">"
        result = await self.exec(f"printf '%s' {text} {op} {path}")
        new = (old + text.encode())[:FILE_BYTES]
        after = self.tree.copy()
        after.files[path] = new
        if result is None:
            await self.check_tree(f"after a timed-out printf {op} {path}", after)
            return
        over = len(old) + size > FILE_BYTES
        self.see(
            f"exit code of printf {op} {path} ({len(old)}+{size} bytes)",
            result.exit_code,
            1 if over else 0,
        )
        self.tree = after

    async def op_mkdir(self) -> None:
        choices = [d for d in DIRS if self.tree.can_be_dir(d)]
        if not choices:
            return
        path = self.rng.choice(choices)
        result = await self.exec(f"mkdir -p {path}")
        after = self.tree.copy()
        after.dirs.add(path)
        after.add_dirs(path)
        if result is None:
            await self.check_tree(f"after a timed-out mkdir -p {path}", after)
            return
        self.see(f"exit code of mkdir -p {path}", result.exit_code, 0)
        self.tree = after

    async def op_rm(self) -> None:
        choices = sorted({*self.tree.files, *self.tree.dirs})
        if not choices:
            return
        path = self.rng.choice(choices)
        result = await self.exec(f"rm -r {path}")
        after = self.tree.copy()
        after.remove(path)
        if result is None:
            await self.check_tree(f"after a timed-out rm -r {path}", after)
            return
        self.see(f"exit code of rm -r {path}", result.exit_code, 0)
        self.tree = after
        await self.check_tree(f"after rm -r {path}")

    async def op_cat(self) -> None:
        if not self.tree.files:
            return
        path = self.rng.choice(sorted(self.tree.files))
        result = await self.exec(f"cat {path}")
        if result is None:
            return
        data = self.tree.files[path]
        self.see(
            f"cat {path} ({len(data)} bytes)",
            (result.exit_code, result.stdout, result.truncated),
            (0, data[:OUTPUT_BYTES].decode(), len(data) > OUTPUT_BYTES),
        )

    async def op_output(self) -> None:
        """Output at and around the output limit, on stdout or stderr, from Python or sh."""
        n = self.rng.choice((OUTPUT_BYTES - 1, OUTPUT_BYTES, OUTPUT_BYTES + 1, 3 * OUTPUT_BYTES))
        stream = self.rng.choice(("stdout", "stderr"))
        if self.rng.random() < 0.5:
            result = await self.exec(f"import sys; sys.{stream}.write('y' * {n})", python=True)
        else:
            redirect = " >&2" if stream == "stderr" else ""
            result = await self.exec(f"printf '%s' {'y' * n}{redirect}")
        if result is None:
            return
        kept = "y" * min(n, OUTPUT_BYTES)
        got = (result.exit_code, result.stdout, result.stderr, result.truncated)
        want = (
            (0, kept, "", n > OUTPUT_BYTES)
            if stream == "stdout"
            else (0, "", kept, n > OUTPUT_BYTES)
        )
        self.see(f"{n} bytes written to {stream}", got, want)

    async def op_exit(self) -> None:
        code = self.rng.choice((0, 1, 3, 255, 256 + 7))
        if self.rng.random() < 0.5:
            result = await self.exec(f"raise SystemExit({code})", python=True)
        else:
            code = code & 0xFF
            result = await self.exec(f"exit {code}")
        if result is not None:
            self.see(f"exit status {code}", result.exit_code, code & 0xFF)

    async def op_timed(self) -> None:
        """A command that appends to the log, then sleeps (past its timeout or not), while the
        user may pause the sandbox (trying what a paused sandbox refuses) and resume it."""
        timeout = self.rng.choice((0.5, 1.0))
        work = self.rng.choice((0.1, 0.3, 2.0))
        mark = f"t{len(self.timed) % 10}"
        command = f"printf '%s' {mark} >> {LOG}; sleep {work:g}"
        sb: Sandbox = self.sandbox
        pause_at = self.rng.uniform(0.02, 0.4) if self.rng.random() < 0.7 else None
        pause_for = self.rng.uniform(0.05, 1.5)
        paused: list[tuple[float, float]] = []
        outcome: list[str] = []
        times: list[float] = []

        async def run() -> None:
            times.append(trio.current_time())
            try:
                await sb.exec(command, timeout=timeout)
                outcome.append("ok")
            except ExecTimeoutError:
                outcome.append("timeout")
            except (SandboxCrashedError, SandboxStateError):
                outcome.append("crash")
            times.append(trio.current_time())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            if pause_at is not None:
                await trio.sleep(pause_at)
                if sb.state is SandboxState.RUNNING:
                    await self._pause_for(sb, pause_for, paused)
        old = self.tree.files.get(LOG, b"")
        after = self.tree.copy()
        after.files[LOG] = (old + mark.encode())[:FILE_BYTES]
        self.timed.append(
            Timed(self.name, command, timeout, work, times[0], times[1], tuple(paused), outcome[0])
        )
        if outcome[0] == "crash":
            raise Lost("crashed during a timed command")
        if outcome[0] == "ok":
            self.tree = after
        else:  # killed: what it wrote before the kill stays (or a fault hung it first)
            await self.check_tree(f"after {command!r} timed out", after)

    async def _pause_for(
        self, sb: Sandbox, seconds: float, paused: list[tuple[float, float]]
    ) -> None:
        try:
            await sb.pause()
        except PauseError:
            self.ctx.count("sandbox.pause_failed")
            return
        except (SandboxStateError, SandboxCrashedError):
            return
        begin = trio.current_time()
        self.ctx.count("sandbox.pauses")
        if self.rng.random() < 0.5:
            for name, call in (
                ("exec", lambda: sb.exec("true")),
                ("write_file", lambda: sb.write_file("p", b"x")),
                ("list_files", lambda: sb.list_files()),
            ):
                try:
                    await call()
                    got = "done"
                except SandboxStateError:
                    got = "refused"
                self.see(f"{name} while paused", (got, sb.state), ("refused", SandboxState.PAUSED))
        await trio.sleep(max(0.0, seconds - (trio.current_time() - begin)))
        try:
            await sb.resume()
        except (SandboxStateError, SandboxCrashedError):
            paused.append((begin, trio.current_time()))
            return
        paused.append((begin, trio.current_time()))

    async def op_snapshot(self) -> None:
        try:
            data = await self.sandbox.snapshot()
        except SnapshotError:
            self.ctx.count("sandbox.snapshot_failed")
            return
        except (SandboxCrashedError, SandboxStateError) as error:
            raise Lost(str(error)) from None
        self.snapshots.append((data, self.tree.copy()))
        self.snapshots = self.snapshots[-4:]

    async def restore(self, index: int) -> None:
        """Restore snapshot ``index``: the working area becomes exactly its files; a restore
        that fails (damaged bytes, an injected failure) changes nothing."""
        data, tree = self.snapshots[index]
        try:
            await self.sandbox.restore(data)
            self.tree = tree.copy()
            got = "restored"
        except CorruptSnapshotError:
            got = "refused"
            self.snapshots.pop(index)  # damaged bytes stay damaged
        except RestoreError:
            got = "failed"
        except (SandboxCrashedError, SandboxStateError) as error:
            raise Lost(str(error)) from None
        await self.check_tree(f"after a restore of snapshot {index} ({got})")

    async def op_restore(self) -> None:
        if self.snapshots:
            await self.restore(self.rng.randrange(len(self.snapshots)))

    async def step(self) -> None:
        ops = (
            (self.op_write, 3),
            (self.op_shell_write, 3),
            (self.op_mkdir, 2),
            (self.op_rm, 2),
            (self.op_cat, 2),
            (self.op_output, 2),
            (self.op_exit, 1),
            (self.op_timed, 2),
            (self.op_snapshot, 2),
            (self.op_restore, 1),
        )
        total = sum(w for _, w in ops)
        pick = self.rng.random() * total
        for fn, weight in ops:
            pick -= weight
            if pick < 0:
                await fn()
                return


@workload(
    params={"boxes": 3, "ops": 30},
    sizes=("boxes", "ops"),
    bounds={"boxes": (1, 50), "ops": (1, 10_000)},
)
async def sandbox_port(ctx: WorkloadContext) -> None:
    """Each user runs ``ops`` operations on its own sandbox, then reads it whole."""
    seen: list[Seen] = []
    timed: list[Timed] = []
    ctx.state.update(seen=seen, timed=timed)
    names = ctx.topology.nodes or ("box-host",)
    nodes = [ctx.sim.add_node(name) for name in names]

    async def user(number: int) -> None:
        me = User(
            ctx, f"u{number}", nodes[number % len(nodes)], ctx.rng(f"user/{number}"), seen, timed
        )
        await me.fresh()
        for index in range(ctx.params["ops"]):
            try:
                await me.step()
                if index % 5 == 4:
                    await me.check_tree(f"after {index + 1} operations")
            except (Lost, SandboxCrashedError, SandboxStateError):
                ctx.count("sandbox.lost")
                await me.fresh()
        while True:
            try:
                await me.check_tree("at the end")
                break
            except (SandboxCrashedError, SandboxStateError):
                await me.fresh()
        ctx.count("users.done")
        await me.sandbox.stop()

    async with trio.open_nursery() as nursery:
        for number in range(ctx.params["boxes"]):
            nursery.start_soon(user, number)
    ctx.metric("sandbox.observations", len(seen))
    ctx.metric("sandbox.timed", len(timed))


@invariant
def sandbox_port_contract(ctx: WorkloadContext) -> None:
    """Every listing, file, output, exit code and refusal is one the port's contract allows
    for the model's working area."""
    problems = check_seen(ctx.state["seen"])
    done = ctx.metrics.get("users.done", 0)
    if done != ctx.params["boxes"]:
        problems.append(f"{done} of {ctx.params['boxes']} users finished")
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:10])


@invariant
def sandbox_timeouts_kept(ctx: WorkloadContext) -> None:
    """Each command's running time (less pauses) kept its timeout to the tick."""
    problems = check_timed(ctx.state["timed"])
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:10])
