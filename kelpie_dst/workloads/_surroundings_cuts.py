"""Requests cut by a crash of the node serving them, and the lists scoped to one agent
(``agent_surroundings`` with ``cut_calls`` and ``scoped_lists``; svcV, session 25).

A request that takes several steps on the server (delete an archive: detach it from each agent,
then delete it; search every agent's archival memory: one search per agent) can be cut part-way
when the node serving it dies. A user then sees one of two things, and only two: the request
failed (and a retry finishes it), or it answered the whole truth. So, with ``cut_calls``:

* **A cut request leaves nothing half-done that its retry cannot finish.** The archive's and
  the folder's delete are first sent to nodes that crash after 1, 3, 9, ... milliseconds
  (tripling up to 2.187 s, until one attempt finishes before its crash; so some crash lands
  between any two steps of the request whose times differ by more than a factor of three),
  then retried until done. Judged by the checks the workload already makes after a delete:
  no agent holds the deleted archive or folder, and nothing lists it.
* **A cut request that answers answers everything.** The searches over every agent's archival
  memory and the lists of an identity's agents are sent the same way; every answer that comes
  back, cut or not, is judged as any other search or list: a partial answer (some agent's part
  missing because the node died before asking it) is a wrong answer, not a failure.

With ``scoped_lists``, the lists scoped to one agent are read after every attach, detach and
delete of the archive and the folder (``archives.list(agent_id=...)``, ``agents.folders``):
each holds exactly what the client attached to that agent, nothing of another agent's, nothing
deleted. And the agent's files are walked in pages of 1, 2 and all (``agents.files.list``):
the pages put together are the whole list, and a page says more follow exactly when a later
page holds some.

With ``content_polls``, each upload's content is read every few milliseconds while it is
processed: each read is no content yet or the whole text it ends with, never part of it (a
partial result taken as complete). All are judged by ``surroundings_consistent``
(``check_scoped``, ``check_file_pages``, ``check_content_reads`` of ``_surroundings_checks``).

Every draw comes from the stream ``surroundings-cuts``, so with both params off nothing moves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from kelpie_agent.service import AgentService
from kelpie_agent.service import _folders as folders

if TYPE_CHECKING:
    from .agent_surroundings import Surroundings

__all__ = ["LADDER", "content_polls", "cut_attempts", "file_pages", "scoped_entry"]

T = TypeVar("T")
LADDER = (0.001, 0.003, 0.009, 0.027, 0.081, 0.243, 0.729, 2.187)
"""Seconds after which the serving node crashes, attempt by attempt: a request that reads
storage only takes milliseconds, one that asks agents' actors up to seconds."""
RESTART_AFTER = 1.0
GIVE_UP = 60.0  # an attempt still waiting this long after its node crashed is dropped


async def _crashing(
    run: Surroundings, call: Callable[[AgentService], Awaitable[T]], delay: float
) -> tuple[bool, list[T]]:
    """``call`` on a random live server node that crashes ``delay`` seconds in, unless the
    call is over by then: (whether it was cut, [its answer] or [] if it failed)."""
    rng = run.ctx.rng("surroundings-cuts")
    services = run.client.services
    live = [name for name, s in sorted(services.items()) if s.running]
    if not live:
        return False, []
    name = rng.choice(live)
    service = services[name]
    answer: list[T] = []
    finished = trio.Event()

    async def attempt() -> None:
        try:
            answer.append(await call(service))
        except Exception as error:  # a service error, or its node's I/O refused: it failed
            run.ctx.sim.trace_event("workload.cut_failed", error=type(error).__name__)
        finally:
            finished.set()

    cut = False
    with trio.move_on_after(delay + GIVE_UP):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(attempt)
            with trio.move_on_after(delay):
                await finished.wait()
            if not finished.is_set():
                cut = True
                node = run.ctx.sim.node(name)
                run.ctx.sim.trace_event("workload.cut", node=name, delay=delay)
                run.ctx.sim.crash(node)
                run.ctx.sim.restart(node, after=RESTART_AFTER)
            await finished.wait()
    return cut, answer


async def cut_attempts(run: Surroundings, call: Callable[[AgentService], Awaitable[T]]) -> list[T]:
    """Attempts of ``call`` cut by ever later crashes, until one finishes before its crash:
    every answer that came back (the caller judges each, and then sends it as usual)."""
    answers: list[T] = []
    for delay in LADDER:
        cut, answer = await _crashing(run, call, delay)
        answers += answer
        if not cut:
            break
        await trio.sleep(RESTART_AFTER)
    return answers


def scoped_entry(
    what: str, want: Iterable[str], got: Iterable[Any]
) -> tuple[str, frozenset[str], frozenset[str]]:
    return what, frozenset(want), frozenset(str(g) for g in got)


async def file_pages(run: Surroundings, agent: str) -> None:
    """With ``scoped_lists``: the agent's files walked in pages of 1, 2 and all of them, each
    page's "more follow" flag logged with it (judged as the schedules' pages are)."""
    whole, _ = await run.client.until_done(lambda s: folders.agent_files(s, agent, limit=50))
    listed = [f.record.id for f in whole]
    for size in sorted({1, 2, max(1, len(listed))}):
        more: list[bool] = []
        pages: list[list[str]] = []
        after: str | None = None
        while len(pages) < 50:
            page, further = await run.client.until_done(
                lambda s, a=after, n=size: folders.agent_files(s, agent, after=a, limit=n)  # type: ignore[misc]
            )
            more.append(further)
            pages.append([f.record.id for f in page])
            if not further or not page:
                break
            after = page[-1].record.id
        run.log.file_pages.append((f"{agent}'s files", size, more, pages, listed))


async def content_polls(run: Surroundings, folder_id: str, file_id: str) -> None:
    """With ``content_polls``: an upload's content read every few milliseconds while it is
    processed, until it is ``completed`` (or ``error``, or 200 reads): each read is no content
    yet (None) or the whole text it ends with, never a part of it, never an empty text."""
    seen: list[tuple[str, str | None]] = []
    for _ in range(200):
        try:
            record, content = await run.client.once(
                lambda s: _file_and_content(s, folder_id, file_id)
            )
        except Exception:  # a node down, storage refusing: read again
            await trio.sleep(0.01)
            continue
        seen.append((record.processing_status, content))
        if record.processing_status in ("completed", "error"):
            break
        await trio.sleep(0.002)
    run.log.content_reads.append((file_id, seen))


async def _file_and_content(s: AgentService, folder_id: str, file_id: str) -> tuple[Any, Any]:
    record = await folders.get_file(s, folder_id, file_id)
    return record, await folders.file_content(s, record)
