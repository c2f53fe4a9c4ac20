"""A reference model of the sandbox shell's documented behaviour, for ``sandbox_shell``.

docs/sandbox.md ("The shell subset") promises that stdout and exit codes match a real
``/bin/sh`` (dash) with GNU coreutils, for the syntax and commands it lists. This module is a
second, independent reading of that promise: command lines are generated as syntax trees
(:func:`draw_line`), rendered to text with random (but equivalent) quoting, and evaluated here
over a model of the working area (:func:`evaluate`), as POSIX sh and GNU coreutils define them.
It never runs the sandbox's own code and never reads ``_minishell``/``_minicmds``.

Error messages are not modelled word for word (the docs promise only their form): each is an
:data:`ERR` chunk, one non-empty line. Where the documented behaviour leaves the answer open,
or where dash and GNU would differ from anything a simple model can know (both streams of one
command into one file, a command reading the file it writes, ``wc`` of a directory, ``cd`` in a
pipeline stage, which dash runs in a subshell), :func:`evaluate` raises :class:`Unknowable`
and the generator draws another line: only lines whose answer is certain are run.
"""

from __future__ import annotations

import posixpath
import random
import re
from collections.abc import Callable, Iterable

import attrs

__all__ = [
    "ERR",
    "Line",
    "Outcome",
    "Tree",
    "Unknowable",
    "draw_line",
    "evaluate",
    "fill_line",
    "matches",
    "pattern",
    "remove_line",
]

ERR_MIN, ERR_MAX = 4, 300  # how long an error line may be (bounds for the disk count)
ENTRY = 4096  # what a file or a directory counts towards disk_bytes (docs/sandbox.md)
SIGXFSZ = 25


class _Err:
    """One error line: its text is the implementation's (``cat: x: No such file...``)."""

    def __repr__(self) -> str:
        return "<error line>"


ERR = _Err()
Chunk = str | _Err
Text = tuple[Chunk, ...]


class Unknowable(Exception):
    """The documented behaviour does not settle this line's answer: draw another."""


def _join(*parts: Iterable[Chunk]) -> Text:
    out: list[Chunk] = []
    for part in parts:
        for chunk in part:
            if isinstance(chunk, str):
                if not chunk:
                    continue
                if out and isinstance(out[-1], str):
                    out[-1] += chunk
                    continue
            out.append(chunk)
    return tuple(out)


def _exact(text: Text) -> str:
    if any(not isinstance(c, str) for c in text):
        raise Unknowable("needs the bytes of an error line")
    return "".join(c for c in text if isinstance(c, str))


def _bounds(text: Text) -> tuple[int, int]:
    fixed = sum(len(c) for c in text if isinstance(c, str))
    errs = sum(1 for c in text if not isinstance(c, str))
    return fixed + ERR_MIN * errs, fixed + ERR_MAX * errs


def _newlines(text: Text) -> int:
    return sum(c.count("\n") if isinstance(c, str) else 1 for c in text)


def _lines(text: Text) -> list[Text]:
    """The lines of ``text``, each with its newline (the last may lack one)."""
    lines: list[Text] = []
    current: list[Chunk] = []
    for chunk in text:
        if not isinstance(chunk, str):
            current.append(chunk)
            lines.append(_join(current))
            current = []
            continue
        for piece in chunk.splitlines(keepends=True):
            current.append(piece)
            if piece.endswith("\n"):
                lines.append(_join(current))
                current = []
    if current:
        lines.append(_join(current))
    return lines


