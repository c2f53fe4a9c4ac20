"""SimSandbox against ProcessSandbox: the same shell command lines (its shell subset against the
real /bin/sh) and the same Python snippets, run in order in each, give the same stdout, exit codes
and (for Python) the same last line of stderr."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from kelpie_agent.sandbox import ProcessSandbox, Sandbox
from kelpie_dst.shims._sandbox import SimSandbox

# Each line runs in the same working area as the lines before it.
SCRIPT = [
    "echo hello world",
    "echo -n no newline",
    'echo \'single $quoted\' "double \\" quote" back\\ slash',
    "printf '%s|%s\\n' a b c",
    "printf 'x\\ty\\n'",
    "printf '%d-%i%%\\n' 42 7",
    "printf 'no specs\\n' extra args",
    "printf '%%\\n' a",
    "true",
    "false",
    "false || echo recovered",
    "true && false || echo chained",
    "false && echo skipped",
    "echo a; echo b",
    "# a comment\necho after the comment",
    "echo one > f",
    "echo two >> f; cat f",
    "cat f f",
    "cat < f",
    "cat missing",
    "cat f missing",
    "mkdir d",
    "mkdir d",
    "mkdir -p d/e/f && ls d",
    "touch .hidden d/g && ls",
    "ls -a",
    "ls -A",
    "ls -p",
    "ls d f",
    "ls missing",
    "rm missing",
    "rm -f missing",
    "rm d",
    "rm -r d/e && ls d",
    "printf '1\\n2\\n3\\n4\\n5\\n' > n",
    "head -n 2 n",
    "head -3 n",
    "head -c 4 n",
    "head n f",
    "wc -l n",
    "wc -l < n",
    "wc -c < n",
    "wc -w < f",
    "printf 'a b\\nc\\n' | wc -l",
    "cat n | head -n 4 | wc -l",
    "wc n",
    "wc < n",
    "cat n | wc",
    "wc -lc n f",
    "pwd",
    "cd d; pwd",
    "rm -rf .",
    "sleep 0.1; echo slept",
    "echo before; exit 5; echo never",
    "exit 3",
    "echo to stderr >&2",
    "cat missing 2>&1 | wc -l",
    "cat missing 2> err; wc -l < err",
    "echo redirected > out 2>&1; cat out",
    "no-such-command-kelpie",
    "cd d && ls",
    "> made; ls made",
    "printf abc > p; cat p p",
    "echo x | cat -",
]


async def transcript(sandbox: Sandbox) -> list[tuple[str, str, bool, int]]:
    await sandbox.boot()
    lines = []
    for command in SCRIPT:
        result = await sandbox.exec(command, timeout=10)
        stdout = result.stdout.replace(sandbox.workdir, "<workdir>")
        lines.append((command, stdout, result.stderr != "", result.exit_code))
    await sandbox.stop()
    return lines


PYTHON = [
    "print('hello')",
    "print('a', 1, [2], sep='|', end='!')",
    "import sys; sys.exit(3)",
    "import sys; sys.exit(257)",
    "import sys; sys.exit('bad news')",
    "raise SystemExit",
    "1 / 0",
    "def (",
    "import sys; print('to err', file=sys.stderr)",
    "with open('p.txt', 'w') as f:\n    f.write('line1\\n')\n    print('line2', file=f)",
    "print(open('p.txt').read(), end='')",
    "with open('p.txt', 'a') as f:\n    f.write('line3\\n')",
    "print(open('p.txt', 'rb').read())",
    "open('b.bin', 'wb').write(bytes([0, 255]))\nprint(open('b.bin', 'rb').read())",
    "open('missing.txt')",
    "open('.')",
    "open('nodir/x.txt', 'w')",
    "open('p.txt', 'x')",
    "input()",
    "print(__name__)",
    "x = 1\nprint('x' in dir())",
]


async def python_transcript(sandbox: Sandbox) -> list[tuple[str, str, str, int]]:
    await sandbox.boot()
    lines = []
    for code in PYTHON:
        result = await sandbox.exec_python(code, timeout=10)
        last = (result.stderr.strip().splitlines() or [""])[-1]
        lines.append((code, result.stdout, last, result.exit_code))
    lines.append(("cat p.txt", (await sandbox.exec("cat p.txt")).stdout, "", 0))
    await sandbox.stop()
    return lines


@pytest.mark.bubblewrap
def test_sim_python_matches_a_real_interpreter(tmp_path: Path) -> None:
    real = trio.run(python_transcript, ProcessSandbox(parent_dir=tmp_path))
    clock = trio.testing.MockClock(autojump_threshold=0)
    sim = trio.run(python_transcript, SimSandbox(), clock=clock)
    mismatches = [(r, s) for r, s in zip(real, sim, strict=True) if r != s]
    assert mismatches == []


@pytest.mark.bubblewrap
def test_sim_shell_matches_the_real_shell(tmp_path: Path) -> None:
    real = trio.run(transcript, ProcessSandbox(parent_dir=tmp_path))
    clock = trio.testing.MockClock(autojump_threshold=0)
    sim = trio.run(transcript, SimSandbox(), clock=clock)
    mismatches = [(r, s) for r, s in zip(real, sim, strict=True) if r != s]
    assert mismatches == []


@pytest.mark.parametrize(
    ("command", "what"),
    [
        ("echo $HOME", "variables"),
        ('echo "$HOME"', "variables"),
        ("echo `date`", "backticks"),
        ("ls *.txt", "globs"),
        ("echo a?", "globs"),
        ("(echo sub)", "subshells"),
        ("sleep 1 &", "background"),
        ("echo ~", "home directory"),
    ],
)
def test_unsupported_syntax_is_refused_not_misread(command: str, what: str) -> None:
    async def main() -> tuple[int, str]:
        sandbox = SimSandbox()
        await sandbox.boot()
        result = await sandbox.exec(command)
        return result.exit_code, result.stderr

    code, stderr = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert code == 2
    assert what in stderr and "SimSandbox" in stderr


@pytest.mark.parametrize("command", ["| cat", "echo a |", "echo a &&", "&& echo", "echo >"])
def test_syntax_errors_exit_2(command: str) -> None:
    async def main() -> int:
        sandbox = SimSandbox()
        await sandbox.boot()
        return (await sandbox.exec(command)).exit_code

    assert trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0)) == 2
