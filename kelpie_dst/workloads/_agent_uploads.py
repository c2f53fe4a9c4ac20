"""Uploads to folders under crashes and storage faults (issue #18, "uploads under crashes").

Server nodes share one database host and crash (and restart) while clients on them upload
files (plain text and markdown of varying sizes, some non-ASCII, some not UTF-8 at all) to a
folder attached to an agent, delete some of them, poll their status and ask the agent to
search them with its file tools (``grep_files``, ``semantic_search_files``, through the real
agent loop and a small model policy). An admin node (never crashed) makes the folder and the
agent. Each upload carries a unique token (``KTOK0007``) so a search names what it saw.

When the faults heal, every node is up; the workload waits (``grace``) for every upload to
finish, then asks the agent to grep for each file's token. The oracle (:func:`check`, on the
database host's store, read directly) is in ``_agent_upload_checks``.
"""

from __future__ import annotations

import contextlib
from collections import deque
from typing import Any

import attrs
import trio

import kelpie_dst
from kelpie_agent.agent import CreateAgent, InputMessage, ToolReturnMessage
from kelpie_agent.errors import KelpieError
from kelpie_agent.service import AgentService, ServiceOptions, open_agent_node
from kelpie_agent.service import _folders as folders

from .._nodes import Node
from ..scenario import WorkloadContext, invariant, workload
from ..shims import LlmTiming, SimLlmClient, open_kv, sim_ports
from ._agent_coherence import coherence_options
from ._agent_coherence import memory_matches_storage as memory_matches_storage
from ._agent_upload_checks import (
    FOLDER,
    UploadLog,
    check,
    check_search,
    document,
    passages_complete,
    snapshot,
)
from ._agent_upload_policy import FilesPolicy

__all__ = ["agent_uploads", "uploads_never_half_indexed"]

SERVICE = ServiceOptions(request_timeout=20.0, scheduler=False)  # no schedules here (Dsched-5)


@attrs.define
class Op:
    kind: str  # upload, delete, poll, grep, search, final
    n: int  # the upload it is about (for delete/poll/grep/final: an earlier upload's number)


@attrs.define
class Plan:
    """The operations still to run, and which node runs which (a crash loses its op)."""

    queue: deque[Op]
    inflight: dict[str, Op] = attrs.Factory(dict)  # node name -> op

    def take(self, node: str) -> Op | None:
        if not self.queue:
            return None
        op = self.queue.popleft()
        self.inflight[node] = op
        return op

    def busy(self) -> bool:
        return bool(self.queue or self.inflight)


def _plan(ctx: WorkloadContext, log: UploadLog) -> deque[Op]:
    rng = ctx.rng("uploads/plan")
    ops: deque[Op] = deque()
    for n in range(int(ctx.params["uploads"])):
        log.sent[n] = document(n, rng)
        ops.append(Op("upload", n))
        if rng.random() < float(ctx.params["delete_fraction"]):
            # half the time the upload just made: most likely still being processed
            ops.append(Op("delete", n if rng.random() < 0.5 else rng.randrange(n + 1)))
        roll = rng.random()
        if roll < 0.25:
            ops.append(Op("grep", n))
        elif roll < 0.4:
            ops.append(Op("search", n))
        elif roll < 0.7:
            ops.append(Op("poll", n))
    return ops


async def _run(service: AgentService, log: UploadLog, op: Op) -> None:
    folder_id = log.folder_id
    if op.kind == "upload":
        name, data = log.sent[op.n]
        record = await folders.upload_file(
            service, folder_id, name, data, declared_type=None, duplicate_handling="suffix"
        )
        assert record is not None  # "suffix" always stores
        log.acked[op.n] = record.id
        return
    file_id = log.acked.get(op.n)
    if op.kind == "delete" and file_id is not None:
        log.delete_tried.add(file_id)
        await folders.delete_file(service, folder_id, file_id)
        log.deleted.add(file_id)
    elif op.kind == "poll" and file_id is not None:
        record = await folders.get_file(service, folder_id, file_id)
        if record.processing_status == "completed":  # at this instant, fully indexed
            problem = passages_complete(log.store(), file_id)
            if problem:
                log.problems.append(f"file {file_id} reported completed while {problem}")
    elif op.kind in ("grep", "search", "final"):
        await _search(service, log, op)


async def _search(service: AgentService, log: UploadLog, op: Op) -> None:
    what = "grep" if op.kind in ("grep", "final") else "search"
    message = InputMessage("user", f"{what} {log.token(op.n)}", otid=f"{op.kind}-{op.n}")
    turn = await service.send_message(log.agent_id, [message])
    returns = [m for m in turn.messages if isinstance(m, ToolReturnMessage)]
    log.searches += len(returns)
    for ret in returns:
        # right after the tool answered: what it named must be completed now
        check_search(log, ret.tool_return, op, store=log.store())
    if op.kind == "final":
        log.finals[op.n] = "\n".join(r.tool_return for r in returns)


