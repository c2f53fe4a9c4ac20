"""Generated command lines in sandboxes, judged by a reference model of the shell
(``sandbox_shell``).

The other sandbox scenarios run command lines from fixed repertoires (``agent_sandbox_files``'
templates, ``sandbox_port``'s printf, mkdir, rm and cat), so a shell whose ``false && a || b``
ends the list early, whose redirection after ``cd`` lands in the wrong directory, whose
``touch`` empties a file or whose ``wc a b`` leaves out its total ran everywhere and failed
nowhere (the session-18 blind test, sbxN). Here ``boxes`` users, each on one of the topology's
nodes, each own a sandbox (a :class:`~kelpie_dst.shims.FaultySandbox`) and run ``lines``
command lines drawn from a grammar (:mod:`._shell_reference`): and-or lists with ``;``, ``&&``
and ``||``, pipelines, ``cd``, the redirections ``<``, ``>``, ``>>``, ``2>``, ``2>>``,
``2>&1`` and ``>&2`` in both orders, every command of the subset with its options, names with
``..`` and ``./``, missing files and directories, words quoted in equivalent ways. Each line's
exit status, stdout and stderr (error lines by their form only) and the working area after
it (read whole with the file tools) must be what POSIX sh and GNU coreutils give on the
model's files (``shell_lines_agree``). Sandboxes crash during commands and hang until their
timeout; a command cut by a crash must raise ``SandboxCrashedError`` and the calls after it
a ``SandboxStateError`` naming the crash (docs/sandbox.md, "Commands" and the fault
reference), and a hung command must leave the files as they were (``sandbox_crashes_named``).
"""

from __future__ import annotations

import re
from typing import Any

import attrs
import trio

from kelpie_agent.sandbox import (
    ExecResult,
    ExecTimeoutError,
    SandboxBootError,
    SandboxCrashedError,
    SandboxLimits,
    SandboxNetwork,
    SandboxStateError,
)

from .._nodes import Node
from .._rng import RngStream
from ..scenario import WorkloadContext, invariant, workload
from ..shims import open_sandbox
from ._shell_reference import (
    Line,
    Outcome,
    Tree,
    Unknowable,
    draw_line,
    evaluate,
    fill_line,
    matches,
    remove_line,
)
from .sandbox_network import DESTINATIONS as NETWORK_DESTINATIONS

__all__ = [
    "documented_allows",
    "sandbox_crashes_named",
    "sandbox_network_as_documented",
    "sandbox_shell",
    "shell_lines_agree",
]

FILE_BYTES = 8192
DISK_BYTES = 12 * 4096
OUTPUT_BYTES = 64 * 1024  # never reached: outputs are judged whole
LIMITS = SandboxLimits(
    timeout=5.0, file_size_bytes=FILE_BYTES, disk_bytes=DISK_BYTES, max_output_bytes=OUTPUT_BYTES
)
# Each sandbox gets an agent's list under a server's (docs/sandbox.md, "Network"); what its
# network allows is judged for every destination against the documented pattern table.
AGENT_LISTS: tuple[tuple[str, ...], ...] = (
    (),
    ("api.example.com",),
    ("*.example.com",),
    ("api.example.com:443",),
    ("API.Example.com", "api.example.org"),
    ("*.api.example.com", "data.example.org:8443"),
    ("203.0.113.7", "[2001:db8::1]:443"),
)
CEILINGS: tuple[tuple[str, ...] | None, ...] = (
    None,
    ("*.example.com", "example.com", "data.example.org:443"),
    ("api.example.org", "203.0.113.7:80", "[2001:db8::1]"),
)
DESTINATIONS: tuple[tuple[str, int], ...] = (
    *NETWORK_DESTINATIONS,  # sandbox_network's, then cases, addresses and IPv6
    ("API.EXAMPLE.ORG", 443),
    ("203.0.113.7", 80),
    ("203.0.113.7", 443),
    ("[2001:db8::1]", 443),
    ("[2001:db8::1]", 80),
)
BOOTS = 30
DRAWS = 40  # lines drawn for one whose answer the model knows


def documented_match(pattern: str, host: str, port: int) -> bool:
    """docs/sandbox.md's pattern table, case-insensitive: a host (any port), ``*.domain``
    (any subdomain, not the domain), ``host:port``, an IPv4 address, ``[IPv6]`` (``:port``)."""
    pattern, host = pattern.lower(), host.lower().strip("[]")
    if pattern.startswith("["):
        name, _, rest = pattern[1:].partition("]")
        want = int(rest[1:]) if rest else None
    else:
        name, colon, number = pattern.rpartition(":")
        name, want = (name, int(number)) if colon else (pattern, None)
    if want is not None and want != port:
        return False
    if name.startswith("*."):
        return host.endswith(name[1:]) and host != name[2:]
    return host == name


