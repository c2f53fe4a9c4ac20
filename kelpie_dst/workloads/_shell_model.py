"""A reference model of an agent's sandbox files, for ``agent_sandbox_files``.

The simulated model of that scenario issues ``run_code`` commands drawn from a small
repertoire (:data:`TEMPLATES`): shell lines with appends, pipes, ``&&``/``||``, redirections,
``..`` in paths, ``cd``, ``ls``, ``wc``/``head``/``cat``, a file at the file size limit, a
command that grows the working area past its disk limit, a command that writes and then sleeps
past the tool timeout, and Python that writes through ``open()``. Each template knows, from the
files before it, what it prints, how it exits and what it leaves behind, as the documented
semantics say (POSIX sh and GNU coreutils for the commands, docs/sandbox.md for the limits):
this module never runs the sandbox's own code.

:func:`judge_history` walks an agent's committed ``run_code`` calls in history order and
checks each stored result against the model's prediction from the files the committed calls
before it left (a result whose commit never landed left nothing). :func:`judge_image` checks
the agent's stored sandbox image: its framing and SHA-256 (the snapshot format of
docs/sandbox.md, verified here independently) and its files, which must be the model's.
"""

from __future__ import annotations

import hashlib
import random
import signal
import struct
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import msgpack

__all__ = [
    "DISK_BYTES",
    "FILE_BYTES",
    "MAX_OUTPUT",
    "TEMPLATES",
    "TOOL_TIMEOUT",
    "Files",
    "Predicted",
    "draw_command",
    "failure_kind",
    "judge_history",
    "judge_image",
    "predict",
]

FILE_BYTES = 1024  # SandboxLimits.file_size_bytes of the scenario's sandboxes
DISK_BYTES = 96 * 1024  # SandboxLimits.disk_bytes
ENTRY_BYTES = 4096  # what each file or directory counts towards the disk limit (docs/sandbox.md)
TOOL_TIMEOUT = 5.0  # the agents' LoopConfig.tool_timeout
SLEEP = 9  # seconds the timeout template sleeps: past TOOL_TIMEOUT
KILLED_DISK = -int(signal.SIGXFSZ)  # the exit code of a command killed for the disk limit
WORDS = ("kelp", "tide", "otter", "reef", "foam")
MAX_OUTPUT = 4096  # SandboxLimits.max_output_bytes: what is kept of a command's stdout
JUNK = 24  # directories the disk template makes (with junk/ itself: 25 entries, 100 KiB)


@attrs.define
class Files:
    """The working area: files (relative path -> bytes) and directories (relative paths)."""

    files: dict[str, bytes] = attrs.Factory(dict)
    dirs: set[str] = attrs.Factory(set)

    def copy(self) -> Files:
        return Files(dict(self.files), set(self.dirs))

    def usage(self) -> int:
        return sum(len(d) for d in self.files.values()) + ENTRY_BYTES * (
            len(self.files) + len(self.dirs)
        )

    def write(self, path: str, data: bytes, *, append: bool = False) -> bool:
        """Write (or append); past the file size limit a write keeps what fits and fails
        (EFBIG), as a write past RLIMIT_FSIZE does: False then."""
        new = self.files.get(path, b"") + data if append else data
        if len(new) > FILE_BYTES:
            self.files[path] = new[:FILE_BYTES]
            return False
        self.files[path] = new
        return True

    def lines(self, path: str) -> int:
        """``wc -l``: newline characters (a last line without one is not counted)."""
        return self.files.get(path, b"").count(b"\n")

    def remove_tree(self, path: str) -> None:
        inner = path + "/"
        self.files = {p: d for p, d in self.files.items() if p != path and not p.startswith(inner)}
        self.dirs = {d for d in self.dirs if d != path and not d.startswith(inner)}

    def listing(self, path: str, *, slash: bool, hidden: bool = False) -> list[str]:
        """The names in directory ``path`` ("" is the root), sorted, as ``ls`` (``-p``,
        ``-A``) shows them."""
        prefix = f"{path}/" if path else ""
        names = [p[len(prefix) :] for p in self.files if p.startswith(prefix)]
        subdirs = [d[len(prefix) :] for d in self.dirs if d.startswith(prefix)]
        names = [n for n in names if "/" not in n]
        subdirs = [n + "/" for n in subdirs if "/" not in n]
        shown = sorted(n for n in names + subdirs if hidden or not n.startswith("."))
        return shown if slash else [n.rstrip("/") for n in shown]