async def _client(service: AgentService, node: Node, log: UploadLog, plan: Plan, rng: Any) -> None:
    while True:
        op = plan.take(node.name)
        if op is None:
            plan.inflight.pop(node.name, None)
            await trio.sleep(0.5)  # more may come (the final checks)
            continue
        try:
            await _run(service, log, op)
        except KelpieError as error:  # not acknowledged: the client gives up on this one
            log.failures.append(f"{op.kind} {op.n}: {type(error).__name__}")
        plan.inflight.pop(node.name, None)
        await trio.sleep(rng.uniform(0.05, 0.4))


async def _setup(service: AgentService, log: UploadLog, chunk_size: int) -> None:
    """Make the folder and the agent (the admin node; storage faults may fail a try)."""
    while not log.agent_id:
        try:
            if not log.folder_id:
                found = await folders.list_folders(service, name=FOLDER)
                folder = found[0] if found else None
                if folder is None:
                    folder = await folders.create_folder(service, FOLDER, chunk_size=chunk_size)
                log.folder_id = folder.id
            agent = (await service.create_agent(CreateAgent(name="reader"))).agent
            await folders.attach_folder(service, agent.id, log.folder_id)
            log.agent_id = agent.id
        except KelpieError:
            await trio.sleep(0.5)


@workload(
    params={"uploads": 16, "delete_fraction": 0.2, "grace": 40},
    sizes=("uploads",),
    bounds={"uploads": (1, 200), "delete_fraction": (0, 1), "grace": (1, 600)},
)
async def agent_uploads(ctx: WorkloadContext) -> None:
    """Uploads, deletes, polls and file searches under crashes; see the module docstring."""
    db = ctx.sim.add_node(ctx.topology.database or "db")
    log = UploadLog(store=lambda: open_kv(db).store)
    ctx.state["uploads"] = log
    plan = Plan(deque())
    ready = trio.Event()

    def shown(tool_return: str) -> None:
        # what a file tool answered, as the model is shown it: named files must be completed
        check_search(log, tool_return, Op("tool result", -1), store=log.store())

    def serve(admin: bool = False) -> Any:
        async def node_main(node: Node) -> None:
            if node.name in plan.inflight:  # the op of its crashed incarnation is lost
                lost = plan.inflight.pop(node.name)
                log.failures.append(f"{lost.kind} {lost.n}: lost in a crash")
            async with open_agent_node(
                open_kv(node, host=db),
                sim_ports(node),
                node_id=node.name,
                llm=SimLlmClient(FilesPolicy(shown), timing=LlmTiming()),
                options=SERVICE,
                observer=kelpie_dst.log,
                **coherence_options(ctx, db),
            ) as service:
                if admin:
                    chunk = ctx.rng("uploads/chunk").randint(60, 400)
                    await _setup(service, log, chunk)
                    ready.set()
                    return
                await ready.wait()
                await _client(service, node, log, plan, ctx.rng(f"client/{node.name}"))

        return node_main

    ctx.sim.add_node("admin", serve(admin=True))
    await ready.wait()
    for name in ctx.topology.nodes:
        ctx.sim.add_node(name, serve())
    plan.queue.extend(_plan(ctx, log))
    while plan.busy():
        await trio.sleep(0.5)
    if ctx.heal_at is not None and ctx.now() < ctx.heal_at:
        await trio.sleep_until(ctx.heal_at)
    await _settle(ctx, log)
    # every node is up now: the agent's file tools must see exactly the completed files
    plan.queue.extend(Op("final", n) for n in sorted(log.acked))
    while plan.busy():
        await trio.sleep(0.5)
    log.snapshot = snapshot(log.store())  # what the oracle judges
    ctx.metric("uploads.acked", len(log.acked))
    ctx.metric("uploads.deleted", len(log.deleted))
    ctx.metric("uploads.failures", len(log.failures))
    for status, count in sorted(log.statuses().items()):
        ctx.metric(f"uploads.{status}", count)
    ctx.metric("uploads.searches", log.searches)
    kelpie_dst.log("uploads.failures", failures="; ".join(log.failures))


async def _settle(ctx: WorkloadContext, log: UploadLog) -> None:
    """Wait up to ``grace`` for every acknowledged upload to finish processing."""
    with contextlib.suppress(trio.TooSlowError), trio.fail_after(float(ctx.params["grace"])):
        while log.unfinished():
            await trio.sleep(1.0)
    log.stuck = log.unfinished()


@invariant
def uploads_never_half_indexed(ctx: WorkloadContext) -> None:
    """Every acknowledged upload ends completed with exactly its passages, or error with a
    reason; deleted files leave nothing; file tools see completed files only. See
    ``_agent_upload_checks.check``."""
    problems = check(ctx.state["uploads"])
    assert not problems, "; ".join(problems[:5])