@attrs.define
class Tree:
    """The working area: files (path relative to the root -> contents) and directories."""

    files: dict[str, Text] = attrs.Factory(dict)
    dirs: set[str] = attrs.Factory(set)

    def copy(self) -> Tree:
        return Tree(dict(self.files), set(self.dirs))

    def usage(self) -> tuple[int, int]:
        """Bounds of what the area counts towards disk_bytes."""
        lo = hi = ENTRY * (len(self.files) + len(self.dirs))
        for text in self.files.values():
            a, b = _bounds(text)
            lo, hi = lo + a, hi + b
        return lo, hi

    def is_dir(self, path: str) -> bool:
        return path == "" or path in self.dirs

    def parent_ok(self, path: str) -> bool:
        return self.is_dir(posixpath.dirname(path))

    def remove_tree(self, path: str) -> None:
        inner = path + "/"
        self.files = {p: t for p, t in self.files.items() if p != path and not p.startswith(inner)}
        self.dirs = {d for d in self.dirs if d != path and not d.startswith(inner)}

    def entries(self, path: str) -> list[tuple[str, bool]]:
        prefix = f"{path}/" if path else ""
        found = [(p[len(prefix) :], False) for p in self.files if p.startswith(prefix)]
        found += [(d[len(prefix) :], True) for d in self.dirs if d.startswith(prefix)]
        return sorted((n, d) for n, d in found if "/" not in n)


# -- syntax trees -------------------------------------------------------------------------------


@attrs.frozen
class Cmd:
    """One pipeline stage: its words (as the command sees them), its redirections, and the
    stage as written."""

    argv: tuple[str, ...]
    redirects: tuple[tuple[str, str], ...]
    text: str


Pipeline = tuple[Cmd, ...]
AndOr = tuple[tuple[str, Pipeline], ...]  # ("", first), ("&&" | "||", next), ...


@attrs.frozen
class Line:
    script: tuple[AndOr, ...]
    text: str


@attrs.frozen
class Outcome:
    """What a line does: its exit status, its stdout and stderr, the working area after it,
    and whether the disk limit killed it (the area is then read back, not predicted)."""

    status: int
    stdout: Text
    stderr: Text
    after: Tree
    killed: bool = False


