"""sandbox_shell: generated command lines judged by a reference model of sh and coreutils.
The scenario passes and repeats its trace; the reference model answers hand-written lines as
POSIX sh and GNU coreutils do, and says Unknowable where they leave the answer open; the
run_code stream check names hand-made bad results."""

from __future__ import annotations

import random

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._run_code_streams import judge_streams
from kelpie_dst.workloads._shell_model import Result
from kelpie_dst.workloads._shell_reference import (
    ERR,
    Cmd,
    Line,
    Outcome,
    Tree,
    Unknowable,
    draw_line,
    evaluate,
    fill_line,
    matches,
)

SMALL = ["workload.params.lines=20", "duration=30s"]
ROOT = "/workspace"


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("sandbox_shell", SMALL)
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["shell.lines"] > 30
    assert first.metrics["shell.problems"] == 0
    assert first.result.trace_hash == again.result.trace_hash


def _line(*andors: list[tuple[str, list[tuple[list[str], list[tuple[str, str]]]]]]) -> Line:
    """A line from [(joiner, [(argv, redirects), ...]), ...] per and-or list."""
    script = tuple(
        tuple(
            (joiner, tuple(Cmd(tuple(argv), tuple(r), " ".join(argv)) for argv, r in stages))
            for joiner, stages in andor
        )
        for andor in andors
    )
    return Line(script, "")


def _run(line: Line, tree: Tree | None = None, disk: int = 10**9) -> Outcome:
    return evaluate(line, tree or Tree(), root=ROOT, file_bytes=4096, disk_bytes=disk)


def _tree(**files: str) -> Tree:
    return Tree({k.replace("__", "/"): (v,) for k, v in files.items()}, set())


def test_a_failed_and_skips_only_the_next_pipeline() -> None:
    line = _line(
        [("", [(["false"], [])]), ("&&", [(["echo", "a"], [])]), ("||", [(["echo", "b"], [])])]
    )
    out = _run(line)
    assert (out.status, out.stdout) == (0, ("b\n",))


def test_a_redirection_after_cd_is_relative_to_the_new_directory() -> None:
    tree = Tree({}, {"d"})
    line = _line([("", [(["cd", "d"], [])]), ("&&", [(["echo", "x"], [("1>", "y")])])])
    out = _run(line, tree)
    assert out.after.files == {"d/y": ("x\n",)}


def test_touch_keeps_an_existing_file() -> None:
    out = _run(_line([("", [(["touch", "a", "b"], [])])]), _tree(a="kept\n"))
    assert out.after.files == {"a": ("kept\n",), "b": ()}


def test_wc_of_two_files_prints_a_total() -> None:
    out = _run(_line([("", [(["wc", "-l", "a", "b"], [])])]), _tree(a="1\n2\n", b="3\n"))
    assert matches("2 a\n1 b\n3 total\n", out.stdout)
    assert matches(" 2 a\n 1 b\n 3 total\n", out.stdout)
    assert not matches("2 a\n1 b\n", out.stdout)


def test_error_lines_follow_their_redirections() -> None:
    to_stdout = _run(_line([("", [(["cat", "gone"], [("2>&1", "")])])]))
    assert (to_stdout.status, to_stdout.stdout, to_stdout.stderr) == (1, (ERR,), ())
    assert matches("cat: gone: No such file or directory\n", to_stdout.stdout)
    to_stderr = _run(_line([("", [(["echo", "x"], [("1>&2", "")])])]))
    assert (to_stderr.stdout, to_stderr.stderr) == ((), ("x\n",))
    swapped = _run(_line([("", [(["cat", "gone"], [("2>&1", ""), ("1>", "f")])])]))
    assert swapped.stdout == (ERR,) and swapped.after.files == {"f": ()}


def test_a_pipeline_exits_with_its_last_stage() -> None:
    line = _line([("", [(["cat", "gone"], []), (["wc", "-l"], [])])])
    out = _run(line)
    assert (out.status, out.stdout, out.stderr) == (0, ("0\n",), (ERR,))


def test_exit_ends_the_line() -> None:
    line = _line([("", [(["exit", "3"], [])])], [("", [(["echo", "no"], [])])])
    out = _run(line)
    assert (out.status, out.stdout) == (3, ())


@pytest.mark.parametrize(
    "line",
    [
        _line([("", [(["cat", "a"], [("1>", "a")])])]),  # GNU cat: input file is output file
        _line([("", [(["cat", "a", "gone"], [("1>", "f"), ("2>&1", "")])])]),  # interleaving
        _line([("", [(["cd", "d"], []), (["cat"], [])])]),  # dash: a subshell
        _line([("", [(["cat", "x/../a"], [])])]),  # '..' after a name that is no directory
        _line([("", [(["rm", "-f", "a/x"], [])])]),  # GNU: ENOTDIR even with -f
    ],
)
def test_what_the_documentation_leaves_open_is_unknowable(line: Line) -> None:
    with pytest.raises(Unknowable):
        _run(line, Tree({"a": ("a\n",)}, {"d"}))


def test_fill_lines_land_at_the_disk_limit_to_the_byte() -> None:
    tree = _tree(a="x" * 10)
    disk = 5 * 4096 + 123
    seen = set()
    for seed in range(30):
        line = fill_line(random.Random(seed), tree, "p1", disk)
        assert line is not None
        out = _run(line, tree, disk)
        lo, hi = out.after.usage()
        assert lo == hi
        seen.add(lo - disk)
        assert out.killed == (lo > disk)
        assert out.status == (-25 if lo > disk else 0)
    assert seen == {-1, 0, 1}


def test_drawn_lines_render_and_evaluate() -> None:
    rng = random.Random(7)
    known = 0
    for _ in range(300):
        line = draw_line(rng, Tree({"a": ("a\n",)}, {"d"}))
        assert line.text
        try:
            _run(line, Tree({"a": ("a\n",)}, {"d"}))
            known += 1
        except Unknowable:
            pass
    assert known > 150


def test_run_code_streams_agree() -> None:
    good = [
        Result("echo a", True, "a\n", ("a",), None),
        Result("ls", True, "", None, None),
        Result(
            "cat gone",
            False,
            "Error executing function run_code: ExitCode: exit code 1: cat: gone: No such file",
            None,
            ("cat: gone: No such file",),
        ),
    ]
    assert judge_streams("a0", good) == []
    swapped = [
        Result("echo a", True, "a\n", None, ("a",)),
        Result(
            "cat gone",
            False,
            "Error executing function run_code: ExitCode: exit code 1: cat: gone: No such file",
            ("cat: gone: No such file",),
            None,
        ),
    ]
    problems = judge_streams("a0", swapped)
    assert len(problems) == 2 and "stdout lines" in problems[0] and "stderr" in problems[1]
