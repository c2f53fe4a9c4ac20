"""Tools that run in the agent's sandbox (``run_code``, custom tools), with teleport.

Every failure is a failed result, never an exception. After a command ran (or timed out: it
may have written files before it was killed) the sandbox's files are saved (``_teleport``):
the image's writes ride with the call's result, so they commit together. A crash of the
sandbox loses what it did since the last saved image; the next call restores that image.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from kelpie_agent.sandbox import (
    ExecResult,
    ExecTimeoutError,
    Sandbox,
    SandboxCrashedError,
    SandboxError,
)

from ._custom_tools import driver_source, parse_result
from ._errors import AgentStorageError
from ._memory_edits import ToolError
from ._models import ToolSpec
from ._outcome import ToolOutcome, failure
from ._runtime import AgentRuntime
from ._teleport import SandboxSaveError, capture

__all__ = ["run_code", "run_custom"]


def _lines(text: str) -> tuple[str, ...] | None:
    return tuple(text.splitlines()) if text else None


def _text(value: Any) -> str:
    if value is None:
        return "None"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


async def _saved(
    rt: AgentRuntime, name: str, sandbox: Sandbox, outcome: ToolOutcome
) -> ToolOutcome:
    """``outcome`` with the sandbox's image added to its writes (or a failure if it cannot be
    saved: then the sandbox is rolled back to the last image)."""
    try:
        image, writes = await capture(rt, sandbox)
    except SandboxCrashedError as error:
        rt.sandbox = None
        return failure(name, "SandboxCrashedError", f"{error} (before its files were saved)")
    except (SandboxSaveError, SandboxError, AgentStorageError) as error:
        # not saved (a snapshot that kept failing, or storage giving up on the previous
        # image's record): back to the last image, so the failed call leaves no files behind
        await rt.close_sandbox()
        return failure(name, type(error).__name__, str(error))

    def keep() -> None:
        rt.image = image

    return attrs.evolve(outcome, writes=(*outcome.writes, *writes), after=(*outcome.after, keep))


async def _execute(
    rt: AgentRuntime,
    name: str,
    run: Callable[[Sandbox], Awaitable[ExecResult]],
    timed_out: str,
) -> ExecResult | ToolOutcome:
    """Run a command in the agent's sandbox: its result, or the failed outcome."""
    sandbox: Sandbox | None = None
    try:
        sandbox = await rt.get_sandbox()
        return await run(sandbox)
    except ExecTimeoutError:
        assert sandbox is not None
        return await _saved(rt, name, sandbox, failure(name, "TimeoutError", timed_out))
    except SandboxCrashedError as error:
        rt.sandbox = None
        return failure(name, "SandboxCrashedError", str(error))
    except (SandboxError, RuntimeError) as error:
        await rt.close_sandbox()
        return failure(name, type(error).__name__, str(error))


async def run_code(rt: AgentRuntime, name: str, code: str, language: str) -> ToolOutcome:
    timeout = rt.config.tool_timeout

    async def run(sandbox: Sandbox) -> ExecResult:
        if language == "python":
            return await sandbox.exec_python(code, timeout=timeout)
        return await sandbox.exec(code, timeout=timeout)

    result = await _execute(rt, name, run, f"the code ran longer than {timeout:g}s and was killed")
    if isinstance(result, ToolOutcome):
        return result
    out, err = _lines(result.stdout), _lines(result.stderr)
    if result.exit_code != 0:
        last = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
        outcome = failure(
            name, "ExitCode", f"exit code {result.exit_code}: {last}", stdout=out, stderr=err
        )
    else:
        outcome = ToolOutcome(True, result.stdout, stdout=out, stderr=err)
    assert rt.sandbox is not None
    return await _saved(rt, name, rt.sandbox, outcome)


async def run_custom(rt: AgentRuntime, spec: ToolSpec, args: dict[str, Any]) -> ToolOutcome:
    if not spec.source_code:
        raise ToolError(f"custom tool {spec.name!r} has no source code", "RuntimeError")
    timeout = rt.config.tool_timeout
    code = driver_source(spec.source_code, spec.name, args)

    async def run(sandbox: Sandbox) -> ExecResult:
        return await sandbox.exec_python(code, timeout=timeout)

    result = await _execute(rt, spec.name, run, f"the tool ran longer than {timeout:g}s")
    if isinstance(result, ToolOutcome):
        return result
    found, value, own_stdout = parse_result(result.stdout)
    out, err = _lines(own_stdout.rstrip("\n")), _lines(result.stderr)
    if result.exit_code != 0 or not found:
        lines = result.stderr.strip().splitlines()
        last = lines[-1] if lines else f"exit code {result.exit_code}"
        kind, _, message = last.partition(": ")
        if not message:
            kind, message = "RuntimeError", last
        if result.exit_code == 0 and result.truncated:  # the result line was cut, or lost
            limit = rt.sandbox.limits.max_output_bytes if rt.sandbox is not None else 0
            kind = "OutputLimitError"
            message = f"the tool's output passed the sandbox's limit of {limit} bytes"
        text = f"Error executing function {spec.name}: {kind}: {message}"[:1000]
        outcome = ToolOutcome(False, text, out, err)
    else:
        outcome = ToolOutcome(True, _text(value), out, err)
    assert rt.sandbox is not None
    return await _saved(rt, spec.name, rt.sandbox, outcome)
