"""The contract walker's probes (``contract_probes``; apiW, session 26).

Shapes no other scenario made, each read the way a letta-client user reads it, logged in a
:class:`~._contract_probes_checks.ProbeLog` and judged by the pure checks of
:mod:`._contract_probes_checks`:

1. **A cancel of one conversation while another thread runs.** A background run is started
   in the contract agent's own history (``/messages/async``) and, at once, a fresh
   conversation of the agent (no runs of its own) is cancelled through the same node: the
   cancel must ask no run to stop, and the history's run must not end ``cancelled``.
2. **A long passage searched for its last word.** A passage of about 1,900 characters whose
   only rare word is its last one, next to four short ones sharing nothing with that word,
   is searched for it through the agent's archival search and the global passage search: it
   must come first (an embedding of the first few hundred characters only misses it); and
   searched with ``top_k`` 0 (nothing) and 1 (that passage alone).
3. **A file deleted, then read at once.** Two small files are uploaded to a folder of the
   probes, each deleted, and right after each acknowledged delete retrieved (404 wanted) and
   looked for in the folder's list; the same for two MCP servers (SSE: stored, never
   connected to) and two custom tools, and their lists.

Every request goes through :meth:`ContractWalker._raw` (another node after a 5xx or a cut
connection); the 500s any of them met are judged on the server side (``no_internal_errors``).
"""

from __future__ import annotations

from typing import Any

import trio

from ._agent_contract_checks import StatusSeen
from ._contract_probes_checks import CancelSeen, DeleteSeen, ProbeLog, RankSeen, SizeSeen

__all__ = ["LONG_TEXT", "WORD", "probe_all"]

WORD = "kelpzenith"
"""The word only the long passage holds (its last), and what the searches look for."""
LONG_TEXT = "the tide pool holds " * 95 + WORD + "."
"""About 1,900 characters: the searched word far past any window of a few hundred."""
OTHERS = ("coral reef at dawn", "sand dune and gull", "moor fog over the cove", "rock and surf")
"""Passages sharing no word and no piece of one with :data:`WORD`."""
FOLDER = "contract-probes"
POLLS = 40


async def _json(walker: Any, method: str, path: str, **kwargs: Any) -> Any:
    got = await walker._raw(method, path, **kwargs)
    if got is None or got.status_code != 200:
        return None
    return got.json()


async def probe_all(walker: Any, log: ProbeLog) -> None:
    agent: str = walker.agent
    await _cancel(walker, log, agent)
    await _ranks(walker, log, agent)
    await _deletes(walker, log)
    await _server_deletes(walker, log)
    await _tool_deletes(walker, log)


async def _cancel(walker: Any, log: ProbeLog, agent: str) -> None:
    made = await _json(
        walker, "POST", "/v1/conversations/", params={"agent_id": agent}, body={"summary": "probe"}
    )
    if not isinstance(made, dict):
        return
    conversation = str(made["id"])
    body = {"messages": [{"role": "user", "content": "a probe note to run on (mark-a905)"}]}
    run = await _json(walker, "POST", f"/v1/agents/{agent}/messages/async", body=body)
    if not isinstance(run, dict):
        return
    got = await walker._raw("POST", f"/v1/conversations/{conversation}/cancel")
    asked = None
    if got is not None and got.status_code == 200:
        asked = int(got.json().get("cancelled") or 0)
    stop: str | None = None
    for _ in range(POLLS):
        seen = await _json(walker, "GET", f"/v1/runs/{run['id']}")
        if isinstance(seen, dict) and seen.get("status") != "running":
            stop = str(seen.get("stop_reason"))
            break
        await trio.sleep(0.5)
    log.cancels.append(CancelSeen(conversation, 0, asked, str(run["id"]), stop))


