"""agent_sandbox_files (session 11, sbxF): the scenario passes and repeats its trace; the
model of the sandbox's files agrees with SimSandbox on long random command sequences; the
checks name hand-made bad histories and images."""

from __future__ import annotations

import hashlib
import random
import struct

import msgpack
import pytest
import trio
import trio.testing

from kelpie_agent.sandbox import ExecTimeoutError, SandboxLimits
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.shims import SimSandbox
from kelpie_dst.workloads._shell_model import (
    DISK_BYTES,
    FILE_BYTES,
    KILLED_DISK,
    MAX_OUTPUT,
    TEMPLATES,
    TOOL_TIMEOUT,
    Files,
    Result,
    draw_command,
    judge_history,
    judge_image,
    predict,
)


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_sandbox_files", ["workload.params.messages=4"])
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["sandbox_files.results"] > 10
    assert first.metrics["sandbox_files.result.ok"] > 0
    assert first.result.trace_hash == again.result.trace_hash


async def _transcript(seed: int, count: int) -> list[str]:
    """Run ``count`` random commands of the repertoire in a SimSandbox with the scenario's
    limits; the problems where the model's prediction differs."""
    rng = random.Random(seed)
    limits = SandboxLimits(
        file_size_bytes=FILE_BYTES, disk_bytes=DISK_BYTES, max_output_bytes=MAX_OUTPUT
    )
    sandbox = SimSandbox(limits)
    await sandbox.boot()
    model = Files()
    problems: list[str] = []
    for index in range(count):
        name, language, code, params = draw_command(rng)
        want = predict(name, params, model)
        try:
            if language == "python":
                got = await sandbox.exec_python(code, timeout=TOOL_TIMEOUT)
            else:
                got = await sandbox.exec(code, timeout=TOOL_TIMEOUT)
        except ExecTimeoutError:
            status, stdout = None, ""
        else:
            status, stdout = got.exit_code, got.stdout
        if status != want.status or (status == 0 and stdout != want.stdout):
            problems.append(f"#{index} {name}: got {status} {stdout!r}, model {want}")
        model = want.after
        files = {p.removeprefix("/workspace/"): d for p, d in sandbox.fs.files.items()}
        dirs = {d.removeprefix("/workspace/") for d in sandbox.fs.dirs if d != "/workspace"}
        if files != model.files or dirs != model.dirs:
            problems.append(f"#{index} {name}: files {sorted(files)} != model {model}")
            model = Files(files, dirs)
    return problems


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_model_agrees_with_the_sim_sandbox(seed: int) -> None:
    """The model is written from the documented semantics, not from SimSandbox's code; on
    unmutated code the two agree, command by command, files and all."""
    clock = trio.testing.MockClock(autojump_threshold=0)
    assert trio.run(_transcript, seed, 150, clock=clock) == []


def test_every_template_is_drawn() -> None:
    rng = random.Random(7)
    assert {draw_command(rng)[0] for _ in range(500)} == set(TEMPLATES)


def test_the_model_follows_the_documented_limits() -> None:
    fs = Files()
    assert predict("part", {"w": "a", "v": "b"}, fs).stdout == "1 part.txt\n"  # GNU wc -l
    assert predict("cap", {"size": FILE_BYTES}, fs).status == 0
    over = predict("cap", {"size": FILE_BYTES + 1}, fs)
    assert over.status == 1 and len(over.after.files["cap.txt"]) == FILE_BYTES
    junk = predict("junk", {}, predict("append", {"w": "x"}, fs).after)
    assert junk.status == KILLED_DISK and "junk/j1" in junk.after.dirs  # it ran, then killed
    again = predict("junk", {}, junk.after)  # no bigger than when it started: not killed
    assert again.status == 0
    assert predict("timeout", {"w": "x"}, fs).after.files["log.txt"] == b"x\n"


def _appends(*counts: int) -> tuple[list[Result], dict[str, tuple[str, dict[str, object]]]]:
    commands: dict[str, tuple[str, dict[str, object]]] = {}
    results = []
    for k, count in enumerate(counts):
        code = f"echo w{k} >> log.txt && wc -l < log.txt"
        commands[code] = ("append", {"w": f"w{k}"})
        results.append(Result(code, True, f"{count}\n"))
    return results, commands


def test_the_history_check_names_a_wrong_answer() -> None:
    results, commands = _appends(1, 2, 3)
    problems, fs = judge_history("a0", results, commands)
    assert problems == [] and fs.files["log.txt"] == b"w0\nw1\nw2\n"
    results, commands = _appends(1, 1)  # '>>' truncated
    [problem] = judge_history("a0", results, commands)[0]
    assert "committed run_code call 1 (append" in problem and "'1\\n'" in problem


def test_the_history_check_takes_failures_for_what_they_are() -> None:
    results, commands = _appends(1, 2)
    crashed = "Error executing function run_code: SandboxCrashedError: it crashed"
    results.insert(1, Result(results[1].code, False, crashed))  # nothing happened
    assert judge_history("a0", results, commands)[0] == []
    exit_ok = "Error executing function run_code: ExitCode: exit code 1: cat: no"
    cat = "cat log.txt"
    commands[cat] = ("cat", {})
    assert judge_history("a0", [Result(cat, False, exit_ok)], commands)[0] == []
    [problem] = judge_history("a0", [*results, Result(cat, False, exit_ok)], commands)[0]
    assert "failed with exit code 1" in problem
    timed_out = "Error executing function run_code: TimeoutError: the code ran longer than 5s"
    [problem] = judge_history("a0", [Result(cat, False, timed_out)], commands)[0]
    assert "timed out" in problem


def _image(files: dict[str, bytes], dirs: list[str], *, cover: int = 0) -> bytes:
    payload: bytes = msgpack.packb([1, sorted(dirs), [[p, files[p]] for p in sorted(files)]])
    head = b"KSNAP" + bytes([1]) + b"sim".ljust(8, b"\x00")
    digest = hashlib.sha256(head + payload[: len(payload) - cover]).digest()
    return struct.pack(">5sB8s32s", b"KSNAP", 1, b"sim".ljust(8, b"\x00"), digest) + payload


def test_the_image_check_verifies_the_framing_and_the_files() -> None:
    want = Files({"log.txt": b"a\n", "notes/x.txt": b"x\n"}, {"notes"})
    good = _image(want.files, ["notes"])
    assert judge_image("a0", good, want) == []
    [problem] = judge_image("a0", _image(want.files, ["notes"], cover=46), want)
    assert "does not verify" in problem
    [problem] = judge_image("a0", _image({"log.txt": b"a\n"}, ["notes"]), want)
    assert "missing ['notes/x.txt']" in problem
    [problem] = judge_image("a0", None, want)
    assert "missing" in problem
    assert judge_image("a0", None, Files()) == []
