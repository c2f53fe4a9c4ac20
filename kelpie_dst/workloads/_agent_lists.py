"""Every list, every way: the LIST oracle of the agent workload (``list_walks``, HTTP only).

A client that pages a list must see each item exactly once, in the list's order, whatever the
order it asks for and whichever cursor it follows. Letta's cursors are relative to the
*listing* order (docs/http-api.md): ``after=X`` gives the items that follow X, ``before=X``
the ``limit`` items that precede it, nearest X, still in listing order. So a list read

* oldest first (``asc``) or newest first (``desc``),
* forwards (``after=<last id of the page>``, from the start) or backwards (``before=<first id
  of the page>``, from the last item),
* in pages smaller than the list,

is always the same sequence (reversed for ``desc``), with no gap, no repeat, no page longer
than its ``limit``, and exactly the items that exist. With ``list_walks = p`` (the fraction of
agents), after the final read-back, each chosen agent gets one of its lists walked the four ways
in pages of a random size under its length: its memory blocks, its tools, its runs, its
archival passages, or (with ``conversations``) its conversations; once per run, the agents list
too. The reference is the list read in one page, which must itself agree with the workload's
model of what exists:

* blocks: the four labels the agent was created with, in that (attachment) order;
* tools: exactly the tools it was created with, in that order;
* runs: every acknowledged send's run, in the order they were sent, and no other agent's;
* passages: the passages the read-back found (read in small ``after`` pages), in that order;
* conversations: every conversation the agent acknowledged;
* agents: every agent whose create was acknowledged, and none the workload did not plan.

:func:`check_walks` is the pure checker (``tests/workloads/test_agent_lists.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

import attrs

from ._agent_burst import create_burst
from ._list_order import BY_CREATED_AT, check_sorted

__all__ = ["KINDS", "ListWalker", "Walk", "check_model", "check_walks", "walk"]

KINDS = ("blocks", "tools", "runs", "passages", "conversations")
_MAX_PAGES = 200
_NO_BEFORE = frozenset(["conversations"])  # letta-client's conversations.list has no before

Item = tuple[str, str, datetime | None]
Fetch = Callable[[str, str | None, str | None, int], Awaitable[list[Item]]]
"""``fetch(order, after, before, limit)``: one page, as ``(id, what, created_at)`` (``what``:
the item's label, agent, text: whatever the model checks; ``created_at`` as reported)."""


@attrs.frozen
class Walk:
    """A list read page by page: ``order`` ``asc``/``desc``, following ``cursor``
    (``after``/``before``) in pages of ``size``; ``ids`` in listing order."""

    order: str
    cursor: str
    size: int
    ids: tuple[str, ...]
    longest: int = 0  # the longest page


async def walk(fetch: Fetch, order: str, cursor: str, size: int, last: str | None) -> Walk:
    """Read a list the way the SDK's auto-pagination does. Backwards (``before``) starts
    from ``last`` (the listing's last item in ``order``), which ends the walk's ids."""
    ids: list[str] = []
    longest = 0
    if cursor == "after":
        for _ in range(_MAX_PAGES):
            cursor_id = ids[-1] if ids else None
            page = [item[0] for item in await fetch(order, cursor_id, None, size)]
            ids += page
            longest = max(longest, len(page))
            if len(page) < size or not page or page[-1] == cursor_id:  # (a stuck cursor)
                break
        return Walk(order, cursor, size, tuple(ids), longest)
    if last is None:
        return Walk(order, cursor, size, ())
    anchor = last
    back: list[list[str]] = []
    for _ in range(_MAX_PAGES):
        page = [item[0] for item in await fetch(order, None, anchor, size)]
        back.append(page)
        longest = max(longest, len(page))
        if len(page) < size or not page or page[0] == anchor:  # (a stuck cursor)
            break
        anchor = page[0]
    ids = [i for p in reversed(back) for i in p] + [last]
    return Walk(order, cursor, size, tuple(ids), longest)


def check_walks(what: str, reference: Sequence[str], walks: Sequence[Walk]) -> list[str]:
    """Each walk lists ``reference`` (the list read oldest first in one page), reversed for
    ``desc``: no item twice, none missing, none extra, in order."""
    problems = []
    for w in walks:
        want = list(reference) if w.order == "asc" else list(reference)[::-1]
        got = list(w.ids)
        how = f"{what} read {w.order} by {w.cursor!r} in pages of {w.size}"
        if w.longest > w.size:
            problems.append(f"{how}: a page of {w.longest} items (the limit was {w.size})")
        if got == want:
            continue
        twice = sorted({i for i in got if got.count(i) > 1})
        missing = [i for i in want if i not in got]
        extra = [i for i in got if i not in want]
        detail = []
        if twice:
            detail.append(f"twice {twice}")
        if missing:
            detail.append(f"missing {missing}")
        if extra:
            detail.append(f"not in the list {extra}")
        if not detail:
            detail.append("out of order")
        problems.append(f"{how}: {', '.join(detail)}: got {got}, want {want}")
    return problems


def check_model(
    what: str,
    reference: Sequence[tuple[str, str]],
    *,
    exact: Sequence[str] | None = None,
    must: Sequence[str] = (),
    may: Sequence[str] | None = None,
    ordered: bool = False,
) -> list[str]:
    """The one-page listing (``(id, what)`` oldest first) against the model: its ``what``s
    are ``exact`` (in order), or include every ``must`` (in that order if ``ordered``) and
    nothing outside ``may``."""
    problems = []
    ids = [i for i, _ in reference]
    seen = [w for _, w in reference]
    if len(set(ids)) != len(ids):
        problems.append(f"{what}: an id listed twice in one page: {ids}")
    if exact is not None and seen != list(exact):
        problems.append(f"{what}: lists {seen}, not {list(exact)}")
    lost = [m for m in must if m not in seen]
    if lost:
        problems.append(f"{what}: {lost} not listed ({seen})")
    elif ordered and [w for w in seen if w in must] != list(must):
        problems.append(f"{what}: lists {seen}, not in the order made {list(must)}")
    if may is not None:
        stray = [w for w in seen if w not in may]
        if stray:
            problems.append(f"{what}: lists {stray}, which it does not have")
    return problems


class ListWalker:
    """Walks the lists of a finished agent workload run (see the module docstring)."""

    def __init__(self, clients: Any, fraction: float, threads: Any, burst: int = 0) -> None:
        self.clients = clients
        self.fraction = fraction
        self.threads = threads
        self.burst = burst  # agents created at one instant before the walks (_agent_burst)
        self.burst_acked = 0  # ... of which acknowledged
        self.agents_listed = 0  # agents in the one-page reference read of the agents list
        self.problems: list[str] = []
        self.walks = 0
        self.pages = 0

    async def run(self, plans: Sequence[Any], rng: Any) -> None:
        record = self.clients.record
        created = [
            p
            for p in plans
            if (r := record.requests.get(f"a{p.number} create")) is not None
            and r.outcome == "acked"
            and self.clients.link.server_id(p) is not None
        ]
        if not created:
            return
        state = {"node": rng.choice(self.clients.world.node_names)}
        burst: tuple[list[str], list[str]] = ([], [])
        if self.burst:
            burst = await create_burst(self.clients, self.burst, rng)
            self.burst_acked = len(burst[0])
        await self._agents(plans, created, rng, state, burst)
        for plan in created:
            if rng.random() >= self.fraction:
                continue
            kinds = [k for k in KINDS if k != "conversations" or self._conversations(plan)]
            await self._walk_kind(plan, rng.choice(kinds), rng, state)

    def _conversations(self, plan: Any) -> list[str]:
        if self.threads is None:
            return []
        return list(self.threads.created.get(plan.agent_id, []))

    async def _walk_kind(self, plan: Any, kind: str, rng: Any, state: dict[str, str]) -> None:
        server_id = self.clients.link.server_id(plan)
        what = f"a{plan.number} {kind}"
        fetch = self._fetch(kind, server_id, what, rng, state)
        try:
            await self._check(kind, what, fetch, rng, **self._model(plan, kind, server_id))
        except Exception as error:  # a 404 or a 500 for a cursor the list gave: a problem
            self.problems.append(f"{what}: walking it: {type(error).__name__}: {error}")

    def _model(self, plan: Any, kind: str, server_id: str) -> dict[str, Any]:
        record = self.clients.record
        if kind == "blocks":
            return {"exact": [b.label for b in plan.blocks]}
        if kind == "tools":
            return {"exact": list(plan.tool_ids)}
        if kind == "runs":
            acked = [a.run_id for a in record.acks if a.agent == plan.agent_id and a.run_id]
            # Membership only: runs list by created_at, read from the clock of the node that
            # made the run, and under clock skew an agent's later run (on another node) can
            # carry an earlier time (Dlead7-3); so the order they were sent in is not a rule.
            return {"must": acked, "may_what": server_id}
        if kind == "passages":
            return {"exact": list(record.passages.get(plan.agent_id, []))}
        return {"must": self._conversations(plan), "may_what": None}

    async def _agents(
        self,
        plans: Sequence[Any],
        created: Sequence[Any],
        rng: Any,
        state: dict[str, str],
        burst: tuple[list[str], list[str]] = ([], []),
    ) -> None:
        link = self.clients.link
        planned = [s for p in plans if (s := link.server_id(p)) is not None] + burst[1]
        must = [link.server_id(p) for p in created] + burst[0]
        fetch = self._fetch("agents", None, "agents", rng, state)
        try:
            await self._check("agents", "agents", fetch, rng, must=must, may=planned)
        except Exception as error:
            self.problems.append(f"agents: walking the list: {type(error).__name__}: {error}")

    async def _check(
        self,
        kind: str,
        what: str,
        fetch: Fetch,
        rng: Any,
        *,
        exact: Sequence[str] | None = None,
        must: Sequence[str] = (),
        may: Sequence[str] | None = None,
        may_what: str | None = None,
        ordered: bool = False,
    ) -> None:
        stamped = await fetch("asc", None, None, 1000)
        newest = await fetch("desc", None, None, 1000)
        if kind in BY_CREATED_AT:  # sorted by the created_at values it shows, both ways
            self.problems += check_sorted(what, "asc", [(i, t) for i, _, t in stamped])
            self.problems += check_sorted(what, "desc", [(i, t) for i, _, t in newest])
        reference = [(i, w) for i, w, _ in stamped]
        if kind == "agents":
            self.agents_listed = len(reference)
        if may_what is not None:  # runs: each must be the agent's
            strays = [i for i, w in reference if w != may_what]
            if strays:
                self.problems.append(f"{what}: lists another agent's {strays}")
            reference = [(i, i) for i, _ in reference]
        self.problems += check_model(
            what, reference, exact=exact, must=must, may=may, ordered=ordered
        )
        ids = [i for i, _ in reference]
        self.problems += check_walks(what, ids, [Walk("desc", "after", 1000, _ids(newest))])
        if len(ids) < 2:
            return
        size = rng.randint(1, len(ids) - 1)
        cursors = ("after",) if kind in _NO_BEFORE else ("after", "before")
        walks = [
            await walk(fetch, order, cursor, size, ids[-1] if order == "asc" else ids[0])
            for order in ("asc", "desc")
            for cursor in cursors
        ]
        self.walks += len(walks)
        self.problems += check_walks(what, ids, walks)

    def _fetch(
        self, kind: str, server_id: str | None, what: str, rng: Any, state: dict[str, str]
    ) -> Fetch:
        clients = self.clients

        async def fetch(
            order: str, after: str | None, before: str | None, limit: int
        ) -> list[Item]:
            async def attempt(node: str, _: int) -> list[Item]:
                sdk = clients.link.sdk(node)
                return await _page(sdk, kind, server_id, order, after, before, limit)

            self.pages += 1
            got: list[Item] = await clients._call(
                f"{what} list", server_id or "", attempt, rng, state
            )
            return got

        return fetch


def _ids(page: Sequence[Item]) -> tuple[str, ...]:
    return tuple(item[0] for item in page)


async def _page(
    sdk: Any,
    kind: str,
    agent: str | None,
    order: str,
    after: str | None,
    before: str | None,
    limit: int,
) -> list[Item]:
    """One page of ``kind`` through the real SDK, as ``(id, what, created_at)``."""
    cursors: dict[str, Any] = {"limit": limit}
    if after is not None:
        cursors["after"] = after
    if before is not None:
        cursors["before"] = before
    if kind == "blocks":
        got = await sdk.agents.blocks.list(agent, order=order, **cursors)
        return [(str(b.id), str(b.label), None) for b in got.items]
    if kind == "tools":
        got = await sdk.agents.tools.list(agent, order=order, **cursors)
        return [(str(t.id), str(t.id), None) for t in got.items]
    if kind == "runs":
        got = await sdk.runs.list(agent_id=agent, order=order, **cursors)
        return [(str(r.id), str(r.agent_id), r.created_at) for r in got.items]
    if kind == "passages":
        got = await sdk.agents.passages.list(agent, ascending=order == "asc", **cursors)
        items = got if isinstance(got, list) else got.items
        return [(str(p.id), str(p.text), p.created_at) for p in items]
    if kind == "conversations":
        got = await sdk.conversations.list(agent_id=agent, order=order, **cursors)
        return [(str(c.id), str(c.id), c.created_at) for c in got]
    got = await sdk.agents.list(order=order, **cursors)
    return [(str(a.id), str(a.id), a.created_at) for a in got.items]
