"""The HTTP server's limits and the message views, driven at the wire (``wire``, via HTTP).

With ``wire`` on, the server nodes run with small, distinct limits (:data:`WIRE_SERVER`: a
64 KiB body, an 8 KiB head, ``header_timeout`` 10 s, ``body_timeout`` 20 s), and once the
agents' clients are done (the faults go on) one more client, on random nodes, hopping after
failures, logs what it saw for :mod:`._agent_wire_checks`:

1. **Raw requests at and over every limit** (trio sockets, bytes written by hand): a body of
   exactly the limit and one byte over it, declared and chunked (in pieces each under the
   limit); a head well under and twice over ``max_header_bytes``; a head sent in pieces within
   and beyond ``header_timeout``; a body that pauses 15 s (legal: over ``header_timeout``,
   under ``body_timeout``) and one that stalls; HTTP/1.0 and HTTP/2.0 request lines; two
   requests pipelined in one write; a request on another connection while a slow one waits.
   Each served request is followed by another on its connection, each refusal by one on a new
   connection; the bodies are ``PATCH``es of a block of the walker's, so what was applied is
   read back.
2. **The message views**, on an agent of its own (``wire-agent-0``, a memgpt agent with its
   base tools, marker ``mark-a901``) and two conversations of it: sends as JSON and as
   streams with ``use_assistant_message`` either way and ``include_return_message_types``;
   then its history read both ways, read filtered by type in pages, each conversation's
   messages, ``runs.list`` by conversation, and each run's steps and messages both orders.

A request that fails with an error the client must not retry is a problem.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs
import httpx
import letta_client
import trio

from kelpie_agent.agent import builtin_id, default_tool_names
from kelpie_agent.http import ServerOptions

from ._agent_http import IncompleteStreamError
from ._agent_wire_checks import (
    ABANDONED,
    ANSWERED,
    IDLE,
    SERVED,
    Answer,
    MsgSeen,
    OrderSeen,
    RunsSeen,
    ThreadSeen,
    TypedSeen,
    WireLog,
    WireSeen,
)
from ._agent_world import PORT, SERVER
from ._wire_threads import dense_reads, send_and_follow

__all__ = ["WIRE_SERVER", "WireWalker"]

AGENT = "wire-agent-0"
MARK = "mark-a901"
"""The wire agent's marker (``_agent_prompt.AGENT_MARK``); no planned agent has number 901."""
BODY = 64 * 1024
HEAD = 8 * 1024
WIRE_SERVER = ServerOptions(
    max_body_bytes=BODY,
    max_header_bytes=HEAD,
    header_timeout=SERVER.header_timeout,
    body_timeout=2 * SERVER.header_timeout,
    keep_alive_timeout=SERVER.keep_alive_timeout,
)
"""The server nodes' options with ``wire``: limits a client reaches cheaply, and a body timeout
that is not the head timeout, so one cannot stand in for the other."""
TRIES = 12
RETRY_APP = frozenset({500, 502, 503, 504})
"""An app's answers that a fault explains (a 500 is a bug, but ``server_raised_nothing`` judges
it): the probe is tried again on another node."""
TYPED = (
    ("user_message",),
    ("tool_return_message",),
    ("assistant_message", "user_message"),
    ("tool_call_message",),
)


class _Cut(Exception):
    """The connection closed (or broke) before a whole answer came."""


_BROKEN = (trio.BrokenResourceError, trio.ClosedResourceError, OSError, _Cut)


