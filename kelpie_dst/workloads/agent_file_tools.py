"""The file tools judged against a model: ``open_files`` windows and the LRU, ``grep_files``.

One server node (kelpie_agent's service, direct calls) with slow storage. An admin task makes
two folders of small files (plain text and Python, with blank lines and indentation, lines
that share search words), waits for them to be processed, makes an agent with a small
``max_files_open`` and a small per-file character window, and attaches both folders. Then a
client sends the agent one operation at a time; a model policy turns each into one file-tool
call with the arguments the workload drew: ``open_files`` with windows at the edges of a file
(offset 0, the last line, one past it; lengths of 1, to the end, past the end), several files
at once, ``close_all_others``, unknown names and bad ranges; ``grep_files`` with patterns that
match many lines across files, one file or none, ``include`` globs, ``context_lines`` and pages
(``offset`` at 0, 20, the last match, past it); ``semantic_search_files`` with limits from 0 to
past the cap of 50.

The model (``_file_tools_model``) replays every operation. Invariant ``file_tools_match_model``:
each tool's answer (its text, or the refusal the model expects) is the model's, and the
``<directories>`` section of the system prompt, as the LLM is shown it before and after each
call, is the model's rendering: which files are open, with which window, cut at the character
limit, and which one the LRU closed. A semantic search is judged by what any ranking must
satisfy (the model does not recompute embeddings): its count, numbering, grouping, the lines it
shows, falling scores; the files it named count as used for the LRU.
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs
import trio

import kelpie_dst
from kelpie_agent.agent import CreateAgent, InputMessage
from kelpie_agent.errors import KelpieError
from kelpie_agent.llm import LlmRequest
from kelpie_agent.service import AgentService, ServiceOptions, open_agent_node
from kelpie_agent.service import _folders as folders

from .._nodes import Node
from ..scenario import WorkloadContext, invariant, workload
from ..shims import LlmTiming, SimLlmClient, open_kv, sim_ports
from ..shims.llm import Call, Reply
from ..shims.llm._turns import latest_turn
from ._agent_coherence import coherence_options
from ._agent_coherence import memory_matches_storage as memory_matches_storage
from ._file_tools_model import MFile, Model, directories_section

__all__ = ["agent_file_tools", "file_tools_match_model"]

SERVICE = ServiceOptions(request_timeout=30.0, scheduler=False)
FOLDERS = (("notes", "Project notes"), ("code", ""))
WORDS = ("kelp", "otter", "tide", "reef", "urchin", "current")
_OP = re.compile(r"\bfile-op (\d+)\b")


@attrs.define
class Op:
    tool: str
    args: dict[str, Any]
    before: str | None = None  # the <directories> the LLM was shown with the request
    result: str | None = None
    is_error: bool = False
    after: str | None = None  # ... and with the tool's result


@attrs.define
class FileToolsLog:
    ops: list[Op] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)
    failures: list[str] = attrs.Factory(list)
    checked: int = 0


class FileToolsPolicy:
    """``file-op N`` -> the tool call the workload planned as op N; a result -> plain text."""

    def __init__(self, log: FileToolsLog) -> None:
        self.log = log

    def respond(self, request: LlmRequest, rng: Any) -> Reply:
        turn = latest_turn(request)
        asked = None
        for message in request.messages:  # the op this turn is about: its user message
            for block in message.content:
                found = _OP.search(getattr(block, "text", "") or "")
                if message.role == "user" and found:
                    asked = int(found.group(1))
        if asked is None or asked >= len(self.log.ops):
            return ("I only use file tools.",)
        op = self.log.ops[asked]
        shown = directories_section(request.system)
        if turn.kind == "tool_result":
            op.result, op.is_error, op.after = _unpacked(turn.text), turn.is_error, shown
            return ("Done with the files.",)
        op.before = shown
        return (Call(op.tool, op.args),)


def _unpacked(text: str) -> str:
    """A tool result's message, out of Letta's ``{"status", "message", "time"}`` package."""
    try:
        package = json.loads(text)
    except ValueError:
        return text
    if isinstance(package, dict) and isinstance(package.get("message"), str):
        return str(package["message"])
    return text


def _text(rng: Any, n: int, python: bool) -> str:
    """A file of ``n`` lines: words the greps look for, blank lines, indentation."""
    out = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
        if python:
            indent = "    " * rng.randint(0, 2)
            out.append(f"{indent}x{i} = '{words}'  ")
        else:
            out.append(f"  line {i}: {words} ")
        if rng.random() < 0.2:
            out.append("   " if rng.random() < 0.5 else "")
    return "\n".join(out) + "\n"


def _open_request(rng: Any, model: Model) -> dict[str, Any]:
    f = rng.choice(model.files)
    total = len(f.lines)
    name = f.name if rng.random() > 0.04 else f"{f.folder}/missing.txt"
    request: dict[str, Any] = {"file_name": name}
    offset = rng.choice([None, None, 0, 1, total - 1, total, total + 1, rng.randrange(total)])
    if rng.random() < 0.03:
        offset = -1
    if offset is not None:
        request["offset"] = offset
    if rng.random() < 0.8:
        start = offset if offset is not None and offset >= 0 else 0
        length = rng.choice([1, 2, max(1, total - start), total - start + 1, rng.randint(1, 8)])
        if rng.random() < 0.03:
            length = 0
        request["length"] = length
    return request


def _plan(rng: Any, model: Model) -> tuple[str, dict[str, Any]]:
    if rng.random() < 0.15:
        query = rng.choice([*WORDS, "kelp otter tide", "x3 = reef", "   "])
        search: dict[str, Any] = {"query": query}
        limit = rng.choice([None, 0, 1, 2, 3, 10, 50, 60])
        if limit is not None:
            search["limit"] = limit
        return "semantic_search_files", search
    if rng.random() < 0.55:
        count = rng.choice([1, 1, 1, 2, 2, 3, model.max_open + 1])
        chosen: list[dict[str, Any]] = []
        for _ in range(count):
            request = _open_request(rng, model)
            if all(r["file_name"] != request["file_name"] for r in chosen):
                chosen.append(request)
        args: dict[str, Any] = {"file_requests": chosen}
        if rng.random() < 0.25:
            args["close_all_others"] = True
        return "open_files", args
    pattern = rng.choice(
        [*WORDS, "kelp|otter", r"line [0-9]+: tide", r"x1\d", "nothing-here", "([", "  "]
    )
    args = {"pattern": pattern}
    include = rng.choice([None, None, "*.py", "*.txt", "notes/*", "code/b*", "nomatch*"])
    if include is not None:
        args["include"] = include
    if rng.random() < 0.4:
        args["context_lines"] = rng.choice([0, 1, 2])
    if rng.random() < 0.5:
        args["offset"] = rng.choice([0, 20, 40, rng.randint(0, 60)])
    return "grep_files", args


async def _setup(service: AgentService, ctx: WorkloadContext, model: Model) -> str:
    rng = ctx.rng("file_tools/files")
    ids: dict[str, str] = {}
    for folder, description in FOLDERS:
        chunk = rng.randint(50, 120)  # several passages a file, for semantic search
        record = await folders.create_folder(
            service, folder, description=description or None, chunk_size=chunk
        )
        ids[folder] = record.id
        count = rng.randint(2, 4)
        for k in range(count):
            python = folder == "code"
            file_name = f"{'ab'[k % 2]}{k}.{'py' if python else 'txt'}"
            big = k == count - 1 and not python  # a long one: grep pages, 50+ passages
            text = _text(rng, rng.randint(40, 70) if big else rng.randint(3, 14), python)
            stored = await folders.upload_file(
                service,
                record.id,
                file_name,
                text.encode(),
                declared_type=None,
                duplicate_handling="error",
            )
            assert stored is not None
            model.add_file(MFile(stored.id, folder, file_name, stored.created_at, text))
    for f in model.files:
        while (done := await folders.process_until_done(service, f.id)) is None:
            await trio.sleep(0.2)
        f.passages = done.total_chunks or 0
    agent = (
        await service.create_agent(
            CreateAgent(
                name="librarian",
                max_files_open=model.max_open,
                per_file_view_window_char_limit=model.char_limit,
            )
        )
    ).agent
    for folder, _ in FOLDERS:
        await folders.attach_folder(service, agent.id, ids[folder])
        model.attach(folder)
    return agent.id


def _judge(log: FileToolsLog, number: int, op: Op, want_before: str, model: Model) -> None:
    where = f"op {number} ({op.tool} {op.args})"
    if op.before != want_before:
        log.problems.append(
            f"{where}: the prompt showed\n{op.before}\nnot the model's\n{want_before}"
        )
    log.problems += [f"{where}: {problem}" for problem in _answer_problems(op, model)]
    want_after = model.directories()
    if op.after != want_after:
        log.problems.append(f"{where}: after it the prompt showed\n{op.after}\nnot\n{want_after}")
    log.checked += 1


def _answer_problems(op: Op, model: Model) -> list[str]:
    """Replay ``op`` on the model; what is wrong with the answer the tool gave."""
    if op.tool == "semantic_search_files":
        return model.semantic(op.args["query"], op.args.get("limit"), op.result or "", op.is_error)
    if op.tool == "open_files":
        want = model.open_files(op.args["file_requests"], bool(op.args.get("close_all_others")))
    else:
        args = op.args
        want = model.grep(
            args["pattern"], args.get("include"), args.get("context_lines"), args.get("offset")
        )
    if (op.result, op.is_error) == (want.text, want.error):
        return []
    return [
        f"answered (error={op.is_error})\n{op.result}\nnot the model's "
        f"(error={want.error})\n{want.text}"
    ]


@workload(
    params={"ops": 24, "max_files_open": 3, "char_limit": 240},
    sizes=("ops",),
    bounds={"ops": (1, 1000), "max_files_open": (1, 10), "char_limit": (20, 100_000)},
)
async def agent_file_tools(ctx: WorkloadContext) -> None:
    """See the module docstring."""
    db = ctx.sim.add_node(ctx.topology.database or "db")
    log = FileToolsLog()
    ctx.state["file_tools"] = log
    model = Model(int(ctx.params["max_files_open"]), int(ctx.params["char_limit"]), list(FOLDERS))
    done = trio.Event()

    async def node_main(node: Node) -> None:
        async with open_agent_node(
            open_kv(node, host=db),
            sim_ports(node),
            node_id=node.name,
            llm=SimLlmClient(FileToolsPolicy(log), timing=LlmTiming()),
            options=SERVICE,
            observer=kelpie_dst.log,
            **coherence_options(ctx, db),
        ) as service:
            agent_id = await _setup(service, ctx, model)
            rng = ctx.rng("file_tools/ops")
            for number in range(int(ctx.params["ops"])):
                tool, args = _plan(rng, model)
                op = Op(tool, args)
                log.ops.append(op)
                want_before = model.directories()
                try:
                    await service.send_message(
                        agent_id, [InputMessage("user", f"file-op {number}", otid=f"op-{number}")]
                    )
                except KelpieError as error:  # the model cannot know what happened: stop here
                    log.failures.append(f"op {number}: {type(error).__name__}: {error}")
                    break
                _judge(log, number, op, want_before, model)
                if log.problems:
                    break
            done.set()

    ctx.sim.add_node((ctx.topology.nodes or ("server",))[0], node_main)
    await done.wait()
    ctx.metric("file_tools.ops_checked", log.checked)
    ctx.metric("file_tools.open_calls", sum(1 for o in log.ops if o.tool == "open_files"))
    ctx.metric("file_tools.errors", sum(1 for o in log.ops if o.is_error))


@invariant
def file_tools_match_model(ctx: WorkloadContext) -> None:
    """Every file-tool answer and every ``<directories>`` prompt section before and after it is
    the model's; every planned operation ran (see the module docstring)."""
    log: FileToolsLog = ctx.state["file_tools"]
    assert not log.problems, log.problems[0]
    assert not log.failures, f"operations failed: {log.failures[:3]}"
    assert log.checked == int(ctx.params["ops"]), f"{log.checked} of {ctx.params['ops']} checked"
