"""A cold restart changes nothing a client can read (``cold_restart``, via HTTP).

With ``cold_restart`` on, once every other client and walker is done, one more client reads a
sample of everything the API shows (:data:`LISTS`, then the items they list: agents and their
memory, messages, archival passages, tools, files and schedules; runs and steps; blocks,
folders, archives, conversations, messages across agents and MCP servers), as raw JSON
through the real HTTP server. It reads again until two rounds agree (work still settling after
the faults, a run resumed by the first read, is not a finding), then crashes **every** server
node at once, restarts them, and reads the same paths a third time. :func:`check_cold`
compares the last round before the restart with the round after it, path by path, and
:func:`check_views` each round with itself: one thing shown by two routes is shown the same.

The property is model-free: whatever the server answered from memory before the restart must
be what it answers from the database after it. It catches, in any resource, a write acknowledged
but never made durable (memory updated, storage not), a field the codec drops or a cache the
server serves instead of the database, state rebuilt differently on load (a counter, an order,
a default filled in on one path only), and recovery that changes what was already settled.

Which items are read is drawn from the workload's rng (``cold/sample``), at most :data:`ITEMS`
of each kind, so a seed's reads are the same every run and the cost stays bounded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
import httpx
import trio

from ._agent_world import PORT

__all__ = ["ColdLog", "ColdWalker", "check_cold"]

ITEMS = 4  # items of each kind read per round (drawn once, then the same in every round)
ROUNDS = 3  # rounds before the restart, at most, to find two that agree
LIMIT = "limit=1000"

# The collections read in every round, and the kind of item each lists.
LISTS: tuple[tuple[str, str], ...] = (
    (f"/v1/agents/?{LIMIT}", "agent"),
    (f"/v1/blocks/?{LIMIT}", "block"),
    (f"/v1/tools/?{LIMIT}", "tool"),
    (f"/v1/folders/?{LIMIT}", "folder"),
    (f"/v1/archives/?{LIMIT}", "archive"),
    (f"/v1/runs/?{LIMIT}", "run"),
    (f"/v1/steps/?{LIMIT}", "step"),
    (f"/v1/messages/?{LIMIT}&order=asc", "message"),
    ("/v1/mcp-servers/", "mcp_server"),
    ("/v1/tags/", ""),
)

# The paths read for each item of a kind.
ITEM_PATHS: dict[str, tuple[str, ...]] = {
    "agent": (
        "/v1/agents/{id}",
        "/v1/agents/{id}/core-memory/blocks",
        f"/v1/agents/{{id}}/messages?{LIMIT}&order=asc",
        f"/v1/agents/{{id}}/archival-memory?{LIMIT}",
        "/v1/agents/{id}/tools",
        "/v1/agents/{id}/folders",
        "/v1/agents/{id}/files",
        "/v1/agents/{id}/schedule",
        f"/v1/conversations/?agent_id={{id}}&{LIMIT}",
    ),
    "block": ("/v1/blocks/{id}", "/v1/blocks/{id}/agents"),
    "tool": ("/v1/tools/{id}",),
    "folder": ("/v1/folders/{id}", f"/v1/folders/{{id}}/files?{LIMIT}", "/v1/folders/{id}/agents"),
    "archive": ("/v1/archives/{id}",),
    "run": (
        "/v1/runs/{id}",
        f"/v1/runs/{{id}}/messages?{LIMIT}",
        "/v1/runs/{id}/steps",
        "/v1/runs/{id}/usage",
    ),
    "step": ("/v1/steps/{id}", "/v1/steps/{id}/messages"),
    "message": ("/v1/messages/{id}",),
    "mcp_server": ("/v1/mcp-servers/{id}", "/v1/mcp-servers/{id}/tools"),
}


@attrs.define
class ColdLog:
    """What the walk read: ``before`` and ``after`` map a path to its status and JSON body
    (``None`` when no answer came)."""

    before: dict[str, tuple[int, Any] | None] = attrs.field(factory=dict)
    after: dict[str, tuple[int, Any] | None] = attrs.field(factory=dict)
    rounds: int = 0  # rounds read before the restart
    settled: bool = False  # two rounds before the restart agreed
    restarted: bool = False
    problems: list[str] = attrs.field(factory=list)


class ColdWalker:
    """The client that reads, restarts every server node and reads again."""

    def __init__(self, clients: Any, rng: Any) -> None:
        self.clients = clients
        self.rng = rng
        self.node = rng.choice(clients.world.node_names)
        self.requests = 0
        self.log = ColdLog()
        self.paths: list[str] = []  # the item paths drawn in the first round
        self.drawn = False

    async def run(self) -> None:
        log = self.log
        previous: dict[str, tuple[int, Any] | None] | None = None
        for _ in range(ROUNDS):
            current = await self._round()
            log.rounds += 1
            if previous is not None and _settled(previous, current):
                log.settled = True
                break
            previous = current
        log.before = current
        if not log.settled:
            return  # still moving (a run resuming, a retry landing): nothing to compare
        world = self.clients.world
        sim = world.sim
        nodes = [sim.node(name) for name in world.node_names] + [world.db]
        for node in nodes:  # a power cut: the database host too (unsynced bytes are lost)
            sim.crash(node)
        for node in nodes:
            sim.restart(node, after=1.0)
        log.restarted = True
        await trio.sleep(2.0)
        log.after = await self._round()

    async def _round(self) -> dict[str, tuple[int, Any] | None]:
        got: dict[str, tuple[int, Any] | None] = {}
        for path, kind in LISTS:
            got[path] = answer = await self._get(path)
            if not self.drawn and kind:
                self._draw(kind, answer)
        self.drawn = True  # the same items in every round
        for path in self.paths:
            got[path] = await self._get(path)
        return got

    def _draw(self, kind: str, answer: tuple[int, Any] | None) -> None:
        if answer is None or answer[0] != 200 or not isinstance(answer[1], list):
            return
        ids = [item["id"] for item in answer[1] if isinstance(item, dict) and "id" in item]
        for item in self.rng.sample(ids, min(ITEMS, len(ids))):
            self.paths += [p.replace("{id}", str(item)) for p in ITEM_PATHS[kind]]

    async def _get(self, path: str) -> tuple[int, Any] | None:
        """The first answer below 500 to a GET, tried on another node after a 5xx or a cut
        connection, up to 8 times; ``None`` if none came."""
        http: httpx.AsyncClient = self.clients.link.http
        nodes = self.clients.world.node_names
        self.requests += 1
        for _ in range(8):
            try:
                with trio.fail_after(self.clients.timeout):
                    got = await http.get(f"http://{self.node}:{PORT}{path}")
                if got.status_code < 500:
                    try:
                        body = got.json()
                    except ValueError:
                        body = got.text
                    return got.status_code, body
            except (httpx.TransportError, trio.TooSlowError):
                pass
            if len(nodes) > 1:
                self.node = self.rng.choice([n for n in nodes if n != self.node])
            await trio.sleep(1.0)
        return None


def _settled(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a.get(p) is not None and a.get(p) == b.get(p) for p in b)


def _first_difference(
    a: Any, b: Any, where: str = "", sides: tuple[str, str] = ("before the restart", "after")
) -> str:
    """Where two JSON values first differ, and how (``sides`` name ``a`` and ``b``)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{where}.{key} only {sides[key not in a]}"
            if a[key] != b[key]:
                return _first_difference(a[key], b[key], f"{where}.{key}", sides)
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} items {sides[0]}, {len(b)} {sides[1]}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{where}[{i}]", sides)
    return f"{where or '.'}: {_short(a)} {sides[0]}, {_short(b)} {sides[1]}"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def check_cold(log: ColdLog, exempt: Sequence[str] = ()) -> list[str]:
    """Each path answered before the restart is answered the same after it: the same status
    and the same body. A path with no answer on either side is not judged (the faults may
    have outlasted its retries)."""
    if not log.restarted:
        return []
    problems = list(log.problems)
    for path, before in log.before.items():
        after = log.after.get(path)
        if before is None or after is None or any(path.startswith(e) for e in exempt):
            continue
        if before[0] != after[0]:
            problems.append(f"GET {path}: {before[0]} before the restart, {after[0]} after")
        elif before[1] != after[1]:
            problems.append(f"GET {path}: {_first_difference(before[1], after[1])}")
    return problems


