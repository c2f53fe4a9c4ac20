"""An archive past one storage page (agent_loop's ``bulk`` agents, session 14).

Every listing of an agent's keys is read in pages (``Reader.scan_all``: 500 rows a page), and
an activation loads the agent's archival memory that way. No other world stores 500 rows under
one agent, so a scan that stops after a full page was never seen. A ``bulk`` agent gets 501 to
540 passages, each with a word of its own, written with no fault in the way (an insert is not
retried once its outcome is unknown); then the client waits past the dispatcher's idle timeout,
so the next request activates the agent afresh and it loads its archive from storage.

Properties (problems go to the loop's log, judged by ``loop_contract``):

* **The listing is whole after a reload.** The passages, listed in pages of 1000 oldest first,
  are exactly the ones inserted, in insertion order.
* **Search sees every passage.** A search for the newest passage's own word finds it first.
* **A passage inserted after the reload is a new one.** It gets an id of its own, and the
  listing then holds every earlier passage and it, in order (a sequence number taken from a
  partial load would overwrite or misplace one).
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from ._agent_schedules import Client

__all__ = ["BULK_MIN", "bulk_archive"]

BULK_MIN = 501  # one more than a storage page (kelpie_agent.agent._retry._PAGE)


def _word(i: int) -> str:
    return f"kelpbulk{i}x"


async def bulk_archive(
    client: Client, agent: str, idle: float, problem: Callable[[str], None]
) -> int:
    """Fill ``agent``'s archive past a page, let it go idle, and judge what it reads back;
    the number of passages inserted."""
    n = BULK_MIN + client.rng.randint(0, 39)
    ids: list[str] = []
    for i in range(n):
        text = f"bulk note {i}: {_word(i)}"
        inserted = await client.until_done(lambda s: s.insert_passage(agent, text))  # noqa: B023
        ids.extend(p.id for p in inserted)
    await trio.sleep(idle + 2.0)  # the activation goes idle: the next request loads afresh
    listed = await _listed(client, agent)
    if listed != ids:
        problem(f"bulk {agent}: {len(ids)} passages inserted, {len(listed)} listed after a reload")
        return n
    newest = _word(n - 1)
    hits = await client.until_done(lambda s: s.search_passages(agent, newest, top_k=3))
    if not hits or newest not in hits[0].passage.text:
        first = hits[0].passage.text if hits else "nothing"
        problem(f"bulk {agent}: a search for {newest!r} found {first!r} first")
    extra = await client.until_done(lambda s: s.insert_passage(agent, f"bulk last: {_word(n)}"))
    again = await _listed(client, agent)
    want = ids + [p.id for p in extra]
    if len(set(want)) != len(want) or again != want:
        problem(
            f"bulk {agent}: after one more insert {len(again)} passages are listed, "
            f"{len(want)} expected ({len(set(want))} distinct ids)"
        )
    return n


async def _listed(client: Client, agent: str) -> list[str]:
    page = await client.until_done(lambda s: s.list_passages(agent, limit=1000))
    return [p.id for p in page]
