"""The wire's documented contract where no other scenario looks (``contract``, via HTTP).

With ``contract`` on, the server nodes run with an API key (every client sends it), a short
ping interval (:data:`CONTRACT_PING`) and a small head limit (:data:`CONTRACT_SERVER`). Once
the agents' clients are done (the faults go on), one more client, on random nodes, hopping
after failures, drives what the documentation promises and logs what it read for
:mod:`._agent_contract_checks`:

1. **Its own agent** (``contract-agent-0``, no tools, marked ``mark-a905``) and two blocks.
2. **Streams, pings or not**: four streamed sends, two with ``include_pings`` false, whose
   first event mostly comes later than the server's ping interval; each stream the server
   finished is kept with its frames, and its run's stored messages are read.
3. **Lists**: agents, blocks, tools, the agent's messages, runs and steps, read without
   ``order``/``limit`` and with the documented defaults, both orders, and with ``limit`` 0,
   1000 and 1001.
4. **Refusals**: requests whose status the error table names: an archival search whose
   start is after its end, an approval when no call waits, deleting a built-in tool (400),
   a list after an unknown cursor (404), a date that is not one (422). With
   ``contract_creates``: creates the server must refuse (400: two blocks of one label, a block
   with an attached block's label, a block over its limit, on an agent and standalone) and
   attaches of what does not exist (404); then the lists are read for what the creates asked
   for, and the agent is written and read for the ids the attaches named: none may show.
5. **The API key**: requests without ``Authorization``, with another scheme, with keys one
   character off (changed, longer, shorter, empty) on reads, writes, deletes and the schema
   routes; the health route without a key; then, with the key, whether a refused write was
   applied.
6. **The head limit**: ``GET /v1/health/`` with a head of exactly ``max_header_bytes`` and
   of one byte more, on raw connections.

A request that fails with an error the client must not retry is a problem
(``every_request_completed`` records it too).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
import httpx
import letta_client
import trio

from ._agent_contract_checks import AuthSeen, ContractLog, ListSeen, StatusSeen, StreamSeen
from ._agent_http import IncompleteStreamError
from ._agent_walker import SdkWalker
from ._agent_wire import _BROKEN, _head, _Raw
from ._agent_world import PORT, SERVER
from ._contract_edges import probe_edges
from ._contract_probes import probe_all
from ._contract_probes_checks import ProbeLog
from ._contract_uploads import probe_uploads

__all__ = ["CONTRACT_KEY", "CONTRACT_PING", "CONTRACT_SERVER", "ContractWalker"]

CONTRACT_KEY = "kelpie-sim-contract-key-7Qx2"
"""The servers' API key with ``contract`` (a made-up value of the simulation)."""
CONTRACT_PING = 0.25
"""The servers' ping interval with ``contract``: shorter than most runs take to answer, so
streams often start quiet (with a ping, or with nothing when pings are off)."""
HEAD = 8 * 1024
AGENT = "contract-agent-0"
MARK = "mark-a905"
"""The contract agent's marker (``_agent_prompt.AGENT_MARK``); no planned agent has 905."""
TRIES = 8
RETRY_APP = frozenset({500, 502, 503, 504})
NONE = "none"


CONTRACT_SERVER = attrs.evolve(SERVER, max_header_bytes=HEAD)
"""The server nodes' options with ``contract``: the default ones with an 8 KiB head limit."""

# (what, path, query, documented default order, documented default limit or None)
LISTS: tuple[tuple[str, str, dict[str, Any], str, int | None], ...] = (
    ("agents", "/v1/agents/", {}, "desc", 50),
    ("blocks", "/v1/blocks/", {}, "asc", 50),
    ("tools", "/v1/tools/", {}, "asc", 50),
    ("the agent's messages", "/v1/agents/{agent}/messages", {}, "desc", 100),
    ("the agent's runs", "/v1/runs/", {"agent_id": "{agent}"}, "desc", None),
    ("the agent's steps", "/v1/steps/", {"agent_id": "{agent}"}, "desc", None),
)


