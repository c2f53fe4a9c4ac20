"""What sandbox_shell's reference model found SimSandbox's shell doing differently from dash
and GNU coreutils (docs/sandbox.md promises their stdout and exit codes). The expected answers
are those of dash 0.5 and GNU coreutils 9, run by hand on the same lines."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from kelpie_dst.shims._sandbox import SimSandbox

SETUP = "mkdir d e && touch e/x d/y f && printf 'a\\nb\\n' > g"


def run(*commands: str) -> list[tuple[int, str, str]]:
    async def main() -> list[tuple[int, str, str]]:
        sandbox = SimSandbox()
        await sandbox.boot()
        results = []
        for command in commands:
            result = await sandbox.exec(command)
            results.append((result.exit_code, result.stdout, result.stderr))
        return results

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.parametrize(
    ("command", "status"),
    [
        ("wc -l missing", 1),
        ("wc missing", 1),
        ("wc -lw missing", 1),
        ("cat missing", 1),
        ("head -n 1 missing", 1),
        ("wc -l < missing", 2),
    ],
)
def test_a_missing_operand_is_one_error_line(command: str, status: int) -> None:
    """``wc -lw missing`` printed ``wc: max() arg is an empty sequence`` after the complaint."""
    [(code, stdout, stderr)] = run(command)
    assert (code, stdout) == (status, "")
    assert len(stderr.splitlines()) == 1 and "missing" in stderr, stderr


@pytest.mark.parametrize(
    ("command", "status", "stdout"),
    [
        ("wc -l g missing", 1, "2 g\n2 total\n"),
        ("wc -l missing nope", 1, "0 total\n"),
        ("head -n 1 g missing", 1, "==> g <==\na\n"),
        ("head -n 1 missing g", 1, "==> g <==\na\n"),
        ("ls missing d", 2, "d:\ny\n"),
    ],
)
def test_several_operands_keep_their_total_and_headers_when_one_is_missing(
    command: str, status: int, stdout: str
) -> None:
    """GNU decides on a total or headers by the operands given, not by those it could read."""
    _, (code, out, err) = run(SETUP, command)
    assert (code, out) == (status, stdout)
    assert len(err.splitlines()) == 1 + ("nope" in command)


@pytest.mark.parametrize(
    ("command", "stdout"),
    [
        ("ls e d", "d:\ny\n\ne:\nx\n"),
        ("ls g e f d", "f\ng\n\nd:\ny\n\ne:\nx\n"),
        ("ls -p e d", "d:\ny\n\ne:\nx\n"),
    ],
)
def test_ls_sorts_its_operands(command: str, stdout: str) -> None:
    _, (code, out, _) = run(SETUP, command)
    assert (code, out) == (0, stdout)


@pytest.mark.parametrize(
    ("command", "status"),
    [("false; exit", 1), ("false || exit", 1), ("true && exit", 0), ("exit", 0), ("exit 4", 4)],
)
def test_a_bare_exit_exits_with_the_last_status(command: str, status: int) -> None:
    [(code, _, _)] = run(command)
    assert code == status