class _Exit(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@attrs.define
class _State:
    tree: Tree
    root: str  # the working area's absolute path (for pwd)
    file_bytes: int
    cwd: str = ""
    reads: set[str] = attrs.Factory(set)
    last: int = 0  # the status of the last pipeline run

    def resolve(self, name: str) -> str:
        """``name`` relative to the root. A ``..`` after a name that is not a directory is
        resolved by the kernel (ENOENT, ENOTDIR) but lexically by SimSandbox (documented):
        Unknowable; so is a path above the root."""
        parts = self.cwd.split("/") if self.cwd and not name.startswith("/") else []
        for part in name.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if not parts or not self.tree.is_dir("/".join(parts)):
                    raise Unknowable("'..' after a name that is no directory, or above the root")
                parts.pop()
            else:
                parts.append(part)
        return "/".join(parts)

    def ancestors_ok(self, path: str) -> bool:
        """No ancestor of ``path`` is a file."""
        parts = path.split("/")[:-1]
        return not any("/".join(parts[: i + 1]) in self.tree.files for i in range(len(parts)))

    def read(self, name: str) -> Text | None:
        """A file's contents, None if it does not exist; Unknowable for a directory (GNU
        tools differ in what they print for one)."""
        path = self.resolve(name)
        self.reads.add(path)
        if self.tree.is_dir(path):
            raise Unknowable("reading a directory")
        return self.tree.files.get(path)


Result = tuple[int, Text, Text]  # status, stdout, stderr


def _echo(st: _State, args: list[str], stdin: Text) -> Result:
    if args and args[0] == "-n":
        return 0, (" ".join(args[1:]),), ()
    return 0, (" ".join(args) + "\n",), ()


_SPEC = re.compile(r"%[sdc%]|\\[nt]")


def _printf(st: _State, args: list[str], stdin: Text) -> Result:
    fmt, values = args[0], list(args[1:])
    uses = sum(1 for m in _SPEC.finditer(fmt) if m.group() in ("%s", "%d", "%c"))
    out = ""
    while True:

        def sub(m: re.Match[str]) -> str:
            spec = m.group()
            if spec in ("\\n", "\\t"):
                return "\n" if spec == "\\n" else "\t"
            if spec == "%%":
                return "%"
            value = values.pop(0) if values else ""
            if spec == "%c":
                return value[:1]
            return str(int(value or "0")) if spec == "%d" else value

        out += _SPEC.sub(sub, fmt)
        if not values or not uses:
            break
    return 0, (out,), ()


def _inputs(st: _State, names: list[str], stdin: Text) -> tuple[list[tuple[str, Text]], Text]:
    if not names:
        return [("", stdin)], ()
    found, errors = [], []
    for name in names:
        if name == "-":
            found.append((name, stdin))
            continue
        data = st.read(name)
        if data is None:
            errors.append(ERR)
        else:
            found.append((name, data))
    return found, tuple(errors)


def _cat(st: _State, args: list[str], stdin: Text) -> Result:
    found, errors = _inputs(st, args, stdin)
    return int(bool(errors)), _join(*(d for _, d in found)), errors


def _wc(st: _State, args: list[str], stdin: Text) -> Result:
    flags = ""
    while args and args[0].startswith("-") and len(args[0]) > 1:
        flags += args.pop(0)[1:]
    shown = [f for f in "lwc" if f in flags] or ["l", "w", "c"]
    found, errors = _inputs(st, args, stdin)
    rows: list[tuple[list[int], str]] = []
    for name, data in found:
        counts = {"l": _newlines(data)}
        if "w" in shown or "c" in shown:
            exact = _exact(data)
            counts["w"], counts["c"] = len(exact.split()), len(exact.encode())
        rows.append(([counts[f] for f in shown], name))
    if len(args) > 1:  # several operands: a total, even when some could not be read
        rows.append(([sum(r[0][i] for r in rows) for i in range(len(shown))], "total"))
    out: list[Chunk] = []
    for numbers, name in rows:
        if len(shown) == 1 and len(rows) == 1:
            out.append(f"{numbers[0]}" + (f" {name}" if name else "") + "\n")
        else:  # GNU pads the counts to a common width it picks: any run of spaces
            out.append(_Padded(numbers, name))
    return int(bool(errors)), tuple(out), errors


class _Padded(_Err):
    """A line of counts padded to a width GNU chooses (from file sizes, or 7 for a pipe)."""

    def __init__(self, numbers: list[int], name: str) -> None:
        self.numbers, self.name = numbers, name

    def __repr__(self) -> str:
        return f"<counts {self.numbers} {self.name}>"

    def regex(self) -> str:
        body = " +".join(str(n) for n in self.numbers)
        return " *" + body + (" " + re.escape(self.name) if self.name else "") + "\n"


def _head(st: _State, args: list[str], stdin: Text) -> Result:
    n, chars = 10, None
    names: list[str] = []
    items = iter(args)
    for arg in items:
        if arg == "-n":
            n = int(next(items))
        elif arg == "-c":
            chars = int(next(items))
        elif arg[:1] == "-" and arg[1:].isdigit():
            n = int(arg[1:])
        else:
            names.append(arg)
    found, errors = _inputs(st, names, stdin)
    out: list[Text] = []
    for index, (name, data) in enumerate(found):
        if len(names) > 1:  # several operands: headers, the first printed without a blank
            out.append((f"{chr(10) if index else ''}==> {name} <==\n",))
        out.append((_exact(data)[:chars],) if chars is not None else _join(*_lines(data)[:n]))
    return int(bool(errors)), _join(*out), errors


def _touch(st: _State, args: list[str], stdin: Text) -> Result:
    errors: list[Chunk] = []
    for name in args:
        path = st.resolve(name)
        if st.tree.is_dir(path) or path in st.tree.files:
            continue
        if not st.tree.parent_ok(path):
            errors.append(ERR)
            continue
        st.tree.files[path] = ()
    return int(bool(errors)), (), tuple(errors)


def _mkdir(st: _State, args: list[str], stdin: Text) -> Result:
    parents = bool(args) and args[0] == "-p"
    errors: list[Chunk] = []
    for name in args[1:] if parents else args:
        path = st.resolve(name)
        if parents:
            if path == "":
                continue
            parts = path.split("/")
            chain = ["/".join(parts[: i + 1]) for i in range(len(parts))]
            if any(p in st.tree.files for p in chain):
                errors.append(ERR)
                continue
            st.tree.dirs.update(chain)
            continue
        if st.tree.is_dir(path) or path in st.tree.files or not st.tree.parent_ok(path):
            errors.append(ERR)
            continue
        st.tree.dirs.add(path)
    return int(bool(errors)), (), tuple(errors)


def _rm(st: _State, args: list[str], stdin: Text) -> Result:
    flags = ""
    while args and args[0].startswith("-") and len(args[0]) > 1:
        flags += args.pop(0)[1:]
    if not args:
        return (0, (), ()) if "f" in flags else (1, (), (ERR,))
    errors: list[Chunk] = []
    for name in args:
        path = st.resolve(name)
        if path == "" or st.cwd == path or st.cwd.startswith(path + "/"):
            raise Unknowable("rm of the working directory or one above it")
        if path in st.tree.dirs:
            if "r" not in flags and "R" not in flags:
                errors.append(ERR)
                continue
            st.tree.remove_tree(path)
        elif path in st.tree.files:
            del st.tree.files[path]
        elif "f" not in flags:
            errors.append(ERR)
        elif not st.ancestors_ok(path):
            raise Unknowable("rm -f below a file (GNU reports ENOTDIR even with -f)")
    return int(bool(errors)), (), tuple(errors)


def _cd(st: _State, args: list[str], stdin: Text) -> Result:
    path = st.resolve(args[0])
    if not st.tree.is_dir(path):
        return 2, (), (ERR,)
    st.cwd = path
    return 0, (), ()


def _pwd(st: _State, args: list[str], stdin: Text) -> Result:
    return 0, (st.root + (f"/{st.cwd}" if st.cwd else "") + "\n",), ()


def _ls(st: _State, args: list[str], stdin: Text) -> Result:
    flags = ""
    while args and args[0].startswith("-") and len(args[0]) > 1:
        flags += args.pop(0)[1:]
    names = args or ["."]
    files: list[str] = []
    dirs: list[tuple[str, str]] = []
    errors: list[Chunk] = []
    for name in names:
        path = st.resolve(name)
        if path in st.tree.files:
            files.append(name)
        elif st.tree.is_dir(path):
            dirs.append((name, path))
        else:
            errors.append(ERR)
    # GNU: the files named first, sorted; then each directory, sorted, under a "name:" header
    # when there were several operands (even if some could not be listed); a blank line apart
    blocks = ["".join(f + "\n" for f in sorted(files))] if files else []
    for name, path in sorted(dirs):
        shown = [".", ".."] if "a" in flags else []
        for entry, is_dir in st.tree.entries(path):
            if entry.startswith(".") and not set(flags) & {"a", "A"}:
                continue
            shown.append(entry + ("/" if is_dir and "p" in flags else ""))
        header = f"{name}:\n" if len(names) > 1 else ""
        blocks.append(header + "".join(e + "\n" for e in shown))
    return 2 if errors else 0, ("\n".join(blocks),), tuple(errors)


def _status(code: int) -> Callable[[_State, list[str], Text], Result]:
    def run(st: _State, args: list[str], stdin: Text) -> Result:
        return code, (), ()

    return run


def _exit(st: _State, args: list[str], stdin: Text) -> Result:
    """``exit N``; a bare ``exit`` exits with the status of the last command run (POSIX)."""
    raise _Exit(int(args[0]) & 0xFF if args else st.last)


COMMANDS: dict[str, Callable[[_State, list[str], Text], Result]] = {
    "echo": _echo,
    "printf": _printf,
    "cat": _cat,
    "wc": _wc,
    "head": _head,
    "touch": _touch,
    "mkdir": _mkdir,
    "rm": _rm,
    "cd": _cd,
    "pwd": _pwd,
    "ls": _ls,
    "true": _status(0),
    "false": _status(1),
    "exit": _exit,
}


@attrs.define
class _Touched:
    """The files one stage read and wrote (pipeline stages run at once in dash)."""

    reads: set[str] = attrs.Factory(set)
    writes: set[str] = attrs.Factory(set)


def _stage(
    st: _State, cmd: Cmd, stdin: Text, err: list[Chunk], alone: bool, touched: _Touched
) -> tuple[int, Text]:
    """Run one stage; (status, what it sends down the pipe or to the line's stdout)."""
    name = cmd.argv[0]
    if name in ("cd", "exit") and not alone:
        raise Unknowable(f"{name} in a pipeline (dash runs each stage in a subshell)")
    if name not in COMMANDS and any(op not in ("2>&1", "1>&2") for op, _ in cmd.redirects):
        raise Unknowable("an unknown command with a redirection")
    dests = {"1": "pipe", "2": "err"}
    targets: set[str] = set()
    sources: set[str] = set()
    for op, target in cmd.redirects:
        if op in ("2>&1", "1>&2"):
            dests[op[0]] = dests[op[-1]]
            continue
        path = st.resolve(target)
        if op == "<":
            if st.tree.is_dir(path):
                raise Unknowable("a directory as stdin")
            data = st.tree.files.get(path)
            sources.add(path)
            if data is not None:
                stdin = data
                continue
        elif not (st.tree.is_dir(path) or not st.tree.parent_ok(path)):
            if op.endswith(">>"):
                st.tree.files.setdefault(path, ())
            else:
                st.tree.files[path] = ()
            dests[op[0]] = f"file:{path}"
            targets.add(path)
            continue
        # sh: cannot open / cannot create: the command does not run
        if dests["2"] != "err":
            raise Unknowable("a failed redirection after fd 2 was redirected")
        err.append(ERR)
        touched.reads |= sources
        touched.writes |= targets
        return 2, ()
    st.reads = set()
    command = COMMANDS.get(name)
    status: int
    out: Text
    errs: Text
    if command is None:
        status, out, errs = 127, (), (ERR,)
    else:
        status, out, errs = command(st, list(cmd.argv[1:]), stdin)
    touched.reads |= st.reads | sources
    touched.writes |= targets
    if (st.reads | sources) & targets:
        raise Unknowable("a command reading a file its own redirection writes")
    if any(t not in st.tree.files for t in targets):
        raise Unknowable("a command removing the file its own redirection writes")
    if dests["1"] == dests["2"] and out and errs:
        raise Unknowable("stdout and stderr into one place: their order is the program's")
    piped: list[Chunk] = []
    for data, dest in ((out, dests["1"]), (errs, dests["2"])):
        if dest == "pipe":
            piped.extend(data)
        elif dest == "err":
            err.extend(data)
        elif data:
            path = dest[5:]
            new = _join(st.tree.files.get(path, ()), data)
            if _bounds(new)[1] > st.file_bytes:
                raise Unknowable("a write that may pass the file size limit")
            st.tree.files[path] = new
    return status, _join(piped)


def evaluate(line: Line, before: Tree, *, root: str, file_bytes: int, disk_bytes: int) -> Outcome:
    """What ``line`` does to the working area ``before`` (left unchanged); Unknowable when
    the documented behaviour does not settle it."""
    st = _State(before.copy(), root, file_bytes)
    out: list[Chunk] = []
    err: list[Chunk] = []
    status = 0
    try:
        for andor in line.script:
            for joiner, pipeline in andor:
                if (joiner == "&&" and status != 0) or (joiner == "||" and status == 0):
                    continue
                data: Text = ()
                stages = [_Touched() for _ in pipeline]
                for cmd, touched in zip(pipeline, stages, strict=True):
                    st.last = status
                    status, data = _stage(st, cmd, data, err, len(pipeline) == 1, touched)
                for i, one in enumerate(stages):
                    for other in stages[i + 1 :]:
                        if one.writes & (other.reads | other.writes) or other.writes & one.reads:
                            raise Unknowable("pipeline stages touching one file (they run at once)")
                out.extend(data)
    except _Exit as done:
        status = done.status
    lo_before, hi_before = before.usage()
    lo_after, hi_after = st.tree.usage()
    if hi_after <= max(disk_bytes, lo_before):
        return Outcome(status, _join(out), _join(err), st.tree)
    if lo_after > max(disk_bytes, hi_before):  # killed: the area is read back, not predicted
        return Outcome(-SIGXFSZ, _join(out), _join(err, (ERR,)), st.tree, killed=True)
    raise Unknowable("a line that may or may not pass the disk limit")


def pattern(text: Text) -> str:
    """A regular expression for ``text``: its literal parts, any one line for an error line,
    any padding for a line of counts."""
    return "".join(
        c.regex() if isinstance(c, _Padded) else re.escape(c) if isinstance(c, str) else r"[^\n]+\n"
        for c in text
    )


def matches(got: str, text: Text) -> bool:
    return re.fullmatch(pattern(text), got) is not None


# -- drawing lines ------------------------------------------------------------------------------

WORDS = (
    "kelp",
    "tide",
    "otter",
    "reef",
    "foam",
    "a b",
    "x  y",
    "7",
    "42",
    "c#d",
    "it's",
    'say "hi"',
)
FILES = ("a", "b", "log", "d/x", "d/y", "d/e/z", "e", "f/w", ".h")
DIRS = ("d", "d/e", "e", "f", "g")
MISSING = ("nope", "d/nope", "gone/x")


def _quote(rng: random.Random, word: str) -> str:
    """``word`` as sh reads it back, quoted one of several equivalent ways."""
    plain = re.fullmatch(r"[A-Za-z0-9./_-][A-Za-z0-9./_#-]*", word) is not None
    style = rng.randrange(5 if plain else 3)
    if style == 0:
        return "'" + word.replace("'", "'\\''") + "'"
    if style == 1:
        return '"' + re.sub(r'(["\\])', r"\\\1", word) + '"'
    if style == 2:
        return re.sub(r"([^A-Za-z0-9./_-])", r"\\\1", word)
    if style == 3 and len(word) > 2:
        return word[0] + "'" + word[1:-1] + "'" + word[-1]
    return word


def _rel(rng: random.Random, target: str, cwd: str) -> str:
    """A name for ``target`` (relative to the root) as seen from ``cwd``."""
    rel = posixpath.relpath("/" + target, "/" + cwd) if cwd else target
    choice = rng.randrange(6)
    if choice == 0:
        return "./" + rel
    if choice == 1 and "/" in rel and not rel.startswith(".."):
        head, _, tail = rel.partition("/")
        return f"{head}/../{head}/{tail}"
    if choice == 2 and cwd == "" and "/" not in rel:
        return f"d/../{rel}"
    return rel


class _Drawer:
    def __init__(self, rng: random.Random, tree: Tree) -> None:
        self.rng = rng
        self.tree = tree
        self.cwd = ""

    def file(self) -> str:
        known = sorted(self.tree.files)
        pool = known * 3 + list(FILES) + list(MISSING)
        return _rel(self.rng, self.rng.choice(pool), self.cwd)

    def dir(self) -> str:
        known = sorted(self.tree.dirs)
        return _rel(self.rng, self.rng.choice(known * 2 + list(DIRS)), self.cwd)

    def words(self, low: int = 1, high: int = 3) -> list[str]:
        return [self.rng.choice(WORDS) for _ in range(self.rng.randint(low, high))]

    def cmd(self, argv: list[str], redirects: list[tuple[str, str]]) -> Cmd:
        """The stage as written: its words quoted, its redirections in their order, after
        the words or (sh allows it) among them."""
        words = [_quote(self.rng, w) for w in argv]
        shown = []
        for op, target in redirects:
            name = {"1>": ">", "1>>": ">>", "1>&2": ">&2"}.get(op, op)
            space = " " if self.rng.random() < 0.5 else ""
            shown.append(name + (f"{space}{_quote(self.rng, target)}" if target else ""))
        at = len(words)
        if shown and len(words) > 1 and self.rng.random() < 0.2:
            at = self.rng.randint(1, len(words) - 1)
        return Cmd(tuple(argv), tuple(redirects), " ".join([*words[:at], *shown, *words[at:]]))

    def producer(self) -> list[str]:
        """A command that prints something (maybe an error)."""
        r = self.rng
        kind = r.choice(("echo", "echo", "printf", "cat", "cat", "wc", "head", "ls", "pwd"))
        if kind == "echo":
            return ["echo", *(["-n"] if r.random() < 0.2 else []), *self.words()]
        if kind == "printf":
            fmt = r.choice(("%s\\n", "[%s]", "%s-%s\\n", "%d\\n", "x\\n", "%c|%%\\n", "%s\\t%s\\n"))
            if fmt == "x\\n":
                args = []  # GNU printf warns of arguments a format does not use; dash does not
            elif "%d" in fmt:
                args = [str(r.randint(0, 99)) for _ in range(r.randint(0, 3))]
            else:
                args = self.words(0, 3)
            return ["printf", fmt, *args]
        if kind == "cat":
            return ["cat", *[self.file() for _ in range(r.randint(1, 2))]]
        if kind == "wc":
            flag = r.choice(("-l", "-l", "-c", "-w", "-lw", ""))
            names = [self.file() for _ in range(r.choice((1, 1, 2)))]
            return ["wc", *([flag] if flag else []), *names]
        if kind == "head":
            count = str(r.randint(0, 3))
            how = r.choice((["-n", count], ["-n", count], [f"-{count}"], ["-c", count], []))
            return ["head", *how, *[self.file() for _ in range(r.choice((1, 1, 2)))]]
        if kind == "ls":
            flag = r.choice(("", "-p", "-A", "-pA", "-a", "-1"))
            where = [r.choice((self.dir, self.file))() for _ in range(r.choice((0, 1, 1, 2)))]
            return ["ls", *([flag] if flag else []), *where]
        return ["pwd"]

    def effect(self) -> list[str]:
        """A command that changes the area (or fails to)."""
        r = self.rng
        kind = r.choice(("touch", "touch", "mkdir", "mkdir", "rm", "rm", "true", "false", "nosuch"))
        if kind == "touch":
            return ["touch", *[self.file() for _ in range(r.randint(1, 2))]]
        if kind == "mkdir":
            parents = ["-p"] if r.random() < 0.5 else []
            return ["mkdir", *parents, *[self.dir() for _ in range(r.randint(1, 2))]]
        if kind == "rm":
            flag = r.choice(("", "-r", "-f", "-rf", "-R"))
            pool = [self.file(), self.dir()]
            return ["rm", *([flag] if flag else []), *r.sample(pool, r.randint(1, 2))]
        return [kind]

    def redirects(self, last: bool) -> list[tuple[str, str]]:
        r = self.rng
        roll = r.random()
        if roll < 0.45:
            return []
        choice = r.choice(
            ("1>", "1>", "1>>", "1>>", "2>", "2>>", "2>&1", "1>&2", "1> 2>&1", "2>&1 1>", "<")
        )
        if choice == "2>&1 1>":
            return [("2>&1", ""), ("1>", self.file())]
        if choice == "1> 2>&1":
            return [("1>", self.file()), ("2>&1", "")]
        if choice in ("2>&1", "1>&2"):
            return [(choice, "")]
        return [(choice, self.file())]

    def pipeline(self) -> Pipeline:
        r = self.rng
        if r.random() < 0.25:
            argv = self.effect()
            return (self.cmd(argv, self.redirects(True) if r.random() < 0.3 else []),)
        first = self.producer()
        if first[0] in ("cat", "wc", "head") and r.random() < 0.15:
            first = first[:1] + [a for a in first[1:] if a.startswith("-") or a.isdigit()]
            redirects = [("<", self.file())]
        else:
            redirects = []
        if r.random() < 0.35:
            second = r.choice((["cat"], ["wc", "-l"], ["head", "-n", "1"], ["wc", "-c"]))
            mid = [("2>&1", "")] if r.random() < 0.4 else []
            return (
                self.cmd(first, redirects + mid),
                self.cmd(second, self.redirects(True) if r.random() < 0.3 else []),
            )
        return (self.cmd(first, redirects + self.redirects(True)),)

    def andor(self, first: bool) -> AndOr:
        r = self.rng
        parts: list[tuple[str, Pipeline]] = []
        if first and r.random() < 0.3:
            target = self.dir()
            parts.append(("", (self.cmd(["cd", target], []),)))
            self.cwd = posixpath.normpath(posixpath.join("/" + self.cwd, target)).lstrip("/")
            parts.append(("&&", self.pipeline()))
        else:
            parts.append(("", self.pipeline()))
        for _ in range(r.choice((0, 0, 1, 1, 2))):
            joiner = r.choice(("&&", "||"))
            if r.random() < 0.3:
                parts.append((joiner, (self.cmd([r.choice(("true", "false"))], []),)))
            else:
                parts.append((joiner, self.pipeline()))
        if r.random() < 0.08:
            code = [str(r.randint(0, 5))] if r.random() < 0.5 else []  # bare: the last status
            parts.append((r.choice(("&&", "||", ";")), (self.cmd(["exit", *code], []),)))
        return tuple(parts)


def _render(script: tuple[AndOr, ...], rng: random.Random) -> str:
    lines = []
    for andor in script:
        text = ""
        for joiner, pipeline in andor:
            stages = " | ".join(c.text for c in pipeline)
            text += f" {joiner} {stages}" if joiner else stages
        lines.append(text)
    sep = rng.choice(("; ", " ; ", "\n"))
    text = sep.join(lines)
    if rng.random() < 0.1:
        text += " # done"
    return text


def draw_line(rng: random.Random, tree: Tree) -> Line:
    """A command line of one or two and-or lists (its answer maybe Unknowable: draw again)."""
    drawer = _Drawer(rng, tree)
    script = tuple(drawer.andor(i == 0) for i in range(rng.choice((1, 1, 2))))
    return Line(script, _render(script, rng))


def fill_line(rng: random.Random, tree: Tree, name: str, disk_bytes: int) -> Line | None:
    """A line that brings the working area to one byte under, exactly to, or one byte past
    ``disk_bytes`` (new directories of 4096 bytes each below ``name``, then a file): None
    when the area's size is not known to the byte, or has no room for ``name`` and a file."""
    lo, hi = tree.usage()
    room = disk_bytes - lo
    if lo != hi or room <= 2 * ENTRY or tree.is_dir(name) or name in tree.files:
        return None
    dirs = (room - 2 * ENTRY - 1) // ENTRY  # below name, besides it and the file
    size = room - ENTRY * (dirs + 2) + rng.choice((-1, 0, 1))
    drawer = _Drawer(rng, tree)
    made = drawer.cmd(["mkdir", "-p", name, *(f"{name}/q{k}" for k in range(dirs))], [])
    fill = drawer.cmd(["printf", "%s", "k" * size], [("1>", f"{name}/fill")])
    script: tuple[AndOr, ...] = ((("", (made,)), ("&&", (fill,))),)
    return Line(script, _render(script, rng))


def remove_line(rng: random.Random, tree: Tree, name: str) -> Line:
    """``rm -r name`` (after :func:`fill_line`)."""
    script: tuple[AndOr, ...] = ((("", (_Drawer(rng, tree).cmd(["rm", "-r", name], []),)),),)
    return Line(script, _render(script, rng))
