"""A tiny subset of the POSIX shell, run in-process over a :class:`MemFS` (SimSandbox's exec).

Supported: words with ``'single'`` and ``"double"`` quotes and backslash escapes, ``#`` comments,
``;`` and newlines, ``&&``, ``||``, pipelines ``|``, and the redirections ``<``, ``>``, ``>>``,
``2>``, ``2>>``, ``2>&1`` and ``>&2``. The commands are in ``_minicmds``.

Not supported, and refused with exit code 2 rather than silently misread: ``$`` (variables,
``$(...)``), backticks, globs (``*``, ``?``, ``[``), ``~``, subshells ``( )`` and background
jobs ``&``. Stages of a pipeline run one after the other (not concurrently).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

from ._memfs import FsError, MemFS

__all__ = ["Context", "Shell", "ShellExit"]

_UNSUPPORTED = {
    "$": "'$' (variables and substitutions)",
    "`": "backticks (command substitution)",
    "*": "globs ('*')",
    "?": "globs ('?')",
    "[": "globs ('[')",
    "(": "subshells ('(')",
    ")": "subshells (')')",
}
_WITH_TARGET = ("<", "1>", "1>>", "2>", "2>>")


class ShellSyntaxError(Exception):
    """The command line cannot be run (bad syntax, or something outside the subset)."""


class ShellExit(Exception):
    """``exit N``: ends the command line with status N."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@attrs.define
class Stage:
    argv: list[str] = attrs.Factory(list)
    redirects: list[tuple[str, str]] = attrs.Factory(list)


@attrs.define
class Context:
    """What a command sees: the filesystem, its directory, stdin, and where to write."""

    shell: Shell
    stdin: bytes
    stdin_is_file: bool = False  # redirected from a file (not a pipe): wc pads differently
    out: bytearray = attrs.Factory(bytearray)
    err: bytearray = attrs.Factory(bytearray)

    @property
    def fs(self) -> MemFS:
        return self.shell.fs

    def path(self, name: str) -> str:
        return self.fs.abspath(name, self.shell.cwd)

    def error(self, message: str) -> int:
        self.err += message.encode() + b"\n"
        return 1


Command = Callable[[Context, list[str]], Awaitable[int]]


def tokenize(source: str) -> list[tuple[bool, str]]:
    """``(is_operator, text)`` pairs."""
    tokens: list[tuple[bool, str]] = []
    word: list[str] = []
    in_word = plain = False
    i, n = 0, len(source)

    def flush() -> None:
        nonlocal in_word
        if in_word:
            tokens.append((False, "".join(word)))
        word.clear()
        in_word = False

    while i < n:
        c = source[i]
        if c in " \t":
            flush()
            i += 1
        elif c in ";\n":
            flush()
            tokens.append((True, ";"))
            i += 1
        elif c == "#" and not in_word:
            while i < n and source[i] != "\n":
                i += 1
        elif c == "'":
            end = source.find("'", i + 1)
            if end < 0:
                raise ShellSyntaxError("unterminated quoted string")
            word.append(source[i + 1 : end])
            in_word, plain, i = True, False, end + 1
        elif c == '"':
            i += 1
            while True:
                if i >= n:
                    raise ShellSyntaxError("unterminated quoted string")
                c = source[i]
                if c == '"':
                    break
                if c in "$`":
                    raise ShellSyntaxError(f"SimSandbox's shell does not support {_UNSUPPORTED[c]}")
                if c == "\\" and i + 1 < n and source[i + 1] in '"\\$`\n':
                    i += 1
                    c = "" if source[i] == "\n" else source[i]
                word.append(c)
                i += 1
            in_word, plain, i = True, False, i + 1
        elif c == "\\":
            if i + 1 < n and source[i + 1] != "\n":
                word.append(source[i + 1])
                in_word, plain = True, False
            i += 2
        elif c == "&":
            if not source.startswith("&&", i):
                raise ShellSyntaxError("SimSandbox's shell does not support background jobs ('&')")
            flush()
            tokens.append((True, "&&"))
            i += 2
        elif c == "|":
            flush()
            op = "||" if source.startswith("||", i) else "|"
            tokens.append((True, op))
            i += len(op)
        elif c in "<>":
            fd = "".join(word) if in_word and plain and "".join(word) in ("1", "2") else ""
            if fd:
                word.clear()
                in_word = False
            flush()
            if c == "<":
                op, i = "<", i + 1
            elif source.startswith(">&", i):
                target = source[i + 2 : i + 3]
                if target not in ("1", "2"):
                    raise ShellSyntaxError("only >&1 and >&2 are supported")
                op, i = f"{fd or '1'}>&{target}", i + 3
            elif source.startswith(">>", i):
                op, i = f"{fd or '1'}>>", i + 2
            else:
                op, i = f"{fd or '1'}>", i + 1
            tokens.append((True, op))
        elif c in _UNSUPPORTED or (c == "~" and not in_word):
            what = _UNSUPPORTED.get(c, "'~' (home directory expansion)")
            raise ShellSyntaxError(f"SimSandbox's shell does not support {what}")
        else:
            if not in_word:
                plain = True
            word.append(c)
            in_word = True
            i += 1
    flush()
    return tokens


