"""SimSandbox against ProcessSandbox at the limits: the same operations, run in order in each,
near ``max_output_bytes``, ``file_size_bytes`` and the timeout, on names that share prefixes,
give the same answers, and the answers docs/sandbox.md gives (the ``sandbox_port`` scenario
judges the simulated sandbox by the same contract; this keeps the real one to it too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from kelpie_agent.sandbox import (
    ExecTimeoutError,
    ProcessSandbox,
    Sandbox,
    SandboxFileError,
    SandboxLimits,
)
from kelpie_dst.shims._sandbox import SimSandbox

OUT, FILE = 64, 96
LIMITS = SandboxLimits(timeout=5.0, max_output_bytes=OUT, file_size_bytes=FILE)


async def _write(sandbox: Sandbox, path: str, size: int) -> str:
    try:
        await sandbox.write_file(path, b"w" * size)
    except SandboxFileError:
        return "refused"
    return "written"


async def transcript(sandbox: Sandbox) -> list[tuple[str, Any]]:
    await sandbox.boot()
    lines: list[tuple[str, Any]] = []
    for n in (OUT - 1, OUT, OUT + 1, 3 * OUT):
        for stream in ("stdout", "stderr"):
            py = await sandbox.exec_python(f"import sys; sys.{stream}.write('y' * {n})")
            redirect = " >&2" if stream == "stderr" else ""
            sh = await sandbox.exec(f"printf '%s' {'y' * n}{redirect}")
            for kind, r in (("python", py), ("sh", sh)):
                got = (len(r.stdout), len(r.stderr), r.truncated, r.exit_code)
                lines.append((f"{kind} writes {n} bytes to {stream}", got))
    for size in (FILE - 1, FILE, FILE + 1):
        lines.append((f"write_file of {size} bytes", await _write(sandbox, f"w{size}", size)))
    for size in (FILE, FILE + 1):
        r = await sandbox.exec(f"printf '%s' {'p' * size} > p{size}")
        kept = len(await sandbox.read_file(f"p{size}"))
        lines.append((f"printf of {size} bytes into a file", (r.exit_code != 0, kept)))
    await sandbox.exec("mkdir -p d d2 && printf x > d.txt && printf y > d/a && printf z > d2/a")
    r = await sandbox.exec("rm -r d && ls")
    lines.append(("rm -r d beside d.txt and d2", (r.exit_code, r.stdout.split())))
    for code in (0, 3, 255, 263):
        r = await sandbox.exec_python(f"raise SystemExit({code})")
        lines.append((f"SystemExit({code})", r.exit_code))
    try:
        await sandbox.exec("printf begun; sleep 5", timeout=0.5)
        lines.append(("sleep 5 with a 0.5 s timeout", "finished"))
    except ExecTimeoutError as error:
        lines.append(("sleep 5 with a 0.5 s timeout", ("timed out", error.stdout)))
    await sandbox.stop()
    return lines


def expected() -> list[tuple[str, Any]]:
    """The contract's answers (docs/sandbox.md), written without either sandbox."""
    lines: list[tuple[str, Any]] = []
    for n in (OUT - 1, OUT, OUT + 1, 3 * OUT):
        for stream in ("stdout", "stderr"):
            kept = min(n, OUT)
            got = (kept, 0, n > OUT, 0) if stream == "stdout" else (0, kept, n > OUT, 0)
            lines += [(f"{kind} writes {n} bytes to {stream}", got) for kind in ("python", "sh")]
    for size in (FILE - 1, FILE, FILE + 1):
        lines.append((f"write_file of {size} bytes", "written" if size <= FILE else "refused"))
    for size in (FILE, FILE + 1):
        lines.append((f"printf of {size} bytes into a file", (size > FILE, min(size, FILE))))
    lines.append(("rm -r d beside d.txt and d2", (0, ["d.txt", "d2", "p96", "p97", *WRITTEN])))
    lines += [(f"SystemExit({code})", code & 0xFF) for code in (0, 3, 255, 263)]
    lines.append(("sleep 5 with a 0.5 s timeout", ("timed out", "begun")))
    return lines


WRITTEN = [f"w{FILE - 1}", f"w{FILE}"]


def test_the_simulated_sandbox_keeps_the_limits() -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)
    sim = trio.run(transcript, SimSandbox(LIMITS), clock=clock)
    assert sim == expected()


@pytest.mark.bubblewrap
def test_the_real_sandbox_keeps_the_same_limits(tmp_path: Path) -> None:
    real = trio.run(transcript, ProcessSandbox(LIMITS, parent_dir=tmp_path))
    assert real == expected()
