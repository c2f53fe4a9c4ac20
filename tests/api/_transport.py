"""A synchronous httpx transport that serves each request by stepping a persistent simulation.

The sync ``Letta`` client needs a sync ``httpx.Client``. Instead of a server thread, every
request is one ``SimulationHandle.step``: the ASGI app runs inside the simulation (virtual
time, seeded scheduling, the same process and thread), and the response, streams included, is
returned once the app has finished it. No thread, no socket, deterministic.
"""

from __future__ import annotations

from typing import Any

import httpx

import kelpie_dst
from kelpie_agent.api import create_app  # noqa: F401  (imported before any simulation starts)


class SimStepTransport(httpx.BaseTransport):
    def __init__(self, handle: kelpie_dst.SimulationHandle, app: Any) -> None:
        self.handle = handle
        self.app = app
        self.requests = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        self.requests += 1
        status, headers, content = self.handle.step(_serve, self.app, request, body)
        return httpx.Response(
            status, headers=headers, stream=httpx.ByteStream(content), request=request
        )


async def _serve(
    app: Any, request: httpx.Request, body: bytes
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Call the ASGI app once with ``request``; collect its whole response."""
    import trio

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.url.scheme,
        "path": request.url.path,
        "raw_path": request.url.raw_path.split(b"?")[0],
        "query_string": request.url.query,
        "root_path": "",
        "headers": [(k.lower(), v) for k, v in request.headers.raw],
        "client": ("127.0.0.1", 50000),
        "server": (request.url.host, request.url.port or 80),
    }
    sent_body = False
    complete = trio.Event()
    status = 500
    headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        await complete.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                complete.set()

    await app(scope, receive, send)
    complete.set()
    return status, headers, b"".join(chunks)
