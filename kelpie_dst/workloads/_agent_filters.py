"""Filtered agent listings against the model: the FILTER oracle (``agent_tags``, via HTTP).

With ``agent_tags`` on, agent ``n`` is created with the tags :func:`plan_tags` gives it (no
random draw: the same two tags whatever the seed). After the final read-back the agents list
is read once, oldest first in one page (the *reference*), and checked against the model:

* every agent whose create was acknowledged is listed under its name, with exactly its planned
  tags, and no agent the workload did not plan; a name is listed **once**, or at most once
  more per create attempt that got no answer (``_agent_creates``: a late attempt may land
  after the client's lookup);

then every filter the workload uses is read in pages of one or two, following ``after``
cursors, oldest and newest first, and must list exactly the reference's agents the filter
accepts, in the reference's order (reversed for ``desc``):

* ``name=agent-<n>`` for each planned agent (how a client finds its agent after an ambiguous
  create: with ``limit=1``, first page only, as the workload's create retry does);
* ``query_text`` (a case-insensitive part of the name);
* ``tags`` (any of them) and ``tags`` with ``match_all_tags``.

A listing that applies its page size before its filter, or a filter off by one, lists fewer,
more or other agents than the model filtered. :func:`check_filtered` and
:func:`check_reference` are the pure checkers (``tests/workloads/test_agent_filters.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

__all__ = ["Filter", "FilterWalker", "Listed", "check_filtered", "check_reference", "plan_tags"]


def plan_tags(number: int) -> tuple[str, ...]:
    """Agent ``number``'s tags: two groups that overlap differently for any two agents."""
    return (f"g{number % 2}", f"h{number % 3}")


@attrs.frozen
class Listed:
    """An agent as a listing showed it."""

    id: str
    name: str
    tags: tuple[str, ...]


@attrs.frozen
class Filter:
    """One filter: what it is called, the SDK's keyword arguments, and the model's predicate."""

    label: str
    params: Mapping[str, Any] = attrs.field(hash=False)
    keep: Callable[[Listed], bool] = attrs.field(hash=False)


def filters(names: Sequence[str]) -> list[Filter]:
    """Every filter the workload reads: each planned name, a name part, tags any and all."""
    out = [Filter(f"name={n}", {"name": n}, _named(n)) for n in names]
    out.append(
        Filter("query_text=AGENT-1", {"query_text": "AGENT-1"}, lambda a: "agent-1" in a.name)
    )
    for tags, every in ((("g0",), False), (("h1", "h2"), False), (("g1", "h0"), True)):
        label = f"tags={','.join(tags)}" + (" (all)" if every else "")
        params = {"tags": list(tags), "match_all_tags": every}
        out.append(Filter(label, params, _tagged(tags, every)))
    return out


def _named(name: str) -> Callable[[Listed], bool]:
    return lambda a: a.name == name


def _tagged(tags: Sequence[str], every: bool) -> Callable[[Listed], bool]:
    wanted = set(tags)

    def keep(a: Listed) -> bool:
        have = wanted & set(a.tags)
        return have == wanted if every else bool(have)

    return keep


def check_reference(
    reference: Sequence[Listed],
    model: Mapping[str, tuple[str, ...]],
    acked: Sequence[str],
    blind: Mapping[str, int],
) -> list[str]:
    """The one-page listing against the model (``model``: name -> planned tags; ``acked``:
    the names whose create was acknowledged; ``blind``: name -> attempts without an answer)."""
    problems = []
    ids = [a.id for a in reference]
    if len(set(ids)) != len(ids):
        problems.append(f"agents list: an id listed twice in one page: {ids}")
    for a in reference:
        if a.name not in model:
            problems.append(f"agents list: {a.id} named {a.name!r}, which the workload never made")
        elif tuple(sorted(a.tags)) != tuple(sorted(model[a.name])):
            want = list(model[a.name])
            problems.append(f"agents list: {a.name} has tags {list(a.tags)}, not {want}")
    for name in model:
        n = sum(a.name == name for a in reference)
        if name in acked and n == 0:
            problems.append(f"agents list: {name} was acknowledged but is not listed")
        if n > 1 + blind.get(name, 0):
            problems.append(
                f"agents list: {name} was created once but is listed {n} times "
                f"({blind.get(name, 0)} create attempts got no answer)"
            )
    return problems


def check_filtered(
    reference: Sequence[Listed], flt: Filter, order: str, size: int, got: Sequence[str]
) -> list[str]:
    """A filtered listing read in pages of ``size``: exactly the reference's agents that
    ``flt`` keeps, in its order (reversed for ``desc``)."""
    want = [a.id for a in reference if flt.keep(a)]
    if order == "desc":
        want.reverse()
    if list(got) == want:
        return []
    return [f"agents list {flt.label} ({order}, pages of {size}): got {list(got)}, want {want}"]


class FilterWalker:
    """Reads the reference and every filter of a finished run (see the module docstring)."""

    def __init__(self, clients: Any, blind: Mapping[str, int]) -> None:
        self.clients = clients
        self.blind = blind
        self.problems: list[str] = []
        self.reads = 0

    async def run(self, plans: Sequence[Any], rng: Any) -> None:
        record = self.clients.record
        model = {f"agent-{p.number}": plan_tags(p.number) for p in plans}
        acked = [
            f"agent-{p.number}"
            for p in plans
            if (r := record.requests.get(f"a{p.number} create")) is not None
            and r.outcome == "acked"
        ]
        state = {"node": rng.choice(self.clients.world.node_names)}
        reference = await self._page(rng, state, {}, "asc", None, 1000)
        self.problems += check_reference(reference, model, acked, self.blind)
        for flt in filters(sorted(model)):
            if flt.label.startswith("name="):  # the create retry's lookup: one page of one
                got = await self._page(rng, state, flt.params, "asc", None, 1)
                self.problems += _first(reference, flt, got)
            for order in ("asc", "desc"):
                size = int(rng.choice((1, 2)))
                ids = await self._walk(rng, state, flt.params, order, size)
                self.problems += check_filtered(reference, flt, order, size, ids)

    async def _walk(
        self, rng: Any, state: dict[str, str], params: Mapping[str, Any], order: str, size: int
    ) -> list[str]:
        ids: list[str] = []
        for _ in range(100):
            page = await self._page(rng, state, params, order, ids[-1] if ids else None, size)
            ids += [a.id for a in page]
            if len(page) < size:
                break
        return ids

    async def _page(
        self,
        rng: Any,
        state: dict[str, str],
        params: Mapping[str, Any],
        order: str,
        after: str | None,
        limit: int,
    ) -> list[Listed]:
        clients = self.clients
        kwargs = dict(params, order=order, limit=limit)
        if after is not None:
            kwargs["after"] = after

        async def attempt(node: str, _: int) -> list[Listed]:
            got = await clients.link.sdk(node).agents.list(**kwargs)
            return [Listed(str(a.id), str(a.name), tuple(a.tags or ())) for a in got.items]

        self.reads += 1
        page: list[Listed] = await clients._call("agents filtered list", "", attempt, rng, state)
        return page


def _first(reference: Sequence[Listed], flt: Filter, got: Sequence[Listed]) -> list[str]:
    """``limit=1``: the first agent the filter keeps, or none if it keeps none."""
    want = [a.id for a in reference if flt.keep(a)][:1]
    if [a.id for a in got] == want:
        return []
    return [f"agents list {flt.label} limit=1: got {[a.id for a in got]}, want {want}"]
