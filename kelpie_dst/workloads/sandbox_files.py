"""Shell and Python commands in the agents' sandboxes, judged by a model of their files
(``agent_sandbox_files``).

The other sandbox scenarios run commands whose output nobody reads closely (``echo`` and
``wc -w`` of the words of a directive, a line count in ``tool_rules``), so a shell that
truncates on ``>>``, a pipeline with the wrong exit status or a path that is not normalised
ran everywhere and failed nowhere (the session-11 blind test, sbxF). Here server nodes
(``topology.nodes``) share a database host; a client makes ``agents`` letta_v1 agents with
``run_code`` only, then sends each ``messages`` directives (with an otid, retried on failures)
to a random live node. The simulated model (:class:`ShellPolicy`) answers each directive with
one to three ``run_code`` calls drawn from the repertoire of :mod:`._shell_model` (appends,
pipes, ``&&``/``||``, redirections, ``..`` in paths, ``cd``, ``ls``, ``wc``/``head``/``cat``,
a file at the file size limit, a command that outgrows the disk limit, one that writes and
then sleeps past the tool timeout, Python writing through ``open()``), then with text.

The sandboxes are small (``FILE_BYTES`` per file, ``DISK_BYTES`` in all) and fail (crashes
during commands, failed boots, snapshots and restores, damaged snapshots), nodes crash and
restart (the agent's files then come back from its saved image on whichever node it activates
next), and storage gives up now and then after two tries, so a call can run without its result
being committed. At the end the client reads each agent's history back, and the checks judge
every committed ``run_code`` result against the model's prediction from the files the
committed calls before it left (``sandbox_commands_agree``), and the agent's stored sandbox
image against the documented snapshot format and the model's final files
(``sandbox_image_is_committed``).
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

import attrs
import trio

import kelpie_dst
from kelpie_agent.agent import (
    CreateAgent,
    InputMessage,
    ToolCallMessage,
    ToolReturnMessage,
    builtin_id,
)
from kelpie_agent.agent._codec import unpack
from kelpie_agent.llm import LlmRequest
from kelpie_agent.sandbox import SandboxLimits

from ..scenario import WorkloadContext, invariant, workload
from ..shims import open_kv
from ..shims.llm._turns import Call, Reply
from ._agent_coherence import memory_matches_storage as memory_matches_storage
from ._agent_schedules import Client
from ._run_code_streams import judge_streams
from ._shell_model import (
    DISK_BYTES,
    FILE_BYTES,
    MAX_OUTPUT,
    TOOL_TIMEOUT,
    Files,
    Result,
    draw_command,
    failure_kind,
    judge_history,
    judge_image,
)
from ._tool_rule_model import result_message
from .tool_rules import start_servers

__all__ = [
    "ShellPolicy",
    "agent_sandbox_files",
    "run_code_streams_agree",
    "sandbox_commands_agree",
    "sandbox_image_is_committed",
]

DIRECTIVE = re.compile(r"^sf-a(\d+)-m(\d+)\b")
MAX_CALLS = 3  # run_code calls the model makes for one directive, at most


@attrs.define
class ShellPolicy:
    """The simulated model: one to three ``run_code`` commands of the repertoire for each
    directive, then text. ``commands`` maps each command's code to its template and
    parameters, for the checks."""

    commands: dict[str, tuple[str, dict[str, Any]]] = attrs.Factory(dict)
    requests: int = 0

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        self.requests += 1
        tagged, steps = False, 0
        for message in reversed(request.messages):
            if message.role == "assistant":
                steps += 1
            elif message.role == "user":
                tagged = DIRECTIVE.match(message.text.strip()) is not None
                break
        offered = {t.name for t in request.tools}
        if not tagged or "run_code" not in offered or steps >= MAX_CALLS or rng.random() < 0.1:
            return (f"Done after {steps} command(s).",)
        name, language, code, params = draw_command(rng)
        self.commands[code] = (name, params)
        return (Call("run_code", {"code": code, "language": language}),)


@attrs.define
class FilesLog:
    policy: ShellPolicy = attrs.Factory(ShellPolicy)
    agents: dict[int, str] = attrs.Factory(dict)
    results: dict[int, list[Result]] = attrs.Factory(dict)
    images: dict[int, bytes | None] = attrs.Factory(dict)
    image_problems: dict[int, str] = attrs.Factory(dict)
    stops: dict[str, int] = attrs.Factory(dict)


async def _converse(client: Client, log: FilesLog, number: int, messages: int) -> None:
    agent_id = log.agents[number]
    for k in range(messages):
        text = f"sf-a{number}-m{k} run some commands"
        inputs = (InputMessage("user", text, otid=f"sf-{number}-{k}"),)
        result = await client.until_done(
            lambda s, i=inputs: s.send_message(agent_id, i, max_steps=MAX_CALLS + 2)  # type: ignore[misc]
        )
        log.stops[result.stop_reason] = log.stops.get(result.stop_reason, 0) + 1
        await trio.sleep(client.rng.uniform(0.5, 3))


async def _read_back(client: Client, log: FilesLog) -> None:
    for number, agent_id in log.agents.items():
        history = await client.until_done(
            lambda s, a=agent_id: s.list_messages(a, limit=1000, order="asc")  # type: ignore[misc]
        )
        codes: dict[str, str] = {}
        results: list[Result] = []
        for m in history:
            if isinstance(m, ToolCallMessage) and m.tool_call.name == "run_code":
                try:
                    args = json.loads(m.tool_call.arguments)
                except ValueError:
                    continue
                codes[m.tool_call.tool_call_id] = str(args.get("code", ""))
            elif isinstance(m, ToolReturnMessage) and m.tool_call_id in codes:
                message = result_message(m.tool_return)
                results.append(
                    Result(
                        codes[m.tool_call_id],
                        m.status == "success",
                        message,
                        tuple(m.stdout) if m.stdout is not None else None,
                        tuple(m.stderr) if m.stderr is not None else None,
                    )
                )
        log.results[number] = results


def _read_images(db: kelpie_dst.Node, log: FilesLog) -> None:
    """Each agent's stored image (docs/teleport.md: ``sandbox/<agent>`` holds its size and
    chunk count, ``sandboxchunk/<agent>/<n:08x>`` the snapshot's bytes), read from the
    database host's store directly."""
    store = open_kv(db).store
    for number, agent_id in log.agents.items():
        raw = store._get(b"sandbox/" + agent_id.encode())
        if raw is None:
            log.images[number] = None
            continue
        try:
            image = unpack(raw)
            parts = [
                store._get(f"sandboxchunk/{agent_id}/{n:08x}".encode())
                for n in range(int(image.chunks))
            ]
        except Exception as error:  # a damaged record: reported by the check
            log.image_problems[number] = f"unreadable image record: {error}"
            continue
        if any(p is None for p in parts):
            log.image_problems[number] = f"image chunks missing of {image.chunks}"
            continue
        log.images[number] = b"".join(p for p in parts if p is not None)[: int(image.size)]