def documented_allows(
    allow: tuple[str, ...], ceiling: tuple[str, ...] | None, host: str, port: int
) -> bool:
    """A destination must match the agent's list and, when there is one, the server's."""
    return any(documented_match(p, host, port) for p in allow) and (
        ceiling is None or any(documented_match(p, host, port) for p in ceiling)
    )


def _short(text: object, limit: int = 160) -> str:
    shown = repr(text)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


@attrs.define
class ShellUser:
    ctx: WorkloadContext
    name: str
    node: Node
    rng: RngStream
    problems: list[str]
    crashes: list[str]
    network: list[str]
    sandbox: Any = None
    tree: Tree = attrs.Factory(Tree)
    generation: int = 0
    fills: int = 0

    async def fresh(self) -> None:
        if self.sandbox is not None:
            await self.sandbox.stop()
        for _ in range(BOOTS):
            self.generation += 1
            allow, ceiling = self.rng.choice(AGENT_LISTS), self.rng.choice(CEILINGS)
            network = SandboxNetwork(allow)
            if ceiling is not None:
                network = network.under(SandboxNetwork(ceiling))
            box = open_sandbox(
                self.node,
                name=f"{self.name}.{self.generation}",
                limits=LIMITS,
                network=network,
            )
            try:
                await box.boot()
            except SandboxBootError:
                self.ctx.count("shell.boot_failed")
                continue
            self.sandbox, self.tree = box, Tree()
            self.judge_network(allow, ceiling)
            return
        raise AssertionError(f"{self.name}: no sandbox booted in {BOOTS} tries")

    def draw(self) -> tuple[Line, Outcome]:
        fill = None
        filled = sorted(d for d in self.tree.dirs if re.fullmatch(r"p[0-9]+", d))
        if filled:  # away again
            fill = remove_line(self.rng, self.tree, filled[0])
        elif self.rng.random() < 0.12:  # to the disk limit, to the byte
            self.fills += 1
            fill = fill_line(self.rng, self.tree, f"p{self.fills}", DISK_BYTES)
            self.ctx.count("shell.fills" if fill else "shell.fills_skipped")
        for _ in range(DRAWS):
            line = fill or draw_line(self.rng, self.tree)
            fill = None
            try:
                outcome = evaluate(
                    line,
                    self.tree,
                    root=self.sandbox.workdir,
                    file_bytes=FILE_BYTES,
                    disk_bytes=DISK_BYTES,
                )
            except Unknowable:
                self.ctx.count("shell.unknowable")
                continue
            return line, outcome
        self.ctx.count("shell.fallbacks")
        return Line((), "true"), Outcome(0, (), (), self.tree.copy())

    def judge_network(self, allow: tuple[str, ...], ceiling: tuple[str, ...] | None) -> None:
        """The sandbox's network lets through exactly what both lists allow."""
        for host, port in DESTINATIONS:
            got = self.sandbox.network.allows(host, port)
            if got != documented_allows(allow, ceiling, host, port):
                self.network.append(
                    f"{self.name}: a sandbox for the list {list(allow)} under the server's "
                    f"{ceiling and list(ceiling)} {'allows' if got else 'refuses'} "
                    f"{host}:{port}; the documented patterns say the opposite"
                )

    async def read_tree(self) -> tuple[dict[str, str], set[str]]:
        files: dict[str, str] = {}
        dirs: set[str] = set()
        todo = [""]
        while todo:
            here = todo.pop()
            for name in await self.sandbox.list_files(here or "."):
                path = f"{here}/{name}" if here else name
                if name.endswith("/"):
                    dirs.add(path[:-1])
                    todo.append(path[:-1])
                else:
                    files[path] = (await self.sandbox.read_file(path)).decode(errors="replace")
        return files, dirs

    async def check_tree(self, why: str, want: Tree) -> None:
        """The working area is ``want``; judged once, then the model goes on from what is
        there."""
        files, dirs = await self.read_tree()
        wrong = sorted(
            p for p in set(files) | set(want.files) if p not in files or p not in want.files
        )
        wrong += sorted(
            p for p in set(files) & set(want.files) if not matches(files[p], want.files[p])
        )
        if wrong or dirs != want.dirs:
            self.problems.append(
                f"{self.name}: the working area {why}: files {sorted(files)} (different: "
                f"{wrong}; e.g. {_short({p: files.get(p) for p in wrong[:2]})}), directories "
                f"{sorted(dirs)}; the model has files {sorted(want.files)}, directories "
                f"{sorted(want.dirs)}"
            )
        self.tree = Tree({p: (t,) for p, t in files.items()}, dirs)

    def judge(self, line: Line, want: Outcome, got: ExecResult) -> None:
        where = f"{self.name}: {line.text!r}"
        if got.exit_code != want.status:
            self.problems.append(
                f"{where}: exit status {got.exit_code}, not {want.status} (stdout "
                f"{_short(got.stdout)}, stderr {_short(got.stderr)})"
            )
            return
        if want.killed:
            return  # killed for the disk limit: what it printed first is not judged
        if not matches(got.stdout, want.stdout):
            self.problems.append(
                f"{where}: stdout {_short(got.stdout)}, not {_short(want.stdout)} "
                f"(stderr {_short(got.stderr)})"
            )
        elif not matches(got.stderr, want.stderr):
            self.problems.append(
                f"{where}: stderr {_short(got.stderr)}, not {_short(want.stderr)} (error "
                "lines by their form)"
            )

    async def after_crash(self, what: str) -> None:
        """The calls after a crash are refused with a SandboxStateError naming the crash."""
        try:
            await self.sandbox.list_files()
            self.crashes.append(f"{self.name}: list_files after {what} answered")
        except SandboxStateError as error:
            if "crash" not in str(error):
                self.crashes.append(
                    f"{self.name}: list_files after {what} was refused without naming the "
                    f"crash: {error}"
                )
        except SandboxCrashedError as error:
            self.crashes.append(
                f"{self.name}: list_files after {what} raised SandboxCrashedError ({error}), "
                "not SandboxStateError"
            )
        self.ctx.count("shell.crashes")
        await self.fresh()

    async def step(self) -> None:
        line, want = self.draw()
        try:
            result = await self.sandbox.exec(line.text)
        except ExecTimeoutError:
            self.ctx.count("shell.timeouts")  # a hung command (a fault) has no effect
            await self.check_tree(f"after {line.text!r} hung and timed out", self.tree)
            return
        except SandboxCrashedError:
            await self.after_crash(f"a crash during {line.text!r}")
            return
        except SandboxStateError as error:
            self.crashes.append(
                f"{self.name}: {line.text!r} raised SandboxStateError ({error}) though its user "
                "never stopped the sandbox: a command cut by a crash raises SandboxCrashedError"
            )
            await self.fresh()
            return
        self.ctx.count("shell.lines")
        if want.killed:
            self.ctx.count("shell.disk_kills")
        self.judge(line, want, result)
        await self.check_tree(f"after {line.text!r}", want.after)


