"""The HTTP driver: the real, unmodified ``letta_client`` SDK (``AsyncLetta``) over the
simulated network, against the app each server node serves with ``kelpie_agent.http``.

Requests travel as bytes over simulated TCP, so a crash resets them and a partition holds them
(and delivers them when it heals, possibly after the client gave up). What the client learns:

* an answer 2xx: acknowledged; 404 or 408: rejected (nothing applied);
* 503: the service's account, carried in the detail ("its outcome is unknown" or not);
* any other status: a bug (the machine's requests are valid; the machine fails);
* no connection (refused, or not established within ``CONNECT`` seconds): rejected;
* anything after the connection was made (reset, timeout, a cut stream, an error frame in a
  stream that had started): unknown.

The SDK's own retries are off (``max_retries=0``): the machine decides what to resend. Every
request uses a fresh connection, so a connection pooled before a crash never carries one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
import letta_client
from letta_client import AsyncLetta

from kelpie_dst.hypothesis import Outcome
from kelpie_dst.workloads import _agent_http  # noqa: F401  (warms the SDK's platform cache)

from .agent_drivers import AGENT_TYPE, BLOCKS, EXPECTED, PAGE, Listed, Reply, Sent
from .agent_world import PORT

T = TypeVar("T")
CONNECT = 5.0  # seconds to establish a connection
TIMEOUT = 30.0  # seconds for the rest (the service gives up after 20 and answers 503)
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout)


class HttpDriver:
    """``AsyncLetta`` clients on ``main``, one per server node (``http://<node>:8283``)."""

    name = "http"

    def __init__(self, servers: tuple[str, ...]) -> None:
        self.servers = servers
        self.clients: dict[str, AsyncLetta] = {}

    async def start(self) -> None:
        """Make the clients (inside the simulation: httpx binds to trio through anyio)."""
        for node in self.servers:
            http = httpx.AsyncClient(
                timeout=httpx.Timeout(TIMEOUT, connect=CONNECT),
                limits=httpx.Limits(max_keepalive_connections=0),
                verify=False,  # plain HTTP; loading the CA bundle took 30 ms a client
            )
            base = f"http://{node}:{PORT}"
            self.clients[node] = AsyncLetta(base_url=base, http_client=http, max_retries=0)

    async def _call(self, node: str, op: Callable[[AsyncLetta], Awaitable[T]]) -> Reply[T]:
        try:
            return Reply(Outcome.OK, await op(self.clients[node]))
        except httpx.TransportError as error:  # a stream cut after its response started
            return Reply(Outcome.UNKNOWN, detail=f"{type(error).__name__}: {error}")
        except letta_client.APIStatusError as error:
            detail = _detail(error)
            if error.status_code == 200:  # an error frame: the stream had started
                return Reply(Outcome.UNKNOWN, detail=detail)
            if error.status_code == 503:
                unknown = "outcome is unknown" in detail
                outcome = Outcome.UNKNOWN if unknown else Outcome.REJECTED
                return Reply(outcome, status=503, detail=detail)
            assert error.status_code in EXPECTED, f"{node} answered {error.status_code}: {detail}"
            return Reply(Outcome.REJECTED, status=error.status_code, detail=detail)
        except letta_client.APIConnectionError as error:
            cause = error.__cause__
            outcome = Outcome.REJECTED if isinstance(cause, _NOT_SENT) else Outcome.UNKNOWN
            return Reply(outcome, detail=f"{type(cause).__name__}: {cause}")

    async def create_agent(self, node: str, name: str) -> Reply[str]:
        blocks: list[Any] = [{"label": k, "value": v} for k, v in BLOCKS.items()]

        async def op(client: AsyncLetta) -> str:
            state = await client.agents.create(
                name=name, agent_type=AGENT_TYPE, memory_blocks=blocks
            )
            return state.id

        return await self._call(node, op)

    async def delete_agent(self, node: str, agent_id: str) -> Reply[None]:
        async def op(client: AsyncLetta) -> None:
            await client.agents.delete(agent_id)

        return await self._call(node, op)

    async def send_message(
        self, node: str, agent_id: str, text: str, otid: str, stream: bool
    ) -> Reply[Sent]:
        message: Any = {"role": "user", "content": text, "otid": otid}

        async def op(client: AsyncLetta) -> Sent:
            if not stream:
                response = await client.agents.messages.create(agent_id, messages=[message])
                return _sent(list(response.messages), response.stop_reason.stop_reason)
            events = await client.agents.messages.create(
                agent_id, messages=[message], streaming=True
            )
            chunks = [chunk async for chunk in events]
            stops = [c for c in chunks if c.message_type == "stop_reason"]
            return _sent(chunks, str(getattr(stops[-1], "stop_reason", "")) if stops else "")

        return await self._call(node, op)

    async def update_block(self, node: str, agent_id: str, label: str, value: str) -> Reply[str]:
        async def op(client: AsyncLetta) -> str:
            block = await client.agents.blocks.update(label, agent_id=agent_id, value=value)
            return str(block.value)

        return await self._call(node, op)

    async def insert_passage(self, node: str, agent_id: str, text: str) -> Reply[None]:
        async def op(client: AsyncLetta) -> None:
            await client.agents.passages.create(agent_id, text=text)

        return await self._call(node, op)

    async def search_passages(self, node: str, agent_id: str, query: str) -> Reply[list[str]]:
        async def op(client: AsyncLetta) -> list[str]:
            found = await client.agents.passages.search(agent_id, query=query, top_k=5)
            return [hit.content for hit in found.results]

        return await self._call(node, op)

    async def list_agents(self, node: str) -> Reply[list[Listed]]:
        async def op(client: AsyncLetta) -> list[Listed]:
            page = await client.agents.list(limit=5)  # auto-pagination: after=<last id>
            return [
                Listed(a.id, a.name, tuple((str(b.label), str(b.value)) for b in a.memory.blocks))
                async for a in page
            ]

        return await self._call(node, op)

    async def user_otids(self, node: str, agent_id: str) -> Reply[list[str]]:
        async def op(client: AsyncLetta) -> list[str]:
            page = await client.agents.messages.list(agent_id, limit=50, order="asc")
            return [
                str(getattr(m, "otid", None))
                async for m in page
                if m.message_type == "user_message"
            ]

        return await self._call(node, op)

    async def passages(self, node: str, agent_id: str) -> Reply[list[str]]:
        async def op(client: AsyncLetta) -> list[str]:
            found = await client.agents.passages.list(agent_id, limit=PAGE)
            assert len(found) < PAGE
            return [p.text for p in found]

        return await self._call(node, op)


def _sent(messages: list[Any], stop_reason: str) -> Sent:
    """What an answer (or a whole stream) said: the run, the assistant's text, the stop."""
    said = [m for m in messages if m.message_type == "assistant_message"]
    runs = [str(m.run_id) for m in messages if getattr(m, "run_id", None)]
    reply = "\n".join(str(getattr(m, "content", "")) for m in said)
    return Sent(runs[0] if runs else "", reply, stop_reason)


def _detail(error: letta_client.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        return str(body["detail"])
    return str(error)