def _detail(got: httpx.Response) -> bool:
    try:
        value = got.json()
    except ValueError:
        return False
    return isinstance(value, dict) and isinstance(value.get("detail"), str)


def _fill(value: Any, agent: str) -> Any:
    if isinstance(value, str):
        return value.replace("{agent}", agent)
    if isinstance(value, dict):
        return {k: _fill(v, agent) for k, v in value.items()}
    return value


class ContractWalker(SdkWalker):
    """Drives the contract's requests and logs what it read (see the module docstring)."""

    PREFIX = "contract"

    def __init__(
        self,
        clients: Any,
        rng: Any,
        creates: bool = False,
        edges: bool = False,
        uploads: bool = False,
        probes: bool = False,
    ) -> None:
        super().__init__(clients, rng)
        self.creates = creates  # param contract_creates: refused creates too (REFUSED_CREATES)
        self.edges = edges  # param contract_edges: limits and scopes below an agent
        self.uploads = uploads  # param contract_uploads: files stored whole
        self.probes = probes  # param contract_probes: cancels, long passages, deletes
        self.probe_log = ProbeLog()
        self.log = ContractLog()
        self.problems = self.log.problems
        self.agent: str | None = None
        self.block: str | None = None
        self.victim: str | None = None
        self.value = f"the contract block ({MARK})"
        self.quiet = 0  # streams whose first frame came after the ping interval

    async def run(self) -> None:
        first = (self._setup, self._head_limit)
        lists = (self._lists, self._edges) if self.edges else (self._lists,)
        if self.uploads:
            lists = (*lists, self._uploads)
        if self.probes:
            lists = (*lists, self._probes)
        await self._phases(
            (
                self._setup,
                self._streams,
                *lists,
                self._refusals,
                self._auth,
                self._head_limit,
            ),
            lambda phase: phase in first or self.agent is not None,
        )

    # -- raw requests --------------------------------------------------------------------------
    async def _raw(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        auth: str | None = None,
        files: Any = None,
    ) -> httpx.Response | None:
        """The first answer below 500 (``auth``: the ``Authorization`` to send instead of
        the key, :data:`NONE` for none); a 5xx or a cut connection is tried again on another
        node, up to :data:`TRIES` times (``None``: no answer)."""
        http: httpx.AsyncClient = self.clients.link.http
        nodes = self.clients.world.node_names
        self.requests += 1
        for _ in range(TRIES):
            url = f"http://{self.state['node']}:{PORT}{path}"
            request = http.build_request(method, url, json=body, params=params, files=files)
            if auth == NONE:
                del request.headers["authorization"]
            elif auth is not None:
                request.headers["authorization"] = auth
            try:
                with trio.fail_after(self.clients.timeout):
                    got = await http.send(request)
                    await got.aread()
                if got.status_code not in RETRY_APP:
                    return got
            except (httpx.TransportError, trio.TooSlowError):
                pass
            if len(nodes) > 1:
                self.state["node"] = self.rng.choice([n for n in nodes if n != self.state["node"]])
            await trio.sleep(1.0)
        return None

    async def _ids(self, path: str, params: Mapping[str, Any]) -> tuple[str, ...] | None:
        got = await self._raw("GET", path, params=params)
        if got is None or got.status_code != 200:
            return None
        return tuple(str(item["id"]) for item in got.json())

    # -- 1. the agent and its blocks -----------------------------------------------------------
    async def _setup(self) -> None:
        async def find(sdk: Any) -> Any:
            page = await sdk.agents.list(name=AGENT, limit=1, order="asc")
            return page.items[0] if page.items else None

        async def make(sdk: Any) -> Any:
            return await sdk.agents.create(
                name=AGENT,
                agent_type="letta_v1_agent",
                memory_blocks=[
                    {"label": "human", "value": f"The contract walker ({MARK}).", "limit": 400},
                    {"label": "persona", "value": "A terse helper.", "read_only": True},
                ],
                include_base_tools=False,
                tags=["contract"],
            )

        made = await self._create(f"agent {AGENT}", find, make)
        self.block = await self._make_block("contract-block", self.value)
        self.victim = await self._make_block("contract-victim", f"to keep ({MARK})")
        self.agent = str(made.id)

    async def _make_block(self, label: str, value: str) -> str:
        async def find(sdk: Any) -> Any:
            page = await sdk.blocks.list(label=label, limit=1, order="asc")
            return page.items[0] if page.items else None

        made = await self._create(
            f"block {label}", find, lambda sdk: sdk.blocks.create(label=label, value=value)
        )
        return str(made.id)

    # -- 2. streams, pings or not ----------------------------------------------------------------
    async def _streams(self) -> None:
        pings = [False, False, True, True]
        self.rng.shuffle(pings)
        for k, ping in enumerate(pings):
            await self._stream(k, ping)

    async def _stream(self, k: int, pings: bool) -> None:
        agent = self.agent
        assert agent is not None
        what = f"stream {k + 1} to {AGENT}"
        body = {
            "messages": [
                {"role": "user", "content": f"contract note {k} ({MARK})", "otid": f"{MARK}-{k}"}
            ],
            "include_pings": pings,
        }
        http: httpx.AsyncClient = self.clients.link.http
        self.requests += 1

        async def attempt(node: str, number: int) -> StreamSeen:
            url = f"http://{node}:{PORT}/v1/agents/{agent}/messages/stream"
            started = trio.current_time()
            first_at: float | None = None
            endings: list[str] = []
            frames: list[str] = []
            runs: set[str] = set()
            async with http.stream("POST", url, json=body) as got:
                if got.status_code >= 400:
                    await got.aread()
                    raise letta_client.APIStatusError(
                        f"{what}: {got.status_code}", response=got, body=got.json()
                    )
                error = False
                async for line in got.aiter_lines():
                    if line.startswith("event: error"):
                        error = True
                    if not line.startswith("data: "):
                        continue
                    if first_at is None:
                        first_at = trio.current_time()
                    if line == "data: [DONE]":
                        continue
                    data = json.loads(line[6:])
                    if error:
                        endings.append("error")
                        raise letta_client.APIStatusError(what, response=got, body=data)
                    kind = data.get("message_type")
                    if kind in ("stop_reason", "usage_statistics"):
                        endings.append(kind)
                    elif kind != "ping" and kind != "user_message":
                        frames.append(str(data.get("id")))
                        if data.get("run_id"):
                            runs.add(str(data["run_id"]))
            quiet = first_at is None or first_at - started > CONTRACT_PING
            if number > 1 and "stop_reason" not in endings:
                raise IncompleteStreamError(f"{what}: a retry with no stop reason")
            run_id = next(iter(runs)) if len(runs) == 1 and number == 1 else None
            return StreamSeen(what, pings, quiet, tuple(endings), tuple(frames), None, run_id)

        key = f"{self.PREFIX} #{self.requests} {what}"
        seen: StreamSeen = await self.clients._call(key, "", attempt, self.rng, self.state)
        if seen.quiet:
            self.quiet += 1
        if seen.run_id is not None:
            stored = await self._raw(
                "GET", f"/v1/runs/{seen.run_id}/messages", params={"limit": 1000}
            )
            if stored is not None and stored.status_code == 200:
                ids = tuple(
                    str(m["id"]) for m in stored.json() if m.get("message_type") != "user_message"
                )
                seen = StreamSeen(
                    seen.what, seen.pings, seen.quiet, seen.endings, seen.frames, ids, seen.run_id
                )
        self.log.streams.append(seen)

    # -- 3. lists --------------------------------------------------------------------------------
    async def _lists(self) -> None:
        agent = self.agent
        assert agent is not None
        for what, path_format, query, order, limit in LISTS:
            path = _fill(path_format, agent)
            base = _fill(query, agent)
            explicit = {**base, "order": order, **({"limit": limit} if limit else {})}
            await self._same(f"{what} without order or limit vs {explicit}", path, base, explicit)
            asc = {**base, "order": "asc", "limit": 1000}
            desc = {**base, "order": "desc", "limit": 1000}
            await self._same(f"{what} desc vs asc reversed", path, asc, desc, reverse=True)
            if limit:
                await self._same(
                    f"{what} limit=1000 vs limit={limit} (fewer items than {limit})",
                    path,
                    {**base, "order": order, "limit": limit},
                    {**base, "order": order, "limit": 1000},
                    under=limit,
                )
            none = await self._raw("GET", path, params={**base, "limit": 0})
            if none is not None:
                self.log.statuses.append(
                    StatusSeen(f"GET {path} limit=0", 200, none.status_code, _detail(none))
                )
                if none.status_code == 200:
                    got = tuple(str(item["id"]) for item in none.json())
                    self.log.lists.append(ListSeen(f"{what} limit=0", (), got))
            over = await self._raw("GET", path, params={**base, "limit": 1001})
            if over is not None:
                self.log.statuses.append(
                    StatusSeen(f"GET {path} limit=1001", 422, over.status_code, _detail(over))
                )

    async def _edges(self) -> None:
        await probe_edges(self)

    async def _uploads(self) -> None:
        await probe_uploads(self)

    async def _probes(self) -> None:
        await probe_all(self, self.probe_log)

    async def _same(
        self,
        what: str,
        path: str,
        one: Mapping[str, Any],
        other: Mapping[str, Any],
        *,
        reverse: bool = False,
        under: int | None = None,
    ) -> None:
        """``one`` and ``other`` list the same ids (``reverse``: in reverse), judged only when
        ``one`` read again after ``other`` has not changed (and holds fewer than ``under``)."""
        first = await self._ids(path, one)
        second = await self._ids(path, other)
        again = await self._ids(path, one)
        if first is None or second is None or again != first:
            return
        if under is not None and len(first) >= under:
            return
        want = tuple(reversed(first)) if reverse else first
        self.log.lists.append(ListSeen(what, want, second))

    # -- 4. refusals ----------------------------------------------------------------------------
    async def _refusals(self) -> None:
        """Requests whose status the error table names (docs/http-api.md, "Errors"): a
        well-formed request the state refuses is a 400, an unknown cursor a 404, a value the
        schema refuses a 422; each with a JSON detail and ``x-should-retry: false``."""
        agent = self.agent
        assert agent is not None
        tools = await self._raw("GET", "/v1/tools/", params={"name": "send_message"})
        builtin = None
        if tools is not None and tools.status_code == 200 and tools.json():
            builtin = str(tools.json()[0]["id"])
        probes: list[tuple[str, int, str, str, Any, dict[str, Any] | None]] = [
            (
                "an archival search whose start is after its end",
                400,
                "GET",
                f"/v1/agents/{agent}/archival-memory/search",
                None,
                {
                    "query": "kelp",
                    "start_datetime": "2030-01-02T00:00:00Z",
                    "end_datetime": "2030-01-01T00:00:00Z",
                },
            ),
            (
                "an approval when no call waits for one",
                400,
                "POST",
                f"/v1/agents/{agent}/messages",
                {
                    "messages": [
                        {"type": "approval", "approve": True, "approval_request_id": "message-x"}
                    ],
                    "streaming": False,
                },
                None,
            ),
            (
                "agents listed after an unknown agent",
                404,
                "GET",
                "/v1/agents/",
                None,
                {"after": "agent-nope"},
            ),
            (
                "an archival search with a date that is not one",
                422,
                "GET",
                f"/v1/agents/{agent}/archival-memory/search",
                None,
                {"query": "kelp", "start_datetime": "yesterday"},
            ),
        ]
        if builtin is not None:
            probes.append(
                (
                    "deleting the built-in send_message",
                    400,
                    "DELETE",
                    f"/v1/tools/{builtin}",
                    None,
                    None,
                )
            )
        if self.creates:
            probes += _refused_creates()
            probes += [
                (f"attaching a {kind} that does not exist", 404, "PATCH", path, None, None)
                for kind, path in _missing_attaches(agent)
            ]
            probes.append(
                (
                    "an agent created with a memory block and an attached block of one label",
                    400,
                    "POST",
                    "/v1/agents/",
                    {
                        "name": f"{REFUSED}-attached",
                        "memory_blocks": [{"label": "contract-block", "value": f"({MARK})"}],
                        "block_ids": [self.block],
                        "include_base_tools": False,
                    },
                    None,
                )
            )
        self.rng.shuffle(probes)
        for what, want, method, path, body, params in probes:
            got = await self._raw(method, path, body=body, params=params)
            if got is not None:
                self.log.refusals.append(
                    StatusSeen(
                        f"{what} ({method} {path})",
                        want,
                        got.status_code,
                        _detail(got),
                        retry=got.headers.get("x-should-retry"),
                    )
                )

        if self.creates:  # a refused attach left the agent as it was, stored and in memory
            # (a write of the agent after them stores whatever its activation holds)
            await self._raw("PATCH", f"/v1/agents/{agent}", body={"description": "refused"})
            got = await self._raw("GET", f"/v1/agents/{agent}")
            if got is not None and got.status_code == 200 and MISSING in got.text:
                self.log.not_applied.append(
                    f"agent {agent} shows a {MISSING} id after attaches of it were refused 404"
                )
        if self.creates:  # a refused create left nothing behind
            for kind, path, params in _CREATED_BY_REFUSALS:
                made = await self._ids(path, params)
                if made:
                    self.log.not_applied.append(
                        f"{kind} {list(made)} created by a create refused 400 ({params})"
                    )

    # -- 5. the API key --------------------------------------------------------------------------
    async def _auth(self) -> None:
        agent, block, victim = self.agent, self.block, self.victim
        assert agent is not None and block is not None and victim is not None
        key = CONTRACT_KEY
        changed = key[:-1] + ("x" if key[-1] != "x" else "y")
        credentials = (
            (NONE, "no Authorization header"),
            (f"Bearer {changed}", "another key of the same length"),
            (f"Bearer {key}0", "the key with one more character"),
            (f"Bearer {key[:-1]}", "the key without its last character"),
            ("Bearer ", "an empty key"),
            (f"Basic {key}", "the key with scheme Basic"),
            (key, "the key without a scheme"),
        )
        targets: tuple[tuple[str, str, Any], ...] = (
            ("GET", "/v1/agents/", None),
            ("GET", f"/v1/agents/{agent}", None),
            ("GET", f"/v1/blocks/{block}", None),
            ("PATCH", f"/v1/blocks/{block}", {"value": f"forged ({MARK})"}),
            ("POST", "/v1/blocks/", {"label": "contract-forged", "value": f"forged ({MARK})"}),
            ("DELETE", f"/v1/blocks/{victim}", None),
            ("GET", "/openapi.json", None),
            ("GET", "/docs", None),
        )
        for method, path, body in targets:
            chosen = list(credentials)
            self.rng.shuffle(chosen)
            for credential, how in chosen[:4]:
                got = await self._raw(method, path, body=body, auth=credential)
                self.log.auth.append(
                    AuthSeen(
                        f"{method} {path}",
                        how,
                        401,
                        got.status_code if got is not None else 0,
                        got is not None and _detail(got),
                        got.headers.get("x-should-retry") if got is not None else None,
                    )
                )
        got = await self._raw("GET", "/v1/health/", auth=NONE)
        if got is not None:
            self.log.auth.append(
                AuthSeen(
                    "GET /v1/health/", "no Authorization header", 200, got.status_code, True, None
                )
            )
        # with the key: nothing refused was applied
        got = await self._raw("GET", f"/v1/blocks/{block}")
        if got is not None and got.status_code == 200 and got.json().get("value") != self.value:
            self.log.not_applied.append(
                f"block {block} holds {got.json().get('value')!r} after PATCHes refused 401"
            )
        made = await self._ids("/v1/blocks/", {"label": "contract-forged"})
        if made:
            self.log.not_applied.append(f"blocks {list(made)} created by POSTs refused 401")
        got = await self._raw("GET", f"/v1/blocks/{victim}")
        if got is not None and got.status_code == 404:
            self.log.not_applied.append(f"block {victim} deleted by DELETEs refused 401")

    # -- 6. the head limit -----------------------------------------------------------------------
    async def _head_limit(self) -> None:
        for size, want in ((HEAD, 200), (HEAD + 1, 431)):
            seen = await self._head_probe(size, want)
            if seen is not None:
                self.log.limits.append(seen)

    async def _head_probe(self, size: int, want: int) -> StatusSeen | None:
        what = f"GET /v1/health/ with a head of {size} bytes (max_header_bytes {HEAD})"
        nodes = self.clients.world.node_names
        for _ in range(TRIES):
            node = self.state["node"]
            pad = len(_head("GET", "/v1/health/", node, ("x-pad: ",)))
            head = _head("GET", "/v1/health/", node, ("x-pad: " + "p" * (size - pad),))
            assert len(head) == size
            try:
                raw = _Raw(await trio.open_tcp_stream(node, PORT))
            except OSError:
                raw = None
            if raw is not None:
                try:
                    with trio.fail_after(self.clients.timeout):
                        await raw.send(head)
                        status, _, body = await raw.answer()
                    if status not in RETRY_APP:
                        closed = await raw.closed(2.0) if status >= 400 else None
                        try:
                            detail = isinstance(json.loads(body).get("detail"), str)
                        except (ValueError, AttributeError):
                            detail = False
                        return StatusSeen(what, want, status, detail or status < 400, closed)
                except (*_BROKEN, trio.TooSlowError):
                    pass
                finally:
                    await raw.aclose()
            if len(nodes) > 1:
                self.state["node"] = self.rng.choice([n for n in nodes if n != node])
            await trio.sleep(1.0)
        return None


