"""The contract walker's edge probes (``contract_edges``): limits at both ends of every list
and search of one agent, and filters that scope a list to one agent (apiU, session 24).

``list_parameters_documented`` read six top-level lists at ``limit`` 0, 1000 and 1001; the
lists below an agent (its core-memory blocks, tools, archival memory, folders, a run's messages
and steps, a block's agents, a step's messages) and the two searches (``top_k`` of an agent's
archival search, ``limit`` of ``/v1/passages/search``) were read only at the limits a client
happened to draw. Here each is read at 0 (nothing), at 1001 (a 422) and at 1000 against its
documented default (the same ids, when it holds fewer), as docs/http-api.md, "Pagination",
says of every list. And a list filtered by ``agent_id`` (steps, runs, the global passage
search) or an agent's own search holds only that agent's items: the walker first stores two
passages in its agent and one in another agent, with a word the searches look for, so a
filter that is dropped or widened answers something the client can tell is not its agent's.
The reads go through :meth:`ContractWalker._raw` and are logged as the walker's other list
reads (``ListSeen``, ``StatusSeen``) plus :class:`ScopeSeen`, judged by ``check_lists``.
"""

from __future__ import annotations

from typing import Any

from ._agent_contract_checks import ListSeen, ScopeSeen, StatusSeen

__all__ = ["WORD", "probe_edges"]

WORD = "kelpedge"
"""The word every probe passage holds and every probe search looks for."""

# (what, path, extra query, documented default limit) of one agent's lists; {agent}, {run},
# {step}, {block} and {other} (an agent of the clients: the contract agent has no tools) are
# filled in (a list whose id is unknown is skipped).
SUB_LISTS: tuple[tuple[str, str, dict[str, Any], int], ...] = (
    ("the agent's core-memory blocks", "/v1/agents/{agent}/core-memory/blocks", {}, 50),
    ("the agent's tools", "/v1/agents/{agent}/tools", {}, 50),
    ("the agent's archival memory", "/v1/agents/{agent}/archival-memory", {}, 100),
    ("the agent's folders", "/v1/agents/{agent}/folders", {}, 50),
    ("a run's messages", "/v1/runs/{run}/messages", {}, 100),
    ("a run's steps", "/v1/runs/{run}/steps", {}, 100),
    ("a step's messages", "/v1/steps/{step}/messages", {}, 100),
    ("a block's agents", "/v1/blocks/{block}/agents", {}, 50),
    ("another agent's tools", "/v1/agents/{other}/tools", {}, 50),
)


async def _json(walker: Any, method: str, path: str, **kwargs: Any) -> Any:
    got = await walker._raw(method, path, **kwargs)
    if got is None or got.status_code != 200:
        return None
    return got.json()


async def _status(walker: Any, what: str, method: str, path: str, want: int, **kw: Any) -> Any:
    """Send it, log its status against ``want``; the JSON body when it answered 200."""
    got = await walker._raw(method, path, **kw)
    if got is None:
        return None
    detail = False
    try:
        body = got.json()
        detail = isinstance(body, dict) and isinstance(body.get("detail"), str)
    except ValueError:
        body = None
    walker.log.statuses.append(StatusSeen(what, want, got.status_code, detail))
    return body if got.status_code == 200 else None


async def _insert(walker: Any, agent: str, text: str) -> None:
    await walker._raw("POST", f"/v1/agents/{agent}/archival-memory", body={"text": text})


async def probe_edges(walker: Any) -> None:
    agent: str = walker.agent
    agents = await _json(walker, "GET", "/v1/agents/", params={"limit": 1000, "order": "asc"})
    others = [str(a["id"]) for a in agents or () if str(a["id"]) != agent]
    await _insert(walker, agent, f"{WORD} one of the contract agent's passages")
    await _insert(walker, agent, f"{WORD} two, another passage of the contract agent")
    if others:
        await _insert(walker, others[0], f"{WORD} a passage of another agent")
    ids = await _fill_ids(walker, agent)
    ids["other"] = others[0] if others else ""
    for what, path_format, query, default in SUB_LISTS:
        if any(
            "{" + k + "}" in path_format and not ids.get(k)
            for k in ("run", "step", "block", "other")
        ):
            continue
        path = path_format.format(**ids)
        await _limits(walker, what, path, query, default)
    await _searches(walker, agent)
    await _scopes(walker, agent)


