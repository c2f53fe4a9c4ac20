"""Creates whose outcome is unknown: the CREATE-ONCE oracle (``ambiguous_creates``, via HTTP).

Letta's API has no idempotency keys for creates. A careful client that gets no answer, or a
503, does not know whether its create landed (storage may have applied the commit and lost the
acknowledgement, ``storage.commit_unknown``); it looks the object up by the unique name it gave
it before it creates it again, as the workload's agent creates do (``_agent_http``). Each
``(kind, name)`` the client made must then exist exactly once:

* **at most once per attempt the client never heard back from.** A 503 or any other answer
  the server *sent* means that attempt is over, so the only way a second copy appears is the
  server repeating a create behind the client's back (retrying a request storage gave up on
  mid-way as if it had never started) or a lookup that misses what exists (a listing that
  filters after it limits). An attempt cut off without an answer (a timeout, a reset
  connection, a crashed node) may still land after the lookup: each one allows one more copy
  (``blind``);
* **at least once if acknowledged**, and the id the client was given is one of the copies.

With ``ambiguous_creates = n``, each agent gets ``n`` creates once it exists, spread over the
run (so storage storms catch some): conversations (by summary), archival passages (by text),
standalone blocks (by label) and custom tools (by name), in turn; with the ``create_kinds``
param, any of those and shared archives (by name). Each is an ordinary client
request (``Clients._call``: retried on another node, so ``every_request_completed`` bounds it).
At the end each name is counted with the API's own filtered listing *and* in the database
itself (the listings could hide a duplicate). :func:`check_created_once` is the pure checker.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs
import letta_client
import trio

from kelpie_agent.agent import Keys
from kelpie_agent.agent._codec import unpack

from ..shims._storage import SimKVStore

__all__ = [
    "CREATE_KINDS",
    "KINDS",
    "CreateRecord",
    "Creates",
    "blind_attempt",
    "check_created_once",
]

KINDS = ("conversation", "passage", "block", "tool")  # the default, in turn
CREATE_KINDS = (*KINDS, "archive")  # what ``create_kinds`` may name


@attrs.frozen
class CreateRecord:
    """One create the client made: ``kind``, the unique ``name`` it gave, whether it was
    acknowledged (``ids``: what the client was given), and ``blind``: attempts that ended
    without an answer from the server (their create may land later)."""

    kind: str
    name: str
    acked: bool
    ids: tuple[str, ...] = ()
    blind: int = 0


def check_created_once(
    records: Sequence[CreateRecord], found: Mapping[tuple[str, str], Sequence[str]], where: str
) -> list[str]:
    """Problems with what ``found`` (``(kind, name)`` -> the ids that exist) holds for each
    create: more copies than one plus its blind attempts, none although acknowledged, or not
    the id the client was given."""
    problems = []
    for r in records:
        ids = list(found.get((r.kind, r.name), ()))
        what = f"{r.kind} {r.name!r} ({where})"
        if len(ids) > 1 + r.blind:
            blind = f" ({r.blind} attempts got no answer)" if r.blind else " (every attempt did)"
            problems.append(f"{what}: made once by the client, exists {len(ids)} times{blind}")
        if r.acked and not ids:
            problems.append(f"{what}: acknowledged, but it does not exist")
        elif r.acked and r.ids and not set(r.ids) & set(ids):
            problems.append(f"{what}: the client was given {r.ids[0]}, which does not exist")
    return problems


async def blind_attempt(counts: dict[str, int], key: str, call: Awaitable[Any]) -> Any:
    """``await call``, counting under ``key`` an attempt that ended without the server's
    answer (anything but an HTTP status: a cut connection, a cancelled timeout)."""
    try:
        return await call
    except BaseException as error:
        if not isinstance(error, letta_client.APIStatusError):
            counts[key] = counts.get(key, 0) + 1
        raise


class Creates:
    """The creates of every agent (``per_agent`` each), their records, and the final count."""

    def __init__(self, clients: Any, per_agent: int, kinds: Sequence[str] = KINDS) -> None:
        self.clients = clients
        self.per_agent = per_agent
        self.kinds = tuple(kinds)
        self.records: list[CreateRecord] = []
        self.blind: dict[str, int] = {}
        self.owner: dict[str, str] = {}  # name -> the server's agent id (passages)
        self.problems: list[str] = []

    # -- driving ------------------------------------------------------------------------------
    async def client(self, plan: Any) -> None:
        """``per_agent`` creates for ``plan``'s agent, once it exists, a few seconds apart."""
        clients, link = self.clients, self.clients.link
        while link.server_id(plan) is None:
            record = clients.record.requests.get(f"a{plan.number} create")
            if record is not None and record.outcome == "failed":
                return
            await trio.sleep(0.5)
        rng = clients.ctx.rng(f"creates/{plan.number}")
        state = {"node": rng.choice(clients.world.node_names)}
        for k in range(self.per_agent):
            await trio.sleep(rng.uniform(0.5, 3.0))
            kind = self.kinds[(plan.number + k) % len(self.kinds)]
            await self._create(plan, kind, f"amb_a{plan.number}_{k}", rng, state)

    async def _create(
        self, plan: Any, kind: str, name: str, rng: Any, state: dict[str, str]
    ) -> None:
        server_id = self.clients.link.server_id(plan)
        self.owner[name] = server_id
        make, lookup = _ops(kind, name, server_id)
        blind = self.blind

        async def attempt(node: str, number: int) -> str:
            sdk = self.clients.link.sdk(node)
            if number > 1:  # an earlier attempt may have created it
                found = await lookup(sdk)
                if found:
                    return found[0]
            try:
                return str(await blind_attempt(blind, name, make(sdk)))
            except letta_client.ConflictError:  # a tool's name is taken: by our earlier attempt?
                found = await lookup(sdk)
                if found:
                    return found[0]
                raise

        key = f"a{plan.number} {kind} {name}"
        try:
            made = await self.clients._call(key, plan.agent_id, attempt, rng, state)
        except Exception:
            self.records.append(CreateRecord(kind, name, False, (), blind.get(name, 0)))
            return
        self.records.append(CreateRecord(kind, name, True, (str(made),), blind.get(name, 0)))

    # -- the final count ----------------------------------------------------------------------
    async def check(self, rng: Any) -> None:
        """Count every name through the API's filtered listings, then in the database."""
        state = {"node": rng.choice(self.clients.world.node_names)}
        listed: dict[tuple[str, str], list[str]] = {}
        for r in self.records:
            _, lookup = _ops(r.kind, r.name, self.owner[r.name])

            async def count(node: str, _: int, lookup: Any = lookup) -> list[str]:
                return list(await lookup(self.clients.link.sdk(node)))

            key = f"count {r.kind} {r.name}"
            listed[(r.kind, r.name)] = await self.clients._call(key, "", count, rng, state)
        self.problems += check_created_once(self.records, listed, "listed by the API")
        stored = stored_names(self.clients.world.store(), self.owner)
        self.problems += check_created_once(self.records, stored, "in the database")


