"""The commands of SimSandbox's shell: echo, printf, cat, ls, pwd, cd, mkdir, rm, touch, head,
wc, true, false, exit and sleep (which waits in virtual time).

Each behaves like its GNU coreutils namesake for the options listed in docs/sandbox.md, with
messages of the same shape (``cat: x: No such file or directory``) but plain quotes.
"""

from __future__ import annotations

import math
import re

from ._memfs import NOENT, FsError
from ._minishell import Command, Context, ShellExit

__all__ = ["COMMANDS"]


def _flags(args: list[str], allowed: str) -> tuple[set[str], list[str]]:
    """Leading single-letter flags (``-rf``), then operands; ``--`` ends the flags."""
    flags: set[str] = set()
    while args and args[0].startswith("-") and len(args[0]) > 1:
        arg = args.pop(0)
        if arg == "--":
            break
        letters = set(arg[1:])
        if not letters <= set(allowed):
            bad = sorted(letters - set(allowed))[0]
            raise ValueError(f"invalid option -- '{bad}'")
        flags |= letters
    return flags, args


async def echo(ctx: Context, args: list[str]) -> int:
    newline = not (args and args[0] == "-n")
    ctx.out += " ".join(args[0 if newline else 1 :]).encode() + (b"\n" if newline else b"")
    return 0


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "a": "\a", '"': '"', "'": "'", "0": "\0"}
_SPEC = re.compile(r"%([%sdic])|\\(.)", re.S)


async def printf(ctx: Context, args: list[str]) -> int:
    if not args:
        return ctx.error("printf: missing operand")
    fmt, values = args[0], args[1:]
    status = 0

    def once() -> str:
        nonlocal status

        def sub(m: re.Match[str]) -> str:
            nonlocal status
            if m.group(2) is not None:
                return _ESCAPES.get(m.group(2), "\\" + m.group(2))
            kind = m.group(1)
            if kind == "%":
                return "%"
            value = values.pop(0) if values else ""
            if kind in "di":
                try:
                    return str(int(value or "0"))
                except ValueError:
                    ctx.error(f"printf: {value}: invalid number")
                    status = 1
                    return "0"
            return value[:1] if kind == "c" else value

        return _SPEC.sub(sub, fmt)

    text = ""
    while True:  # the format is reused while it consumes arguments
        left = len(values)
        text += once()
        if not values or len(values) == left:
            break
    ctx.out += text.encode()
    return status


def _read(ctx: Context, cmd: str, name: str) -> bytes | None:
    if name == "-":
        return ctx.stdin
    try:
        return ctx.fs.read(ctx.path(name))
    except FsError as error:
        ctx.error(f"{cmd}: {name}: {error.reason}")
        return None


def _inputs(ctx: Context, cmd: str, names: list[str]) -> tuple[list[tuple[str, bytes]], int]:
    if not names:
        return [("", ctx.stdin)], 0
    found = [(name, _read(ctx, cmd, name)) for name in names]
    return [(n, d) for n, d in found if d is not None], int(any(d is None for _, d in found))


async def cat(ctx: Context, args: list[str]) -> int:
    inputs, status = _inputs(ctx, "cat", args)
    for _, data in inputs:
        ctx.out += data
    return status


async def ls(ctx: Context, args: list[str]) -> int:
    flags, names = _flags(args, "aA1p")
    status = 0
    files: list[str] = []
    dirs: list[tuple[str, list[str]]] = []
    for name in names or ["."]:
        path = ctx.path(name)
        try:
            entries = ctx.fs.listdir(path)
        except FsError as error:
            if ctx.fs.is_file(path):
                files.append(name)
                continue
            status = 2
            ctx.error(f"ls: cannot access '{name}': {error.reason}")
            continue
        if "p" not in flags:
            entries = [e.rstrip("/") for e in entries]
        if "A" not in flags and "a" not in flags:
            entries = [e for e in entries if not e.startswith(".")]
        if "a" in flags:
            entries = [".", "..", *entries]
        dirs.append((name, entries))
    # as GNU ls: the files named first, then the directories, each sorted; a "name:" header
    # on each directory when there were several operands (even if some could not be listed)
    blocks = ["".join(f + "\n" for f in sorted(files))] if files else []
    for name, entries in sorted(dirs):
        header = f"{name}:\n" if len(names) > 1 else ""
        blocks.append(header + "".join(e + "\n" for e in entries))
    ctx.out += "\n".join(blocks).encode()
    return status


async def pwd(ctx: Context, args: list[str]) -> int:
    ctx.out += ctx.shell.cwd.encode() + b"\n"
    return 0


async def cd(ctx: Context, args: list[str]) -> int:
    path = ctx.path(args[0]) if args else ctx.fs.root
    if not ctx.fs.is_dir(path):
        ctx.error(f"sh: cd: can't cd to {args[0]}")
        return 2
    ctx.shell.cwd = path
    return 0


async def mkdir(ctx: Context, args: list[str]) -> int:
    flags, names = _flags(args, "p")
    if not names:
        return ctx.error("mkdir: missing operand")
    status = 0
    for name in names:
        try:
            ctx.fs.mkdir(ctx.path(name), parents="p" in flags)
        except FsError as error:
            status = ctx.error(f"mkdir: cannot create directory '{name}': {error.reason}")
    return status