async def _ranks(walker: Any, log: ProbeLog, agent: str) -> None:
    path = f"/v1/agents/{agent}/archival-memory"
    made = await _json(walker, "POST", path, body={"text": LONG_TEXT})
    if not isinstance(made, list) or not made:
        return
    want = str(made[0]["id"])
    for text in OTHERS:
        await walker._raw("POST", path, body={"text": text})
    found = await _json(walker, "GET", f"{path}/search", params={"query": WORD, "top_k": 5})
    if isinstance(found, dict):
        got = tuple(str(r["id"]) for r in found.get("results") or ())
        log.ranks.append(RankSeen("the agent's archival search", want, got))
    for top_k in (0, 1):  # the smallest searches: nothing, then the best one alone
        what = f"the agent's archival search top_k={top_k}"
        answer = await walker._raw("GET", f"{path}/search", params={"query": WORD, "top_k": top_k})
        if answer is None:
            continue
        walker.log.statuses.append(StatusSeen(f"GET {what}", 200, answer.status_code))
        found = answer.json() if answer.status_code == 200 else None
        if isinstance(found, dict):
            got = tuple(str(r["id"]) for r in found.get("results") or ())
            log.sizes.append(SizeSeen(what, top_k, got))
            if top_k:
                log.ranks.append(RankSeen(what, want, got))
    body = {"query": WORD, "agent_id": agent, "limit": 5}
    hits = await _json(walker, "POST", "/v1/passages/search", body=body)
    if isinstance(hits, list):
        got = tuple(str(h["passage"]["id"]) for h in hits)
        log.ranks.append(RankSeen("the passage search", want, got))


async def _folder(walker: Any) -> str | None:
    for _ in range(3):
        got = await walker._raw("POST", "/v1/folders/", body={"name": FOLDER})
        if got is not None and got.status_code == 200:
            return str(got.json()["id"])
        found = await _json(walker, "GET", "/v1/folders/", params={"name": FOLDER, "limit": 1})
        if found:
            return str(found[0]["id"])
    return None


async def _deletes(walker: Any, log: ProbeLog) -> None:
    folder = await _folder(walker)
    if folder is None:
        return
    for k in range(2):
        name = f"probe-{k}.txt"
        text = f"probe file {k}: kelp and tide\n" * 20
        made = await _json(
            walker,
            "POST",
            f"/v1/folders/{folder}/upload",
            params={"duplicate_handling": "skip"},
            files={"file": (name, text.encode("ascii"), "text/plain")},
        )
        if not isinstance(made, dict):
            continue
        file_id = str(made["id"])
        await _delete_and_read(
            walker,
            log,
            f"file {name} ({file_id})",
            file_id,
            (f"/v1/folders/{folder}/{file_id}", f"/v1/folders/{folder}/files/{file_id}"),
            f"/v1/folders/{folder}/files",
            {"limit": 1000},
        )


async def _delete_and_read(
    walker: Any,
    log: ProbeLog,
    what: str,
    thing: str,
    paths: tuple[str, str],
    listing: str,
    params: dict[str, Any] | None = None,
) -> None:
    """Delete ``thing`` (``paths``: where to delete it and where to read it); once the delete
    is acknowledged, read it and its list at once."""
    gone = await walker._raw("DELETE", paths[0])
    if gone is None or gone.status_code >= 300:
        return
    got = await walker._raw("GET", paths[1])
    listed = await _json(walker, "GET", listing, params=params)
    log.deletes.append(
        DeleteSeen(
            what,
            got.status_code if got is not None else 0,
            None if listed is None else any(str(x["id"]) == thing for x in listed),
        )
    )


async def _server_deletes(walker: Any, log: ProbeLog) -> None:
    """Two MCP servers (SSE: stored, never connected to) made, each deleted and read at once."""
    for k in range(2):
        config = {"mcp_server_type": "sse", "server_url": f"http://probe-{k}.invalid:9/sse"}
        body = {"server_name": f"probe-mcp-{k}", "config": config}
        made = await _json(walker, "POST", "/v1/mcp-servers/", body=body)
        if not isinstance(made, dict):
            continue
        server = str(made["id"])
        where = f"/v1/mcp-servers/{server}"
        what = f"mcp server probe-mcp-{k} ({server})"
        await _delete_and_read(walker, log, what, server, (where, where), "/v1/mcp-servers/")


TOOL_SOURCE = '''def probe_double_{k}(x: int) -> int:
    """Double a number.

    Args:
        x: the number to double.
    """
    return 2 * x
'''


async def _tool_deletes(walker: Any, log: ProbeLog) -> None:
    """Two custom tools made, each deleted and read at once (by id, and listed by name)."""
    for k in range(2):
        made = await _json(
            walker, "POST", "/v1/tools/", body={"source_code": TOOL_SOURCE.format(k=k)}
        )
        if not isinstance(made, dict):
            continue
        tool, name = str(made["id"]), f"probe_double_{k}"
        where = f"/v1/tools/{tool}"
        await _delete_and_read(
            walker, log, f"tool {name} ({tool})", tool, (where, where), "/v1/tools/", {"name": name}
        )