Lookup = Callable[[Any], Awaitable[list[str]]]


def _ops(kind: str, name: str, agent: str) -> tuple[Callable[[Any], Awaitable[str]], Lookup]:
    """``(make(sdk) -> id, lookup(sdk) -> ids)`` of one named object."""
    if kind == "conversation":

        async def make(sdk: Any) -> str:
            return str((await sdk.conversations.create(agent_id=agent, summary=name)).id)

        async def lookup(sdk: Any) -> list[str]:
            got = await sdk.conversations.list(
                agent_id=agent, summary_search=name, archive_status="all", limit=100
            )
            return [str(c.id) for c in _items(got) if c.summary == name]

    elif kind == "passage":
        text = f"{name} archived fact"

        async def make(sdk: Any) -> str:
            made = await sdk.agents.passages.create(agent, text=text)
            return str(made[0].id)

        async def lookup(sdk: Any) -> list[str]:
            got = await sdk.agents.passages.list(agent, search=name, limit=100)
            return [str(p.id) for p in _items(got) if p.text == text]

    elif kind == "block":

        async def make(sdk: Any) -> str:
            return str((await sdk.blocks.create(label=name, value=f"{name} notes")).id)

        async def lookup(sdk: Any) -> list[str]:
            return [str(b.id) for b in _items(await sdk.blocks.list(label=name, limit=100))]

    elif kind == "archive":

        async def make(sdk: Any) -> str:
            return str((await sdk.archives.create(name=name, description=f"{name} shelf")).id)

        async def lookup(sdk: Any) -> list[str]:
            got = await sdk.archives.list(name=name, limit=100)
            return [str(a.id) for a in _items(got) if a.name == name]

    else:
        source = f'def {name}(text: str) -> str:\n    """Echo the text."""\n    return text\n'

        async def make(sdk: Any) -> str:
            return str((await sdk.tools.create(source_code=source)).id)

        async def lookup(sdk: Any) -> list[str]:
            return [str(t.id) for t in _items(await sdk.tools.list(name=name, limit=100))]

    return make, lookup


def _items(got: Any) -> list[Any]:
    """A listing's items: the SDK gives a page object for some lists, a list for others."""
    items = getattr(got, "items", got)
    return list(items)


def stored_names(store: SimKVStore, owner: Mapping[str, str]) -> dict[tuple[str, str], list[str]]:
    """``(kind, name)`` -> ids, read from the database itself (no fault, no node): every
    conversation, passage, block, tool and archive whose summary, text (its first word), label
    or name is one of the workload's (``owner``'s keys)."""
    found: dict[tuple[str, str], list[str]] = {}
    for kind, prefix, field in _STORED:
        try:
            rows = store._scan(prefix, Keys.prefix_end(prefix), None, False)
        except Exception:  # a corrupted value: the listing's count still stands
            continue
        for _, value in rows:
            try:
                item = unpack(value)
            except Exception:
                continue
            name = getattr(item, field, None)
            if kind == "passage" and isinstance(name, str):
                name = name.split(" ", 1)[0]
            if isinstance(name, str) and name in owner:
                found.setdefault((kind, name), []).append(str(item.id))
    return found


_STORED = (
    ("conversation", Keys.CONVERSATIONS, "summary"),
    ("passage", b"passage/", "text"),
    ("block", Keys.BLOCKS, "label"),
    ("tool", Keys.TOOLS, "name"),
    ("archive", b"archive/", "name"),
)