async def _fill_ids(walker: Any, agent: str) -> dict[str, str]:
    ids = {"agent": agent, "block": walker.block or "", "run": "", "step": ""}
    runs = await _json(walker, "GET", "/v1/runs/", params={"agent_id": agent, "limit": 1})
    if runs:
        ids["run"] = str(runs[0]["id"])
        steps = await _json(walker, "GET", f"/v1/runs/{ids['run']}/steps", params={"limit": 1})
        if steps:
            ids["step"] = str(steps[0]["id"])
    return ids


async def _limits(walker: Any, what: str, path: str, query: dict[str, Any], default: int) -> None:
    await walker._same(
        f"{what} limit=1000 vs the default limit {default} (fewer items than that)",
        path,
        query,
        {**query, "limit": 1000},
        under=default,
    )
    await _status(
        walker, f"GET {path} limit=1000", "GET", path, 200, params={**query, "limit": 1000}
    )
    none = await _status(
        walker, f"GET {path} limit=0", "GET", path, 200, params={**query, "limit": 0}
    )
    if isinstance(none, list):
        got = tuple(str(item.get("id", item)) for item in none)
        walker.log.lists.append(ListSeen(f"{what} limit=0", (), got))
    await _status(
        walker, f"GET {path} limit=1001", "GET", path, 422, params={**query, "limit": 1001}
    )


async def _searches(walker: Any, agent: str) -> None:
    path = f"/v1/agents/{agent}/archival-memory/search"
    for top_k, want in ((0, 200), (1001, 422)):
        found = await _status(
            walker,
            f"GET {path} top_k={top_k}",
            "GET",
            path,
            want,
            params={"query": WORD, "top_k": top_k},
        )
        if isinstance(found, dict):
            got = tuple(str(r["id"]) for r in found.get("results") or ())
            walker.log.lists.append(ListSeen(f"the agent's archival search top_k={top_k}", (), got))
    for limit, want in ((0, 200), (1001, 422)):
        body = {"query": WORD, "agent_id": agent, "limit": limit}
        found = await _status(
            walker,
            f"POST /v1/passages/search limit={limit}",
            "POST",
            "/v1/passages/search",
            want,
            body=body,
        )
        if isinstance(found, list):
            got = tuple(str(item["passage"]["id"]) for item in found)
            walker.log.lists.append(ListSeen(f"the passage search limit={limit}", (), got))


async def _scopes(walker: Any, agent: str) -> None:
    """Lists filtered by ``agent_id`` and the agent's own search hold only its items."""
    for path in ("/v1/steps/", "/v1/runs/"):
        found = await _json(walker, "GET", path, params={"agent_id": agent, "limit": 1000})
        if isinstance(found, list):
            owners = tuple(str(item.get("agent_id")) for item in found)
            walker.log.scoped.append(ScopeSeen(f"GET {path}?agent_id={agent}", agent, owners))
    body = {"query": WORD, "agent_id": agent, "limit": 1000}
    found = await _json(walker, "POST", "/v1/passages/search", body=body)
    if isinstance(found, list):
        owners = tuple(str((item.get("metadata") or {}).get("agent_id")) for item in found)
        walker.log.scoped.append(
            ScopeSeen(f"POST /v1/passages/search agent_id={agent}", agent, owners)
        )
    own = await _json(walker, "GET", f"/v1/agents/{agent}/archival-memory", params={"limit": 1000})
    hits = await _json(
        walker,
        "GET",
        f"/v1/agents/{agent}/archival-memory/search",
        params={"query": WORD, "top_k": 1000},
    )
    again = await _json(
        walker, "GET", f"/v1/agents/{agent}/archival-memory", params={"limit": 1000}
    )
    if isinstance(own, list) and isinstance(hits, dict) and own == again:
        mine = {str(p["id"]) for p in own}
        owners = tuple(
            agent if str(r["id"]) in mine else f"not {agent}'s ({r['id']})"
            for r in hits.get("results") or ()
        )
        walker.log.scoped.append(ScopeSeen(f"GET {agent}'s archival search", agent, owners))