Pipeline = list[Stage]
AndOr = list[tuple[str, Pipeline]]  # ("", first), ("&&" | "||", next)...


def parse(tokens: list[tuple[bool, str]]) -> list[AndOr]:
    script: list[AndOr] = []
    andor: AndOr = []
    pipeline: Pipeline = []
    stage = Stage()
    joiner = ""
    items = iter(tokens)
    for is_op, text in items:
        if not is_op:
            stage.argv.append(text)
        elif text in _WITH_TARGET:
            target = next(items, (True, "end of input"))
            if target[0]:
                raise ShellSyntaxError(f"syntax error: {text} needs a file name")
            stage.redirects.append((text, target[1]))
        elif text in ("1>&2", "2>&1", "1>&1", "2>&2"):
            stage.redirects.append((text, ""))
        else:  # | && || ;
            empty = not (stage.argv or stage.redirects)
            if empty and (text != ";" or pipeline or joiner):
                raise ShellSyntaxError(f"syntax error near unexpected token '{text}'")
            if not empty:
                pipeline.append(stage)
            stage = Stage()
            if text == "|":
                continue
            if pipeline:
                andor.append((joiner, pipeline))
            pipeline, joiner = [], ("" if text == ";" else text)
            if text == ";" and andor:
                script.append(andor)
                andor = []
    if stage.argv or stage.redirects:
        pipeline.append(stage)
    elif pipeline or joiner:
        raise ShellSyntaxError("syntax error: unexpected end of input")
    if pipeline:
        andor.append((joiner, pipeline))
    if andor:
        script.append(andor)
    return script


class Shell:
    """Runs command lines over ``fs``; ``sleep(seconds)`` is how ``sleep`` waits."""

    def __init__(
        self, fs: MemFS, sleep: Callable[[float], Awaitable[None]], commands: dict[str, Command]
    ) -> None:
        self.fs = fs
        self.cwd = fs.root
        self.sleep = sleep
        self.commands = commands
        self.out = bytearray()  # the command line's stdout and stderr so far
        self.err = bytearray()
        self.status = 0  # the exit status of the last pipeline run (a bare ``exit`` uses it)

    async def run(self, source: str) -> int:
        """Run a command line; its exit status (its output is in ``out`` and ``err``)."""
        out, err = self.out, self.err
        try:
            script = parse(tokenize(source))
        except ShellSyntaxError as error:
            err += f"sh: {error}\n".encode()
            return 2
        status = 0
        try:
            for andor in script:
                for joiner, pipeline in andor:
                    if (joiner == "&&" and status != 0) or (joiner == "||" and status == 0):
                        continue
                    self.status = status
                    data = b""
                    for index, stage in enumerate(pipeline):
                        status, data = await self._stage(stage, data, err)
                        if index == len(pipeline) - 1:
                            out += data
        except ShellExit as done:
            status = done.status
        return status

    async def _stage(self, stage: Stage, stdin: bytes, err: bytearray) -> tuple[int, bytes]:
        """Run one command with its redirections; (status, what it sends down the pipe)."""
        fds: dict[str, tuple[str, str]] = {"1": ("out", ""), "2": ("err", "")}
        from_file = False
        for op, target in stage.redirects:
            path = self.fs.abspath(target, self.cwd)
            try:
                if op == "<":
                    stdin, from_file = self.fs.read(path), True
                elif "&" in op:
                    fds[op[0]] = fds[op[-1]]
                else:
                    self.fs.write(path, b"", append=op.endswith(">>"))
                    fds[op[0]] = ("file", path)
            except FsError as error:
                verb = "open" if op == "<" else "create"
                err += f"sh: cannot {verb} {target}: {error.reason}\n".encode()
                return 2, b""
        ctx = Context(self, stdin, from_file)
        status = 0
        if stage.argv:
            name, *args = stage.argv
            command = self.commands.get(name)
            if command is None:
                ctx.err += f"sh: {name}: not found\n".encode()
                status = 127
            else:
                try:
                    status = await command(ctx, args)
                except ShellExit:
                    err += ctx.err
                    raise
        piped = bytearray()
        for data, (kind, path) in ((ctx.out, fds["1"]), (ctx.err, fds["2"])):
            if kind == "out":
                piped += data
            elif kind == "err":
                err += data
            elif data:
                try:
                    self.fs.write(path, bytes(data), append=True)
                except FsError as error:
                    err += f"sh: {stage.argv[0]}: write error: {error.reason}\n".encode()
                    status = 1
        return status, bytes(piped)