@workload(
    params={"agents": 4, "messages": 4, "storage_attempts": 2},
    sizes=("agents", "messages"),
    bounds={"agents": (1, 50), "messages": (1, 100), "storage_attempts": (1, 8)},
)
async def agent_sandbox_files(ctx: WorkloadContext) -> None:
    """Commands in the agents' sandboxes under faults; see the module docstring."""
    log = FilesLog()
    ctx.state["log"] = log
    limits = SandboxLimits(
        file_size_bytes=FILE_BYTES, disk_bytes=DISK_BYTES, max_output_bytes=MAX_OUTPUT
    )
    services, db = start_servers(
        ctx, log.policy, sandbox="shell-tools", tool_timeout=TOOL_TIMEOUT, limits=limits
    )
    client = Client(ctx, services, "sandbox-files")
    await trio.sleep(0.5)
    for number in range(int(ctx.params["agents"])):
        request = CreateAgent(
            name=f"files-{number}",
            agent_type="letta_v1_agent",
            tool_ids=(builtin_id("run_code"),),
        )
        view = await client.until_done(
            lambda s, r=request: s.create_agent(r, include_base_tools=False)  # type: ignore[misc]
        )
        log.agents[number] = view.agent.id
    messages = int(ctx.params["messages"])
    async with trio.open_nursery() as nursery:
        for number in log.agents:
            nursery.start_soon(_converse, client, log, number, messages)
    await _read_back(client, log)
    _read_images(db, log)
    ctx.metric("sandbox_files.requests", log.policy.requests)
    ctx.metric("sandbox_files.results", sum(len(r) for r in log.results.values()))
    kinds: dict[str, int] = {}
    for results in log.results.values():
        for r in results:
            kind = "ok" if r.ok else failure_kind(r.message)
            kinds[kind] = kinds.get(kind, 0) + 1
    for kind, count in sorted(kinds.items()):
        ctx.metric(f"sandbox_files.result.{kind}", count)
    for reason, count in sorted(log.stops.items()):
        ctx.metric(f"sandbox_files.stop.{reason}", count)


def _shown(problems: list[str]) -> str:
    return "; ".join(problems[:3]) + (f"; ... ({len(problems)} in all)" if problems[3:] else "")


def _judged(log: FilesLog, number: int) -> tuple[list[str], Files]:
    return judge_history(f"a{number}", log.results.get(number, []), log.policy.commands)


@invariant
def sandbox_commands_agree(ctx: WorkloadContext) -> None:
    """Every committed ``run_code`` result (its stdout, or its exit code, or a timeout) is what
    the command gives on the files the agent's committed calls before it left: the shell and
    its commands keep their documented semantics, the limits hold at their documented values,
    and the files survive crashes, moves and failed commits exactly as committed."""
    log: FilesLog = ctx.state["log"]
    problems: list[str] = []
    for number in sorted(log.agents):
        problems += _judged(log, number)[0]
    assert not problems, _shown(problems)


@invariant
def sandbox_image_is_committed(ctx: WorkloadContext) -> None:
    """Each agent's stored sandbox image verifies as a snapshot of the documented format
    (its SHA-256 covers everything but itself) and holds exactly the files its committed
    calls left."""
    log: FilesLog = ctx.state["log"]
    problems: list[str] = []
    for number in sorted(log.agents):
        if number in log.image_problems:
            problems.append(f"a{number}: {log.image_problems[number]}")
            continue
        found, files = _judged(log, number)
        if found:
            continue  # the model lost track; sandbox_commands_agree says why
        problems += judge_image(f"a{number}", log.images.get(number), files)
    assert not problems, _shown(problems)


@invariant
def run_code_streams_agree(ctx: WorkloadContext) -> None:
    """Each committed ``run_code`` result's ``stdout`` and ``stderr`` lines are the command's
    own: a success answers with its stdout, which the ``stdout`` lines repeat; a failed exit
    names the last line of the ``stderr`` lines (:mod:`._run_code_streams`)."""
    log: FilesLog = ctx.state["log"]
    problems: list[str] = []
    for number in sorted(log.agents):
        problems += judge_streams(f"a{number}", log.results.get(number, []))
    assert not problems, _shown(problems)