async def rm(ctx: Context, args: list[str]) -> int:
    flags, names = _flags(args, "rRf")
    if not names and "f" not in flags:
        return ctx.error("rm: missing operand")
    status = 0
    for name in names:
        if name.rstrip("/").split("/")[-1] in (".", ".."):
            status = ctx.error(f"rm: refusing to remove '.' or '..' directory: skipping '{name}'")
            continue
        path = ctx.path(name)
        if ctx.fs.is_dir(path) and not flags & {"r", "R"}:
            status = ctx.error(f"rm: cannot remove '{name}': Is a directory")
            continue
        try:
            ctx.fs.remove(path, recursive=True)
        except FsError as error:
            if not ("f" in flags and error.reason == NOENT):
                status = ctx.error(f"rm: cannot remove '{name}': {error.reason}")
    return status


async def touch(ctx: Context, args: list[str]) -> int:
    if not args:
        return ctx.error("touch: missing file operand")
    status = 0
    for name in args:
        path = ctx.path(name)
        if ctx.fs.is_dir(path) or ctx.fs.is_file(path):
            continue
        try:
            ctx.fs.write(path, b"")
        except FsError as error:
            status = ctx.error(f"touch: cannot touch '{name}': {error.reason}")
    return status


def _count(value: str) -> int:
    if not value.isdigit():
        raise ValueError(f"invalid number of lines: '{value}'")
    return int(value)


async def head(ctx: Context, args: list[str]) -> int:
    lines, chars = 10, None
    rest: list[str] = []
    items = iter(args)
    for arg in items:
        if arg in ("-n", "-c"):
            value = _count(next(items, ""))
            lines, chars = (value, None) if arg == "-n" else (lines, value)
        elif arg.startswith("-n") or (arg.startswith("-") and arg[1:].isdigit()):
            lines = _count(arg[2:] if arg.startswith("-n") else arg[1:])
        else:
            rest.append(arg)
    inputs, status = _inputs(ctx, "head", rest)
    for index, (name, data) in enumerate(inputs):
        if len(rest) > 1:  # several operands: headers (GNU), even if some could not be read
            ctx.out += f"{chr(10) if index else ''}==> {name} <==\n".encode()
        ctx.out += data[:chars] if chars is not None else b"".join(data.splitlines(True)[:lines])
    return status


async def wc(ctx: Context, args: list[str]) -> int:
    flags, names = _flags(args, "lwc")
    shown = [f for f in "lwc" if f in flags] or ["l", "w", "c"]
    inputs, status = _inputs(ctx, "wc", names)
    rows = []
    for name, data in inputs:
        counts = {"l": data.count(b"\n"), "w": len(data.split()), "c": len(data)}
        rows.append(([counts[f] for f in shown], name))
    if len(names) > 1:  # several operands: a total (GNU), even if some could not be read
        rows.append(([sum(r[0][i] for r in rows) for i in range(len(shown))], "total"))
    # GNU pads every count to one width: none for a single count, 7 for a pipe, else the
    # digits of the largest number (GNU uses the total size of the files, the same in practice).
    if len(shown) == 1 and len(rows) == 1:
        width = 1
    elif not names and not ctx.stdin_is_file:
        width = 7
    else:
        width = max((len(str(n)) for numbers, _ in rows for n in numbers), default=1)
    for numbers, name in rows:
        line = " ".join(str(n).rjust(width) for n in numbers)
        ctx.out += (line + (f" {name}" if name else "") + "\n").encode()
    return status


async def true(ctx: Context, args: list[str]) -> int:
    return 0


async def false(ctx: Context, args: list[str]) -> int:
    return 1


async def exit_(ctx: Context, args: list[str]) -> int:
    try:  # a bare ``exit`` exits with the status of the last command (POSIX)
        raise ShellExit(int(args[0]) & 0xFF if args else ctx.shell.status)
    except ValueError:
        ctx.error(f"sh: exit: Illegal number: {args[0]}")
        raise ShellExit(2) from None


async def sleep(ctx: Context, args: list[str]) -> int:
    try:
        seconds = sum(float(a) for a in args) if args else math.nan
    except ValueError:
        seconds = math.nan
    if not (seconds >= 0 and math.isfinite(seconds)):
        return ctx.error(f"sleep: invalid time interval '{' '.join(args)}'")
    await ctx.shell.sleep(seconds)
    return 0


async def _with_usage(command: Command, name: str, ctx: Context, args: list[str]) -> int:
    try:
        return await command(ctx, list(args))
    except ValueError as error:
        ctx.error(f"{name}: {error}")
        return 1


def _wrap(name: str, command: Command) -> Command:
    async def run(ctx: Context, args: list[str]) -> int:
        return await _with_usage(command, name, ctx, args)

    return run


COMMANDS: dict[str, Command] = {
    name: _wrap(name, fn)
    for name, fn in {
        "cat": cat,
        "cd": cd,
        "echo": echo,
        "exit": exit_,
        "false": false,
        "head": head,
        "ls": ls,
        "mkdir": mkdir,
        "printf": printf,
        "pwd": pwd,
        "rm": rm,
        "sleep": sleep,
        "touch": touch,
        "true": true,
        "wc": wc,
    }.items()
}