REFUSED = "contract-refused"
"""The name and label stem of the creates ``contract_creates`` sends, which must be refused."""
_CREATED_BY_REFUSALS = (
    ("agents", "/v1/agents/", {"name": f"{REFUSED}-twice"}),
    ("agents", "/v1/agents/", {"name": f"{REFUSED}-overfull"}),
    ("agents", "/v1/agents/", {"name": f"{REFUSED}-attached"}),
    ("blocks", "/v1/blocks/", {"label": f"{REFUSED}-overfull"}),
)


def _refused_creates() -> list[tuple[str, int, str, str, Any, dict[str, Any] | None]]:
    """Creates a well-formed request whose content the server must refuse (400, and nothing
    made): an agent with two memory blocks of one label, an agent whose block's value is one
    character over the block's own limit, and a standalone block likewise. (The walker adds
    an agent whose memory block has the label of a block it attaches.)"""
    over = {"label": f"{REFUSED}-overfull", "value": "k" * 11, "limit": 10}
    return [
        (
            "an agent created with two memory blocks of one label",
            400,
            "POST",
            "/v1/agents/",
            {
                "name": f"{REFUSED}-twice",
                "memory_blocks": [
                    {"label": "notes", "value": f"first ({MARK})"},
                    {"label": "notes", "value": f"second ({MARK})"},
                ],
                "include_base_tools": False,
            },
            None,
        ),
        (
            "an agent created with a block one character over its limit",
            400,
            "POST",
            "/v1/agents/",
            {"name": f"{REFUSED}-overfull", "memory_blocks": [over], "include_base_tools": False},
            None,
        ),
        ("a block created one character over its limit", 400, "POST", "/v1/blocks/", over, None),
    ]


MISSING = "nope-3f1"
"""The tail of the ids ``contract_creates`` attaches, which name nothing."""


def _missing_attaches(agent: str) -> list[tuple[str, str]]:
    """(kind, path) of attaches to ``agent`` of things that do not exist: each a 404 that
    must change nothing, though the agent may have begun the change before the check."""
    return [
        (kind, f"/v1/agents/{agent}/{route}/attach/{kind}-{MISSING}")
        for kind, route in (
            ("archive", "archives"),
            ("identity", "identities"),
            ("block", "core-memory/blocks"),
            ("tool", "tools"),
            ("folder", "folders"),
        )
    ]
