"""The tool-return contract of ``run_code``: its ``stdout``/``stderr`` lines and its message
tell the same story (``run_code_streams_agree``, in ``agent_sandbox_files``).

A ``run_code`` result carries the command's output twice: as the packaged message (a success
answers with the command's stdout; a failed exit says ``exit code N: LAST``, LAST being the
last line of its stderr) and as the tool return's ``stdout`` and ``stderr`` lines (Letta's
fields, which clients show apart from the message). Model-free: whatever the command printed,
the two must agree, so a result whose streams are swapped, dropped or taken from another call
shows. Pure; it reads only what the history returned.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._shell_model import Result

__all__ = ["judge_streams"]

_PREFIX = "Error executing function run_code: ExitCode: "
_CUT = "... [NOTE: function output was truncated"


def _last(lines: tuple[str, ...] | None) -> str:
    text = "\n".join(lines or ()).strip()
    return text.splitlines()[-1] if text else ""


def judge_streams(agent: str, results: Iterable[Result]) -> list[str]:
    """Each result whose message and stream lines disagree."""
    problems: list[str] = []
    for index, result in enumerate(results):
        where = f"{agent}: committed run_code call {index} ({result.code[:60]!r})"
        if result.ok:
            if _CUT in result.message:
                continue  # cut at the return character limit: the lines are the whole
            want = tuple(result.message.splitlines()) or None
            if result.stdout != want:
                problems.append(
                    f"{where} answered {result.message[:80]!r}, but its stdout lines are "
                    f"{list(result.stdout or ())[:4]!r} (stderr {list(result.stderr or ())[:4]!r})"
                )
            continue
        if not result.message.startswith(_PREFIX) or _CUT in result.message:
            continue
        said = result.message[len(_PREFIX) :].partition(": ")[2]
        if said != _last(result.stderr):
            problems.append(
                f"{where} failed saying {said[:80]!r}, but the last line of its stderr lines is "
                f"{_last(result.stderr)[:80]!r}"
            )
    return problems