@attrs.frozen
class Predicted:
    """What a command does: its exit status (None: it ran past the tool timeout and was
    killed) and its stdout, and the files it leaves."""

    status: int | None
    stdout: str
    after: Files


Run = Callable[[Files, dict[str, Any]], tuple[int | None, str]]


def _append(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    if not fs.write("log.txt", f"{p['w']}\n".encode(), append=True):
        return 1, ""  # echo's write error; && stops
    return 0, f"{fs.lines('log.txt')}\n"


def _part(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    fs.write("part.txt", f"{p['w']}\n{p['v']}".encode())  # printf: no newline at the end
    return 0, f"{fs.lines('part.txt')} part.txt\n"


def _pipe(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    return 0, f"{fs.lines('log.txt')}\n"  # a pipeline's status is its last stage's


def _dup(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    return 0, "1\n"  # cat's one-line complaint, sent down the pipe by 2>&1


def _dotdot(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    fs.dirs |= {"notes", f"notes/{p['d']}"}
    fs.write(f"notes/{p['w']}.txt", f"{p['w']}\n".encode())
    return 0, f"{p['w']}\n"


def _cd(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    if "notes" not in fs.dirs:
        return 2, ""  # cd fails with 2; && stops
    return 0, f"{fs.lines('log.txt')}\n"


def _ls(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    return 0, "".join(f"{name}\n" for name in fs.listing("", slash=False))


def _ls_notes(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    if "notes" not in fs.dirs:
        return 2, ""
    return 0, "".join(f"{name}\n" for name in fs.listing("notes", slash=True))


def _cat(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    if "log.txt" not in fs.files:
        return 1, ""
    return 0, fs.files["log.txt"].decode()


def _head(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    if "log.txt" not in fs.files:
        return 1, ""
    return 0, b"".join(fs.files["log.txt"].splitlines(True)[: p["n"]]).decode()


def _timeout(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    fs.write("log.txt", f"{p['w']}\n".encode(), append=True)  # then it sleeps, and is killed
    return None, ""


def _junk(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    fs.remove_tree("junk")
    fs.dirs |= {"junk", *(f"junk/j{k}" for k in range(1, JUNK + 1))}
    return 0, ""


def _clean(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    fs.remove_tree("junk")
    return 0, "clean\n"


def _cap(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    fs.write("cap.txt", b"")
    if not fs.write("cap.txt", b"k" * p["size"], append=True):
        return 1, ""
    return 0, f"{p['size']}\n"


def _python(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    if not fs.write("py.txt", f"{p['w']}\n".encode(), append=True):
        return 1, ""  # the write fails as the file is closed: a traceback, exit 1
    return 0, f"{fs.lines('py.txt')}\n"


def _quote(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    return 0, f"a  {p['w']} c\\d e f\n"  # quotes keep spaces and backslashes; no comment


def _echo_n(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    fs.write("nl.txt", p["w"].encode())
    size = str(len(p["w"]))  # no newline: no line; the counts padded to one width
    return 0, f"{'0'.rjust(len(size))} {size}\n"


def _printf_reuse(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    return 0, f"{p['w']}=1\n{p['v']}=2\n"  # the format is reused for the rest


def _hidden(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    fs.files.setdefault(".hidden", b"")
    return 0, "".join(f"{n}\n" for n in [".", "..", *fs.listing("", slash=False, hidden=True)])


def _rmtree(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    fs.remove_tree("tmp")
    return 0, "gone\n"


def _mkdir(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    if "notes" in fs.dirs:
        return 1, ""  # File exists
    fs.dirs.add("notes")
    return 0, ""


def _touch(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    fs.files.setdefault("log.txt", b"")  # touch never changes what is there
    return 0, f"{len(fs.files['log.txt'])}\n"


def _exit(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    fs.write("log.txt", f"{p['w']}\n".encode(), append=True)
    return 3, ""


def _stderr_file(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    fs.write("err.txt", b"cat: gone.txt: No such file or directory\n")
    return 0, "1\n"


def _stdin_missing(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    return 0, "none\n"  # the redirection fails (status 2), so || runs


def _big_output(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    return 0, (p["w"] * 1000 + "\n")[:MAX_OUTPUT]  # stdout is kept up to the limit


def _py_exit(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    return 4, f"{p['w']}\n"


def _py_raise(fs: Files, p: dict[str, Any]) -> tuple[int | None, str]:
    return 1, ""


@attrs.frozen
class Template:
    name: str
    language: str
    code: str  # str.format'ed with the parameters
    run: Run
    params: Callable[[random.Random], dict[str, Any]]


def _word(rng: random.Random) -> str:
    return f"{rng.choice(WORDS)}{rng.randint(0, 9)}"


def _w(rng: random.Random) -> dict[str, Any]:
    return {"w": _word(rng)}


def _none(rng: random.Random) -> dict[str, Any]:
    return {}


_PY = """with open("notes/../py.txt", "a") as f:
    f.write("{w}\\n")
print(open("py.txt").read().count("\\n"))
"""

TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in (
        Template("append", "shell", "echo {w} >> log.txt && wc -l < log.txt", _append, _w),
        Template(
            "part",
            "shell",
            "printf '{w}\\n{v}' > part.txt && wc -l part.txt",
            _part,
            lambda r: {"w": _word(r), "v": _word(r)},
        ),
        Template("pipe", "shell", "cat gone.txt log.txt | wc -l || echo failed", _pipe, _none),
        Template("dup", "shell", "cat gone.txt 2>&1 | wc -l", _dup, _none),
        Template(
            "dotdot",
            "shell",
            "mkdir -p notes/{d} && echo {w} > notes/{d}/../{w}.txt && cat notes/{w}.txt",
            _dotdot,
            lambda r: {"w": _word(r), "d": r.choice("ab")},
        ),
        Template("cd", "shell", "cd notes && cat ../log.txt | wc -l", _cd, _none),
        Template("ls", "shell", "ls", _ls, _none),
        Template("ls_notes", "shell", "ls -p notes", _ls_notes, _none),
        Template("cat", "shell", "cat log.txt", _cat, _none),
        Template("head", "shell", "head -n {n} log.txt", _head, lambda r: {"n": r.randint(1, 3)}),
        Template(
            "timeout", "shell", f"echo {{w}} >> log.txt; sleep {SLEEP}; echo late", _timeout, _w
        ),
        Template(
            "junk",
            "shell",
            "rm -rf junk && mkdir junk && mkdir "
            + " ".join(f"junk/j{k}" for k in range(1, JUNK + 1)),
            _junk,
            _none,
        ),
        Template("clean", "shell", "rm -rf junk && echo clean", _clean, _none),
        Template(
            "cap",
            "shell",
            "printf '%s' {fill} > cap.txt && wc -c < cap.txt",
            _cap,
            lambda r: {"size": FILE_BYTES + r.choice((-1, 0, 1))},
        ),
        Template("python", "python", _PY, _python, _w),
        Template("quote", "shell", "echo \"a  {w}\" 'c\\d' e\\ f # note", _quote, _w),
        Template("echo_n", "shell", "echo -n {w} > nl.txt && wc -lc < nl.txt", _echo_n, _w),
        Template(
            "printf_reuse",
            "shell",
            "printf '%s=%d\\n' {w} 1 {v} 2",
            _printf_reuse,
            lambda r: {"w": _word(r), "v": _word(r)},
        ),
        Template("hidden", "shell", "touch .hidden && ls -a", _hidden, _none),
        Template(
            "rmtree",
            "shell",
            "mkdir -p tmp/x && touch tmp/x/f && rm -r tmp && echo gone",
            _rmtree,
            _none,
        ),
        Template("mkdir", "shell", "mkdir notes", _mkdir, _none),
        Template("touch", "shell", "touch log.txt && wc -c < log.txt", _touch, _none),
        Template("exit", "shell", "echo {w} >> log.txt; exit 3; echo no", _exit, _w),
        Template(
            "stderr_file", "shell", "cat gone.txt 2> err.txt; wc -l < err.txt", _stderr_file, _none
        ),
        Template("stdin_missing", "shell", "wc -l < gone.txt || echo none", _stdin_missing, _none),
        Template("big_output", "python", 'print("{w}" * 1000)\n', _big_output, _w),
        Template("py_exit", "python", 'import sys\nprint("{w}")\nsys.exit(4)\n', _py_exit, _w),
        Template("py_raise", "python", 'open("gone.txt")\n', _py_raise, _none),
    )
}
WEIGHTS = {"append": 4, "cat": 2, "pipe": 2, "dotdot": 2, "part": 2, "junk": 2, "timeout": 3}


def draw_command(rng: random.Random) -> tuple[str, str, str, dict[str, Any]]:
    """A command of the repertoire: (template name, language, code, parameters)."""
    names = sorted(TEMPLATES)
    name = rng.choices(names, [WEIGHTS.get(n, 1) for n in names])[0]
    template = TEMPLATES[name]
    params = template.params(rng)
    fields = dict(params)
    if "size" in params:
        fields["fill"] = "k" * params["size"]
    return name, template.language, template.code.format(**fields), params


def predict(name: str, params: dict[str, Any], before: Files) -> Predicted:
    """What template ``name`` does with ``params`` to the files ``before`` (unchanged). A
    command that leaves the working area over its disk limit (or over what it was when the
    command started, if that was more) is killed by SIGXFSZ (docs/sandbox.md)."""
    after = before.copy()
    status, stdout = TEMPLATES[name].run(after, params)
    if status is not None and after.usage() > max(DISK_BYTES, before.usage()):
        status = KILLED_DISK
    return Predicted(status, stdout, after)


@attrs.frozen
class Result:
    """A committed ``run_code`` call and its stored result, as the history shows them."""

    code: str
    ok: bool
    message: str  # the packaged result's message: stdout, or "Error executing function ..."
    stdout: tuple[str, ...] | None = None  # the tool return's stdout and stderr lines
    stderr: tuple[str, ...] | None = None


_NO_EFFECT_KINDS = frozenset(
    {
        "SandboxCrashedError",  # it crashed before the command ran, or before the save
        "SandboxBootError",
        "SandboxIsolationError",
        "SandboxRestoreError",  # the image could not be restored: nothing ran
        "SandboxSaveError",  # not saved: rolled back to the last image
        "SandboxStateError",
        "SandboxError",
        "AgentStorageError",
        "RestoreError",
        "SnapshotError",
        "CorruptSnapshotError",
        "RuntimeError",
    }
)
_PREFIX = "Error executing function run_code: "


def failure_kind(message: str) -> str:
    """The kind of a failed result (``ExitCode``, ``TimeoutError``, ...)."""
    return _failure(message)[0] or "other"


def _failure(message: str) -> tuple[str, str]:
    if not message.startswith(_PREFIX):
        return "", message
    kind, _, rest = message[len(_PREFIX) :].partition(": ")
    return kind, rest


def judge_history(
    agent: str, results: Iterable[Result], commands: dict[str, tuple[str, dict[str, Any]]]
) -> tuple[list[str], Files]:
    """Each committed result against the model, in history order; the problems (the first
    only: after a wrong answer the model no longer knows the files) and the final files."""
    fs = Files()
    for index, result in enumerate(results):
        known = commands.get(result.code)
        if known is None:
            continue  # not a command of the repertoire (the model issues none)
        name, params = known
        want = predict(name, params, fs)
        where = f"{agent}: committed run_code call {index} ({name}: {result.code[:60]!r})"
        if result.ok:
            if want.status != 0 or result.message != want.stdout:
                expected = "a timeout" if want.status is None else f"exit {want.status}"
                if want.status == 0:
                    expected = f"stdout {want.stdout[:80]!r}"
                return [
                    f"{where} succeeded with {result.message[:80]!r}, but from the files the "
                    f"committed calls before it left, it gives {expected}"
                ], fs
            fs = want.after
            continue
        kind, rest = _failure(result.message)
        if kind == "ExitCode":
            try:
                code = int(rest.split(":", 1)[0].removeprefix("exit code "))
            except ValueError:
                return [f"{where}: unreadable exit code in {result.message[:120]!r}"], fs
            if want.status != code:
                expected = "a timeout" if want.status is None else f"exit {want.status}"
                if want.status == 0:
                    expected = f"success with {want.stdout[:80]!r}"
                return [
                    f"{where} failed with exit code {code} ({result.message[:160]!r}), but "
                    f"from the files the committed calls before it left, it gives {expected}"
                ], fs
            fs = want.after
        elif kind == "TimeoutError":
            if want.status is not None:
                return [
                    f"{where} timed out, but it runs for no time at all (no sandbox hangs "
                    "are injected in this scenario)"
                ], fs
            fs = want.after  # what it wrote before it was killed is kept (and saved)
        elif kind not in _NO_EFFECT_KINDS:
            return [f"{where}: unexpected failure {result.message[:160]!r}"], fs
    return [], fs


MAGIC = b"KSNAP"
_HEADER = struct.Struct(">5sB8s32s")


def judge_image(agent: str, snapshot: bytes | None, want: Files) -> list[str]:
    """The agent's stored sandbox image: a snapshot in the documented framing (``KSNAP``,
    version 1, the kind, then the SHA-256 of everything but itself) whose in-memory
    filesystem holds exactly the files and directories ``want``."""
    where = f"{agent}: the stored sandbox image"
    if snapshot is None:
        if want.files or want.dirs:
            return [f"{where} is missing, but committed calls left files: {sorted(want.files)}"]
        return []
    if len(snapshot) < _HEADER.size:
        return [f"{where} is {len(snapshot)} bytes, shorter than a snapshot header"]
    magic, version, kind, digest = _HEADER.unpack_from(snapshot)
    if magic != MAGIC or version != 1:
        return [f"{where} does not start with a version-1 snapshot header"]
    covered = snapshot[: _HEADER.size - 32] + snapshot[_HEADER.size :]
    if hashlib.sha256(covered).digest() != digest:
        return [
            f"{where} does not verify: its SHA-256 is not that of its header and payload "
            "(the snapshot's checksum does not cover the whole snapshot, or it was damaged)"
        ]
    if kind.rstrip(b"\x00") != b"sim":
        return []  # another kind of sandbox's payload: not ours to read
    try:
        dump_version, dirs, files = msgpack.unpackb(snapshot[_HEADER.size :], raw=False)
    except Exception as error:
        return [f"{where} has a payload that is not a filesystem dump: {error}"]
    if dump_version != 1:
        return [f"{where} holds a filesystem dump of version {dump_version!r}, not 1"]
    got = Files({str(p): bytes(d) for p, d in files}, {str(d) for d in dirs})
    if got != want:
        missing = sorted(set(want.files) - set(got.files))
        extra = sorted(set(got.files) - set(want.files))
        changed = sorted(
            p for p in set(want.files) & set(got.files) if want.files[p] != got.files[p]
        )
        return [
            f"{where} does not hold the committed calls' files: missing {missing}, extra "
            f"{extra}, different {changed}, directories {sorted(got.dirs)} (want "
            f"{sorted(want.dirs)})"
        ]
    return []