@attrs.define
class ShellLog:
    problems: list[str] = attrs.Factory(list)
    crashes: list[str] = attrs.Factory(list)
    network: list[str] = attrs.Factory(list)
    done: int = 0


@workload(
    params={"boxes": 3, "lines": 40},
    sizes=("boxes", "lines"),
    bounds={"boxes": (1, 50), "lines": (1, 10_000)},
)
async def sandbox_shell(ctx: WorkloadContext) -> None:
    """Each user runs ``lines`` generated command lines in its own sandbox."""
    log = ShellLog()
    ctx.state["log"] = log
    names = ctx.topology.nodes or ("box-host",)
    nodes = [ctx.sim.add_node(name) for name in names]

    async def user(number: int) -> None:
        me = ShellUser(
            ctx,
            f"u{number}",
            nodes[number % len(nodes)],
            ctx.rng(f"shell/{number}"),
            log.problems,
            log.crashes,
            log.network,
        )
        await me.fresh()
        for _ in range(int(ctx.params["lines"])):
            try:
                await me.step()
            except (SandboxCrashedError, SandboxStateError):
                await me.after_crash("a crash during a read of the working area")
        log.done += 1
        await me.sandbox.stop()

    async with trio.open_nursery() as nursery:
        for number in range(int(ctx.params["boxes"])):
            nursery.start_soon(user, number)
    ctx.metric("shell.problems", len(log.problems))


def _shown(problems: list[str]) -> str:
    more = f"\n... ({len(problems)} in all)" if len(problems) > 8 else ""
    return f"{len(problems)} problem(s):\n" + "\n".join(problems[:8]) + more


@invariant
def shell_lines_agree(ctx: WorkloadContext) -> None:
    """Every line's exit status, stdout and stderr, and the working area after it, are what
    POSIX sh with GNU coreutils give on the model's files (docs/sandbox.md, "The shell
    subset")."""
    log: ShellLog = ctx.state["log"]
    problems = list(log.problems)
    if log.done != ctx.params["boxes"]:
        problems.append(f"{log.done} of {ctx.params['boxes']} users finished")
    assert not problems, _shown(problems)


@invariant
def sandbox_crashes_named(ctx: WorkloadContext) -> None:
    """A command cut by a crash raises SandboxCrashedError, and the calls after it a
    SandboxStateError naming the crash."""
    log: ShellLog = ctx.state["log"]
    assert not log.crashes, _shown(log.crashes)


@invariant
def sandbox_network_as_documented(ctx: WorkloadContext) -> None:
    """Each sandbox's network (an agent's list under a server's, as ``kelpie serve`` makes it)
    allows exactly the destinations that docs/sandbox.md's pattern table lets through both."""
    log: ShellLog = ctx.state["log"]
    assert not log.network, _shown(log.network)