def _objects(value: Any, where: str, out: dict[tuple[Any, ...], list[tuple[str, Any]]]) -> None:
    """Every JSON object with an ``id`` inside ``value``, keyed by what must make two of them
    the same view: the id, the message type (one stored message is shown as several) and the
    set of fields (a summary and a full record are different views)."""
    if isinstance(value, dict):
        ident = value.get("id")
        if isinstance(ident, str) and ident:
            key = (ident, value.get("message_type"), frozenset(value))
            out.setdefault(key, []).append((where, value))
        for name, item in value.items():
            _objects(item, f"{where}.{name}", out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _objects(item, f"{where}[{i}]", out)


def check_views(answers: dict[str, tuple[int, Any] | None], when: str) -> list[str]:
    """The same thing shown by two routes (or twice by one) is shown the same: every object
    with the same id, message type and fields is equal wherever it appears, in a list, in its
    own route, or nested in another resource."""
    seen: dict[tuple[Any, ...], list[tuple[str, Any]]] = {}
    for path, answer in answers.items():
        if answer is not None and answer[0] == 200:
            _objects(answer[1], f"GET {path}", seen)
    problems = []
    for (ident, _, _), views in seen.items():
        first_where, first = views[0]
        for where, other in views[1:]:
            if other != first:
                diff = _first_difference(first, other, "", ("in the first", "in the second"))
                problems.append(f"{when}: {ident} differs in {first_where} and {where}: {diff}")
                break
    return problems