class _Raw:
    """One raw connection: write bytes, read HTTP/1.1 answers (content-length or chunked)."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buf = b""
        self.interim: list[int] = []  # the 1xx answers read, in order
        self.head_only = False  # the next answer is to a HEAD: it has no body
        self.life = -1  # the server node's incarnation when the connection opened

    async def send(self, data: bytes) -> None:
        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
            raise _Cut(str(error)) from None

    async def _more(self) -> None:
        try:
            data = await self.stream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
            raise _Cut(str(error)) from None
        if not data:
            raise _Cut("EOF")
        self.buf += data

    async def _until(self, marker: bytes) -> bytes:
        while marker not in self.buf:
            await self._more()
        head, self.buf = self.buf.split(marker, 1)
        return head

    async def _take(self, n: int) -> bytes:
        while len(self.buf) < n:
            await self._more()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    async def interim_within(self, within: float) -> int | None:
        """The status of the next answer if its head comes within ``within`` seconds (a 1xx
        is read and kept in ``interim``; a final answer stays to be read), else ``None``."""
        with trio.move_on_after(within):
            while b"\r\n\r\n" not in self.buf:
                await self._more()
            status = int(self.buf.split(b"\r\n", 1)[0].split(b" ")[1])
            if status < 200:
                self.buf = self.buf.split(b"\r\n\r\n", 1)[1]
                self.interim.append(status)
            return status
        return None

    async def answer(self) -> tuple[int, dict[str, str], bytes]:
        while True:
            head = (await self._until(b"\r\n\r\n")).decode("latin-1")
            line, *rest = head.split("\r\n")
            status = int(line.split(" ")[1])
            headers = {}
            for h in rest:
                name, _, value = h.partition(":")
                headers[name.strip().lower()] = value.strip()
            if status >= 200:
                break
            self.interim.append(status)
        if self.head_only:
            self.head_only = False
            return status, headers, b""
        if "content-length" in headers:
            return status, headers, await self._take(int(headers["content-length"]))
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int((await self._until(b"\r\n")).split(b";")[0], 16)
                body += await self._take(size)
                await self._until(b"\r\n")
                if not size:
                    return status, headers, body
        return status, headers, b""

    async def closed(self, within: float) -> bool:
        """Whether the server closes the connection within ``within`` seconds."""
        with trio.move_on_after(within):
            try:
                while True:
                    await self._more()
            except _Cut:
                return True
        return False

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self.stream)


def _head(
    method: str, path: str, node: str, extra: Sequence[str] = (), version: str = "1.1"
) -> bytes:
    lines = [f"{method} {path} HTTP/{version}", f"host: {node}:{PORT}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _padded(value: str, size: int) -> bytes:
    """``{"value": value}`` padded with spaces to exactly ``size`` bytes."""
    body = json.dumps({"value": value}).encode()
    return body + b" " * (size - len(body))


def _chunked(body: bytes, piece: int) -> bytes:
    out = b""
    for at in range(0, len(body), piece):
        part = body[at : at + piece]
        out += b"%x\r\n" % len(part) + part + b"\r\n"
    return out + b"0\r\n\r\n"


def _detail(body: bytes) -> bool:
    try:
        value = json.loads(body)
    except ValueError:
        return False
    return isinstance(value, dict) and isinstance(value.get("detail"), str)


def _msg(m: Mapping[str, Any]) -> MsgSeen:
    kind = str(m.get("message_type"))
    call = m.get("tool_call") or {}
    tool = call.get("name") if isinstance(call, dict) else None
    call_id = call.get("tool_call_id") if isinstance(call, dict) else None
    if kind == "tool_return_message":
        tool, call_id = m.get("name"), m.get("tool_call_id")
    return MsgSeen(
        id=str(m.get("id")),
        type=kind,
        run_id=m.get("run_id"),
        otid=m.get("otid"),
        tool=tool,
        call_id=call_id,
        status=m.get("status"),
    )


class WireWalker:
    """Drives the wire probes and the message views (see the module docstring)."""

    def __init__(
        self, clients: Any, rng: Any, *, cut_bodies: bool = False, threads: bool = False
    ) -> None:
        self.clients = clients
        self.rng = rng
        self.cut_bodies = cut_bodies  # wire_cut_bodies: also bodies the client abandons
        self.threads = threads  # wire_threads: no raw probes; background sends, followed
        self.state = {"node": rng.choice(clients.world.node_names)}
        self.log = WireLog()
        self.requests = 0
        self.agent: str | None = None
        self.block: str | None = None
        self.values = 0

    # -- JSON requests, retried like every client request ------------------------------------
    async def _json(
        self,
        what: str,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        before_retry: Callable[[str], Awaitable[Any]] | None = None,
    ) -> Any:
        self.requests += 1
        http: httpx.AsyncClient = self.clients.link.http

        async def on(node: str, number: int) -> Any:
            if number > 1 and before_retry is not None:
                found = await before_retry(node)  # part of this attempt, not a request of its own
                if found is not None:
                    return found
            url = f"http://{node}:{PORT}{path}"
            got = await http.request(method, url, json=body, params=params)
            if got.status_code >= 400:
                raise letta_client.APIStatusError(
                    f"{what}: {got.status_code}", response=got, body=_body(got)
                )
            return got.json() if got.content else None

        key = f"wire #{self.requests} {what}"
        return await self.clients._call(key, "", on, self.rng, self.state)

    async def _get(self, node: str, path: str, params: Mapping[str, Any]) -> Any:
        """A look-up inside an attempt of another request (its errors are that attempt's)."""
        http: httpx.AsyncClient = self.clients.link.http
        got = await http.get(f"http://{node}:{PORT}{path}", params=params)
        if got.status_code >= 400:
            raise letta_client.APIStatusError(
                f"GET {path}: {got.status_code}", response=got, body=_body(got)
            )
        return got.json()

    async def _stream(
        self, what: str, path: str, body: Any
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """A streamed send: its message frames and its final frames."""
        self.requests += 1
        http: httpx.AsyncClient = self.clients.link.http

        async def on(node: str, number: int) -> Any:
            url = f"http://{node}:{PORT}{path}"
            frames: list[dict[str, Any]] = []
            ending: list[str] = []
            async with http.stream("POST", url, json=body) as got:
                if got.status_code >= 400:
                    await got.aread()
                    raise letta_client.APIStatusError(
                        f"{what}: {got.status_code}", response=got, body=_body(got)
                    )
                error = False
                async for line in got.aiter_lines():
                    if line.startswith("event: error"):
                        error = True
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    data = json.loads(line[6:])
                    if error:
                        raise letta_client.APIStatusError(what, response=got, body=data)
                    kind = data.get("message_type")
                    if kind in ("stop_reason", "usage_statistics"):
                        ending.append(kind)
                    elif kind != "ping":
                        frames.append(data)
            if "stop_reason" not in ending:
                raise IncompleteStreamError(f"{what}: no stop reason")
            return frames, ending

        key = f"wire #{self.requests} {what}"
        result: tuple[list[dict[str, Any]], list[str]] = await self.clients._call(
            key, "", on, self.rng, self.state
        )
        return result

    async def run(self) -> None:
        await self._phases(
            (self._setup, self._messages)
            if self.threads
            else (self._setup, self._probes, self._messages),
            lambda: self.agent is not None and self.block is not None,
            self.log.problems,
            "wire",
        )

    async def _phases(
        self,
        phases: Sequence[Callable[[], Awaitable[None]]],
        ready: Callable[[], bool],
        problems: list[str],
        walk: str,
    ) -> None:
        """The first phase, then the others while ``ready()``; a phase that raises (a request
        the client must not retry) is recorded in ``problems`` and the walk goes on."""
        for phase in phases:
            if phase != phases[0] and not ready():
                continue
            try:
                await phase()
            except Exception as error:
                name = phase.__name__.strip("_")
                problems.append(f"{walk} {name}: {type(error).__name__}: {error}")

    async def _memgpt_agent(self, name: str, human: str) -> str:
        """Create (or, on a retry, find) the memgpt agent ``name``; its id."""

        async def find_agent(node: str) -> Any:
            found = await self._get(node, "/v1/agents/", {"name": name})
            return found[0] if found else None

        agent = await self._json(
            f"create {name}",
            "POST",
            "/v1/agents/",
            {
                "name": name,
                "agent_type": "memgpt_agent",
                "memory_blocks": [
                    {"label": "human", "value": human, "limit": 4000},
                    {"label": "persona", "value": "A terse helper.", "read_only": True},
                ],
                "tool_ids": [builtin_id(n) for n in default_tool_names("memgpt_agent")],
                "include_base_tools": False,
            },
            before_retry=find_agent,
        )
        return str(agent["id"])

    async def _setup(self) -> None:
        self.agent = await self._memgpt_agent(AGENT, f"The wire walker ({MARK}).")

        async def find_block(node: str) -> Any:
            found = await self._get(node, "/v1/blocks/", {"label": "Wire-0"})
            return found[0] if found else None

        block = await self._json(
            "create block Wire-0",
            "POST",
            "/v1/blocks/",
            {"label": "Wire-0", "value": "wire 0", "limit": 1000},
            before_retry=find_block,
        )
        self.block = str(block["id"])

    # -- 1. raw requests -----------------------------------------------------------------------
    async def _value(self) -> str | None:
        got = await self._json("read Wire-0", "GET", f"/v1/blocks/{self.block}")
        return str(got.get("value")) if isinstance(got, dict) else None

    def _next_value(self) -> str:
        self.values += 1
        return f"wire {self.values}"

    def _life(self, node: str) -> int:
        """The node's incarnation while it is up (-1 when it is down)."""
        server = self.clients.world.sim.node(node)
        return int(server.incarnation) if server.alive else -1

    async def _open(self, node: str) -> _Raw:
        raw = _Raw(await trio.open_tcp_stream(node, PORT))
        raw.life = self._life(node)
        return raw

    async def _read_check(self, raw: _Raw, node: str) -> bool | None:
        """A GET of the block on ``raw``: whether it answered the block (None: unknown). A
        connection cut while the node that accepted it is still up was cut by its server:
        that is a wrong answer, not an unknown one (no other fault cuts connections here)."""
        try:
            await raw.send(_head("GET", f"/v1/blocks/{self.block}", node))
            with trio.fail_after(self.clients.timeout):
                status, _, body = await raw.answer()
        except _BROKEN:
            return False if raw.life >= 0 and self._life(node) == raw.life else None
        except trio.TooSlowError:
            return None
        except (ValueError, IndexError):
            return False  # not an HTTP answer: bytes of an earlier one were left over
        if status >= 500:
            return None
        try:
            return bool(status == 200 and json.loads(body).get("id") == self.block)
        except ValueError:
            return False

    async def _health(self, node: str) -> bool | None:
        """``GET /v1/health/`` on a new connection: whether it answered ``ok`` (None: a
        crash cut it)."""
        try:
            raw = await self._open(node)
        except OSError:
            return None
        try:
            await raw.send(_head("GET", "/v1/health/", node))
            status, _, body = await raw.answer()
        except _BROKEN:
            return False if raw.life >= 0 and self._life(node) == raw.life else None
        except (ValueError, IndexError):
            return False
        finally:
            await raw.aclose()
        try:
            return bool(status == 200 and json.loads(body).get("status") == "ok")
        except ValueError:
            return False

    async def _fresh_check(self, node: str) -> bool | None:
        try:
            raw = await self._open(node)
        except OSError:
            return None
        try:
            return await self._read_check(raw, node)
        finally:
            await raw.aclose()

    async def _probe(
        self,
        what: str,
        want: int,
        send: Callable[[_Raw, str], Awaitable[None]],
        value: str | None = None,
        want_closed: bool | None = None,
        want_interim: tuple[int, ...] | None = None,
    ) -> None:
        """Send a raw request (``send(raw, node)``) until a node answers it (a cut connection
        or an app's 5xx is tried again on another node), and log what came back."""
        nodes = self.clients.world.node_names
        for _ in range(TRIES):
            node = self.state["node"]
            seen: WireSeen | None = None
            try:
                raw = await self._open(node)
            except OSError:
                raw = None
            if raw is not None:
                try:
                    seen = await self._attempt(what, want, send, raw, node, want_closed)
                    if seen is not None:
                        seen = _with(seen, interim=tuple(raw.interim), want_interim=want_interim)
                finally:
                    await raw.aclose()
            if seen is not None:
                if what.startswith("expect") and want == SERVED:
                    seen = _with(seen, want_interim=(100,))
                elif what.startswith("expect"):
                    seen = _with(seen, want_interim=())
                if value is not None:
                    stored = await self._value()
                    seen = _with(seen, applied=stored == value)
                self.log.probes.append(seen)
                return
            if len(nodes) > 1:
                self.state["node"] = self.rng.choice([n for n in nodes if n != node])
            await trio.sleep(1.0)
        self.log.stuck.append(f"wire probe {what}: no node answered in {TRIES} tries")

    async def _attempt(
        self,
        what: str,
        want: int,
        send: Callable[[_Raw, str], Awaitable[None]],
        raw: _Raw,
        node: str,
        want_closed: bool | None,
    ) -> WireSeen | None:
        try:
            with trio.fail_after(self.clients.timeout):
                try:
                    await send(raw, node)
                except _Cut:
                    pass  # the server may have answered (and closed) before the last piece
                status, headers, body = await raw.answer()
        except (*_BROKEN, trio.TooSlowError):
            return None
        except (ValueError, IndexError):  # not an HTTP answer
            return WireSeen(what, want, 0, want_closed=want_closed)
        if status in RETRY_APP and status != want:
            return None  # the app could not serve it now (storage, a crash): tried again
        closes = headers.get("connection", "").lower() == "close"
        seen = WireSeen(what, want, status, _detail(body), closes, want_closed=want_closed)
        if want in (SERVED, ANSWERED) and want_closed is None:
            if closes:  # HTTP/1.1 keeps the connection: the answer must not end it
                return _with(seen, closed=True, want_closed=False)
            return _with(seen, after=await self._read_check(raw, node))
        closed = await raw.closed(5.0)
        return _with(seen, closed=closed, after=await self._fresh_check(node))

    async def _probes(self) -> None:
        block = f"/v1/blocks/{self.block}"
        json_head = ("content-type: application/json",)
        Send = Callable[[_Raw, str], Awaitable[None]]

        def declared(value: str, size: int) -> Send:
            async def send(raw: _Raw, node: str) -> None:
                body = _padded(value, size)
                extra = (*json_head, f"content-length: {len(body)}")
                await raw.send(_head("PATCH", block, node, extra) + body)

            return send

        def chunked(value: str, size: int, piece: int) -> Send:
            async def send(raw: _Raw, node: str) -> None:
                extra = (*json_head, "transfer-encoding: chunked")
                body = _chunked(_padded(value, size), piece)
                await raw.send(_head("PATCH", block, node, extra) + body)

            return send

        def slow_body(value: str, pause: float, finish: bool) -> Send:
            async def send(raw: _Raw, node: str) -> None:
                body = _padded(value, 2000)
                extra = (*json_head, f"content-length: {len(body)}")
                await raw.send(_head("PATCH", block, node, extra) + body[:1000])
                await trio.sleep(pause)
                if finish:
                    await raw.send(body[1000:])

            return send

        def slow_head(pause: float, finish: bool) -> Send:
            async def send(raw: _Raw, node: str) -> None:
                head = _head("GET", block, node, ("x-wire: slow",))
                third = len(head) // 3
                await raw.send(head[:third])
                await trio.sleep(pause)
                await raw.send(head[third : 2 * third])
                await trio.sleep(pause)
                if finish:
                    await raw.send(head[2 * third :])

            return send

        def expecting(value: str, size: int) -> Send:
            """``expect: 100-continue``: the body goes after a 100, or after 5 s without one
            (as curl does); not at all when a final answer comes first."""

            async def send(raw: _Raw, node: str) -> None:
                body = _padded(value, size)
                extra = (*json_head, f"content-length: {len(body)}", "expect: 100-continue")
                await raw.send(_head("PATCH", block, node, extra))
                status = await raw.interim_within(5.0)
                if status is None or status < 200:
                    await raw.send(body)

            return send

        async def head(raw: _Raw, node: str) -> None:
            raw.head_only = True
            await raw.send(_head("HEAD", block, node))

        def plain(method: str, extra: Sequence[str] = (), version: str = "1.1") -> Send:
            async def send(raw: _Raw, node: str) -> None:
                await raw.send(_head(method, block, node, extra, version))

            return send

        header_timeout = WIRE_SERVER.header_timeout
        body_timeout = WIRE_SERVER.body_timeout
        pause = (header_timeout + body_timeout) / 2
        writes: list[tuple[str, int, Callable[[str], Send]]] = [
            ("expect: 100-continue, a body of 2,000 bytes", SERVED, lambda v: expecting(v, 2000)),
            (
                "expect: 100-continue, a declared body of max_body_bytes + 1",
                413,
                lambda v: expecting(v, BODY + 1),
            ),
            (
                f"a body of exactly max_body_bytes ({BODY} bytes), declared",
                SERVED,
                lambda v: declared(v, BODY),
            ),
            ("a body of max_body_bytes + 1, declared", 413, lambda v: declared(v, BODY + 1)),
            (
                f"a chunked body of exactly max_body_bytes ({BODY} bytes)",
                SERVED,
                lambda v: chunked(v, BODY, 16384),
            ),
            (
                "a chunked body of max_body_bytes + 1, in 4 KiB pieces",
                413,
                lambda v: chunked(v, BODY + 1, 4096),
            ),
            (
                f"a body that pauses {pause}s (header_timeout {header_timeout}s, body_timeout "
                f"{body_timeout}s)",
                SERVED,
                lambda v: slow_body(v, pause, True),
            ),
            (
                f"a body that stalls {body_timeout + 5}s (body_timeout {body_timeout}s)",
                408,
                lambda v: slow_body(v, body_timeout + 5, False),
            ),
        ]
        reads: list[tuple[str, int, Send]] = [
            (
                f"a head of {HEAD // 2} bytes (max_header_bytes {HEAD})",
                SERVED,
                plain("GET", ("x-wire: " + "k" * (HEAD // 2),)),
            ),
            (
                f"a head of {2 * HEAD} bytes (max_header_bytes {HEAD})",
                431,
                plain("GET", ("x-wire: " + "k" * (2 * HEAD),)),
            ),
            (
                f"a head in three pieces {header_timeout / 4}s apart (header_timeout "
                f"{header_timeout}s)",
                SERVED,
                slow_head(header_timeout / 4, True),
            ),
            (
                f"a head in three pieces {header_timeout * 0.6}s apart (header_timeout "
                f"{header_timeout}s)",
                408,
                slow_head(header_timeout * 0.6, False),
            ),
            ("an HTTP/2.0 request line", 505, plain("GET", version="2.0")),
            ("a HEAD of the block", ANSWERED, head),
        ]
        # each step: ("write", index in writes), ("read", index in reads), or a name
        steps: list[tuple[str, int]] = [
            *(("write", k) for k in range(len(writes))),
            *(("read", k) for k in range(len(reads))),
            ("http/1.0", 0),
            ("pipelined", 0),
            ("beside", 0),
            ("idle", 0),
        ]
        self.rng.shuffle(steps)
        for kind, k in steps:
            if kind == "write":
                what, want, make = writes[k]
                value = self._next_value()
                await self._probe(what, want, make(value), value=value)
            elif kind == "read":
                what, want, send = reads[k]
                await self._probe(what, want, send)
            elif kind == "http/1.0":
                await self._probe(
                    "an HTTP/1.0 request", SERVED, plain("GET", version="1.0"), want_closed=True
                )
            elif kind == "pipelined":
                await self._pipelined()
            elif kind == "idle":
                await self._idle()
            else:
                await self._beside_slow(slow_body(self._next_value(), body_timeout + 5, False))
        if self.cut_bodies:  # after the shuffled steps: without it, no draw moves
            await self._abandoned(json_head)

    async def _abandoned(self, json_head: tuple[str, ...]) -> None:
        """Bodies the client gives up on (``wire_cut_bodies``): a declared body and a chunked
        one, each cut by the client closing the connection after half of it (the half holds
        the whole JSON object; the rest is padding), must change nothing."""
        block = f"/v1/blocks/{self.block}"
        for what, chunked in (
            ("a declared body of 2,000 bytes, the client closing after 1,000", False),
            ("a chunked body of 2,000 bytes, the client closing after 1,000", True),
        ):
            value, node = self._next_value(), self.state["node"]
            body = _padded(value, 2000)
            if chunked:
                extra = (*json_head, "transfer-encoding: chunked")
                data = _chunked(body, 1000)[: 5 + 1000 + 2 + 1]  # chunk 1, then 1 byte of chunk 2
            else:
                extra = (*json_head, f"content-length: {len(body)}")
                data = body[:1000]
            try:
                raw = await self._open(node)
            except OSError:
                continue
            try:
                await raw.send(_head("PATCH", block, node, extra) + data)
            except _BROKEN:
                continue
            finally:
                await raw.aclose()
            await trio.sleep(2.0)  # what the server does with it, it does by then
            stored = await self._value()
            self.log.probes.append(WireSeen(what, ABANDONED, None, applied=stored == value))

    async def _idle(self) -> None:
        """Idle connections: a kept-alive one serves a GET sent within
        ``keep_alive_timeout``, and is closed without a byte once idle longer; a new one that
        sends nothing is closed without a byte after ``header_timeout``."""
        keep, header = WIRE_SERVER.keep_alive_timeout, WIRE_SERVER.header_timeout
        for what, first in (
            (f"a kept-alive connection idle {keep * 0.6}s, then {keep * 1.6}s", True),
            (f"a new connection that sends nothing for {header + 3}s", False),
        ):
            node = self.state["node"]
            try:
                raw = await self._open(node)
            except OSError:
                continue
            try:
                status: int | None = None
                after: bool | None = None
                if first:
                    with trio.fail_after(self.clients.timeout):
                        await raw.send(_head("GET", f"/v1/blocks/{self.block}", node))
                        status = (await raw.answer())[0]
                    await trio.sleep(keep * 0.6)
                    after = await self._read_check(raw, node)
                    closed = await raw.closed(keep * 1.6)
                else:
                    closed = await raw.closed(header + 3)
            except (*_BROKEN, trio.TooSlowError, ValueError, IndexError):
                continue  # a crash cut it: nothing to judge
            finally:
                await raw.aclose()
            if first and (after is None or status in RETRY_APP):
                continue
            quiet = raw.buf == b""
            seen = WireSeen(what, IDLE, status, closed=closed, after=after, quiet=quiet)
            self.log.probes.append(seen)
            if first and after is False:
                self.log.probes.append(WireSeen(what, SERVED, status, after=False))

    async def _pipelined(self) -> None:
        """Two GETs in one write: two answers, in order, each to its own request."""

        async def send(raw: _Raw, node: str) -> None:
            agent = _head("GET", f"/v1/agents/{self.agent}", node)
            await raw.send(agent + _head("GET", f"/v1/blocks/{self.block}", node))

        nodes = self.clients.world.node_names
        for _ in range(TRIES):
            node = self.state["node"]
            try:
                raw = await self._open(node)
            except OSError:
                raw = None
            if raw is not None:
                try:
                    with trio.fail_after(self.clients.timeout):
                        await send(raw, node)
                        first = await raw.answer()
                        second = await raw.answer()
                except (*_BROKEN, trio.TooSlowError):
                    first = second = None  # type: ignore[assignment]
                finally:
                    await raw.aclose()
                if (
                    first is not None
                    and second is not None
                    and max(first[0], second[0]) not in RETRY_APP
                ):
                    ids = [_id(first[2]), _id(second[2])]
                    right = ids == [self.agent, self.block]
                    what = "two GETs pipelined in one write"
                    self.log.probes.append(
                        WireSeen(what, SERVED, max(first[0], second[0]), after=right)
                    )
                    return
            if len(nodes) > 1:
                self.state["node"] = self.rng.choice([n for n in nodes if n != node])
            await trio.sleep(1.0)
        self.log.stuck.append(f"wire probe pipelining: no node answered in {TRIES} tries")

    async def _beside_slow(self, stall: Callable[[_Raw, str], Awaitable[None]]) -> None:
        """A GET on a new connection while another connection's body stalls: served at once."""
        node = self.state["node"]
        got: list[bool | None] = []

        async def slow() -> None:
            try:
                raw = await self._open(node)
            except OSError:
                return
            try:
                with trio.move_on_after(WIRE_SERVER.body_timeout + 10):
                    await stall(raw, node)
                    await raw.answer()
            except _BROKEN:
                pass
            finally:
                await raw.aclose()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow)
            await trio.sleep(2.0)
            life = self._life(node)
            with trio.move_on_after(5.0) as scope:  # the health route reads no storage
                got.append(await self._health(node))
            if scope.cancelled_caught:  # slow: wrong unless a crash explains it
                got.append(False if life >= 0 and self._life(node) == life else None)
        if got and got[0] is not None:
            self.log.probes.append(
                WireSeen(
                    "GET /v1/health/ on another connection while a body stalls (answered within "
                    "5 s)",
                    SERVED,
                    200 if got[0] else 0,
                    after=got[0],
                )
            )

    # -- 2. the message views ------------------------------------------------------------------
    async def _messages(self) -> None:
        agent = self.agent
        assert agent is not None
        convs: list[str] = []
        for k in range(2):
            summary = f"wire-conv-{k}"

            async def find(node: str, summary: str = summary) -> Any:
                found = await self._get(
                    node,
                    "/v1/conversations/",
                    {"agent_id": agent, "summary_search": summary, "limit": 10},
                )
                mine = [c for c in found if c.get("summary") == summary]
                return mine[0] if mine else None

            made = await self._json(
                f"create conversation {summary}",
                "POST",
                "/v1/conversations/",
                {"summary": summary},
                {"agent_id": agent},
                before_retry=find,
            )
            convs.append(str(made["id"]))
        sent: dict[str, set[str]] = {"default": set(), **{c: set() for c in convs}}
        runs: dict[str, set[str]] = {c: set() for c in convs}
        plan: list[tuple[str, str, bool, tuple[str, ...] | None]] = []
        for thread in ("default", *convs):
            for route in ("json", "stream"):
                use = self.rng.random() < 0.5
                types = (
                    None
                    if self.rng.random() < 0.6
                    else tuple(
                        sorted(
                            self.rng.sample(
                                [
                                    "tool_call_message",
                                    "tool_return_message",
                                    "assistant_message",
                                    "user_message",
                                ],
                                2,
                            )
                        )
                    )
                )
                plan.append((thread, route, use, types))
        plan.append(("default", "stream", False, None))
        plan.append(("default", "json", False, None))
        for n, (thread, route, use, types) in enumerate(plan):
            otid = f"wire-{n}"
            body: dict[str, Any] = {
                "messages": [
                    {"role": "user", "content": f"remember wire note {n} ({MARK})", "otid": otid}
                ],
                "use_assistant_message": use,
            }
            if types is not None:
                body["include_return_message_types"] = list(types)
            what = f"send {n} to {thread} ({route}, use_assistant_message={use}, types={types})"
            path = (
                f"/v1/agents/{agent}/messages"
                if thread == "default"
                else f"/v1/conversations/{thread}/messages"
            )
            if route == "stream":
                body["streaming"] = True
                frames, ending = await self._stream(what, path, body)
                answer = Answer(what, use, types, tuple(_msg(f) for f in frames), tuple(ending))
            else:
                body["streaming"] = False
                got = await self._json(what, "POST", path, body)
                shown = ("stop_reason", "usage_statistics")
                end = tuple(
                    k
                    for k, field in zip(shown, ("stop_reason", "usage"), strict=True)
                    if got.get(field)
                )
                answer = Answer(what, use, types, tuple(_msg(m) for m in got["messages"]), end)
            self.log.answers.append(answer)
            sent[thread].add(otid)
            run_ids = {m.run_id for m in answer.messages if m.run_id}
            if thread in runs:
                runs[thread] |= run_ids
        if self.threads:
            threads = ["default", *convs]
            await send_and_follow(self._stream, agent, threads, sent, runs, self.log.follows, MARK)
        sent["refused"] = await self._refused(agent)
        await self._histories(agent, convs, sent)
        await self._runs(agent, convs, runs)

    async def _refused(self, agent: str) -> set[str]:
        """Sends with options the server documents as unsupported (Letta's defaults only):
        each is a 422, and its turn is never stored (its otid is in no thread)."""
        http: httpx.AsyncClient = self.clients.link.http
        otids: set[str] = set()
        for n, (field, value) in enumerate(
            (("assistant_message_tool_name", "reply"), ("assistant_message_tool_kwarg", "text"))
        ):
            otid = f"wire-refused-{n}"
            otids.add(otid)
            text = f"remember refused note {n} ({MARK})"
            body = {"messages": [{"role": "user", "content": text, "otid": otid}], field: value}
            status: int | None = None
            for _ in range(TRIES):
                node = self.state["node"]
                try:
                    with trio.fail_after(self.clients.timeout):
                        got = await http.post(
                            f"http://{node}:{PORT}/v1/agents/{agent}/messages", json=body
                        )
                    if got.status_code not in RETRY_APP:
                        status = got.status_code
                        break
                except (httpx.TransportError, trio.TooSlowError):
                    pass
                nodes = self.clients.world.node_names
                if len(nodes) > 1:
                    self.state["node"] = self.rng.choice([x for x in nodes if x != node])
                await trio.sleep(1.0)
            self.log.refusals.append((f"a send with {field}={value!r}", 422, status))
        return otids

    async def _retrieve(self, raw: Sequence[MsgSeen], shown: Sequence[MsgSeen]) -> None:
        """A few messages by id (``GET /v1/messages/{id}``): each is what the history shows
        under that id (a hidden ``send_message`` return: as stored)."""
        kinds = {m.id: m.type for m in raw} | {m.id: m.type for m in shown}
        ids = sorted(kinds)
        for mid in self.rng.sample(ids, min(6, len(ids))):
            got = await self._json(f"retrieve {mid}", "GET", f"/v1/messages/{mid}")
            seen = tuple((str(m.get("id")), str(m.get("message_type"))) for m in got)
            self.log.retrieved.append((mid, kinds[mid], seen))

    async def _list(self, what: str, path: str, **params: Any) -> list[MsgSeen]:
        got = await self._json(what, "GET", path, None, params)
        return [_msg(m) for m in got]

    async def _histories(self, agent: str, convs: list[str], sent: dict[str, set[str]]) -> None:
        path = f"/v1/agents/{agent}/messages"
        raw = await self._list(
            "history (raw)", path, order="asc", limit=1000, use_assistant_message=False
        )
        shown = await self._list(
            "history (shown)", path, order="asc", limit=1000, use_assistant_message=True
        )
        self.log.histories.append((f"{AGENT}'s history", tuple(raw), tuple(shown)))
        await self._retrieve(raw, shown)
        for types in TYPED:
            use = self.rng.random() < 0.5
            full = raw if not use else shown
            order = self.rng.choice(("asc", "desc"))
            limit = self.rng.choice((1, 2, 3))
            params: dict[str, Any] = {
                "order": order,
                "limit": limit,
                "use_assistant_message": use,
                "include_return_message_types": list(types),
            }
            got = await self._list(f"history by type {types}", path, **params)
            self.log.typed.append(
                TypedSeen(
                    f"{AGENT}'s history (use_assistant_message={use})",
                    types,
                    limit,
                    order,
                    tuple(m.id for m in got),
                    tuple(m.id for m in full),
                    tuple(m.type for m in full),
                )
            )
        if self.threads:
            await dense_reads(self._list, f"{AGENT}'s history", path, shown, True, self.log.typed)
        everyone = set().union(*sent.values())
        self.log.threads.append(
            ThreadSeen(
                f"{AGENT}'s history",
                frozenset(sent["default"]),
                frozenset(everyone - sent["default"]),
                tuple(raw),
            )
        )
        for conv in convs:
            cpath = f"/v1/conversations/{conv}/messages"
            asc = await self._list(f"{conv} messages", cpath, order="asc", limit=1000)
            desc = await self._list(f"{conv} messages desc", cpath, order="desc", limit=1000)
            self.log.threads.append(
                ThreadSeen(
                    f"conversation {conv}'s messages",
                    frozenset(sent[conv]),
                    frozenset(everyone - sent[conv]),
                    tuple(asc),
                )
            )
            self.log.orders.append(
                OrderSeen(
                    f"conversation {conv}'s messages",
                    tuple(m.id for m in asc),
                    tuple(m.id for m in desc),
                )
            )
            if self.threads:
                what = f"conversation {conv}'s messages"
                await dense_reads(self._list, what, cpath, asc, True, self.log.typed)
            types = ("user_message",)
            got = await self._list(
                f"{conv} messages by type",
                cpath,
                order="asc",
                limit=1,
                include_return_message_types=list(types),
            )
            self.log.typed.append(
                TypedSeen(
                    f"conversation {conv}'s messages",
                    types,
                    1,
                    "asc",
                    tuple(m.id for m in got),
                    tuple(m.id for m in asc),
                    tuple(m.type for m in asc),
                )
            )

    async def _runs(self, agent: str, convs: list[str], runs: dict[str, set[str]]) -> None:
        for conv in convs:
            got = await self._json(
                f"runs of {conv}",
                "GET",
                "/v1/runs/",
                None,
                {"agent_id": agent, "conversation_id": conv, "limit": 1000},
            )
            listed = tuple((str(r["id"]), r.get("conversation_id")) for r in got)
            self.log.runs.append(
                RunsSeen(f"runs.list(conversation_id={conv})", conv, frozenset(runs[conv]), listed)
            )
        every = await self._json(
            "runs of the agent", "GET", "/v1/runs/", None, {"agent_id": agent, "limit": 1000}
        )
        for r in every:
            run = str(r["id"])
            for kind in ("steps", "messages"):
                path = f"/v1/runs/{run}/{kind}"
                asc = await self._json(f"{run} {kind}", "GET", path, None, {"order": "asc"})
                desc = await self._json(f"{run} {kind} desc", "GET", path, None, {"order": "desc"})
                self.log.orders.append(
                    OrderSeen(
                        f"run {run}'s {kind}",
                        tuple(str(x["id"]) for x in asc),
                        tuple(str(x["id"]) for x in desc),
                    )
                )


def _with(seen: WireSeen, **changes: Any) -> WireSeen:
    return attrs.evolve(seen, **changes)


def _id(body: bytes) -> str | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return str(value.get("id")) if isinstance(value, dict) else None


def _body(got: httpx.Response) -> Any:
    try:
        return got.json()
    except ValueError:
        return None
