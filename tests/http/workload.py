"""The HTTP server inside a simulation: an app on node "api", an httpx client on "main".

Module-level entry points, so ``kelpie_dst.check_determinism`` can import them in a fresh
process. The client sends JSON requests, SSE streams and streams it abandons, under whatever
network faults the run has, then heals the network and checks that the server still answers
(liveness) and saw the abandoned stream's disconnect. Every response the client completed must
be exactly the expected one; a stream cut by a fault must have delivered a prefix of it. The
server's access log goes into the trace.
"""

from __future__ import annotations

import json
from functools import partial

import httpx
import trio

import kelpie_dst
from kelpie_agent.http import AccessRecord, ServerOptions, serve

from .apps import AppLog, digest, fastapi_app, raw_app

PORT = 8283
OPTIONS = ServerOptions(header_timeout=5.0, body_timeout=5.0, keep_alive_timeout=3.0)


def _access(log: AppLog, record: AccessRecord) -> None:
    log.record_access(record)
    kelpie_dst.log("access", line=record.line())


async def api_node(node: kelpie_dst.Node, kind: str) -> None:
    log = AppLog()
    node.volatile["log"] = log
    app = fastapi_app(log) if kind == "fastapi" else raw_app(log)
    await serve(app, "0.0.0.0", PORT, OPTIONS, logger=log, access_log=partial(_access, log))


def _timed_out(response: httpx.Response, out: Outcome) -> bool:
    """A 408 is a correct answer when a fault held the request body past ``body_timeout``."""
    if response.status_code != 408:
        return False
    assert response.json()["detail"].startswith("Request Timeout"), response.text
    out.timeouts += 1
    return True


class Outcome:
    def __init__(self) -> None:
        self.complete = 0
        self.failed = 0
        self.partial_streams = 0
        self.timeouts = 0


async def _json_request(client: httpx.AsyncClient, kind: str, i: int, out: Outcome) -> None:
    item = {"i": i, "pad": "x" * (i * 37 % 5000)}
    if kind == "fastapi":
        response = await client.post("/v1/items/", json=item)
        if _timed_out(response, out):
            return
        assert response.status_code == 200, (response.status_code, response.text)
        expected = digest(json.dumps(item, sort_keys=True).encode())
        assert response.json() == {"item": item, "sha": expected}, response.text
    else:
        body = json.dumps(item).encode()
        response = await client.post("/echo", content=body)
        if _timed_out(response, out):
            return
        assert response.status_code == 200, (response.status_code, response.text)
        assert response.json()["sha"] == digest(body), response.text
        assert response.json()["length"] == len(body)
    out.complete += 1


async def _stream(client: httpx.AsyncClient, kind: str, count: int, out: Outcome) -> None:
    if kind == "fastapi":
        request = client.stream("POST", "/v1/stream", json={"n": count})
        expected = [f'data: {{"seq": {i}, "message_type": "ping"}}' for i in range(count)]
    else:
        request = client.stream("POST", f"/sse?n={count}", content=b"")
        expected = [f"data: {i}" for i in range(count)]
    expected.append("data: [DONE]")
    got: list[str] = []
    try:
        async with request as response:
            if response.status_code == 408:
                await response.aread()
                _timed_out(response, out)
                return
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line:
                    got.append(line)
    except httpx.TransportError:
        assert got == expected[: len(got)], got  # cut by the network: a clean prefix
        out.partial_streams += 1
        raise
    assert got == expected, got
    out.complete += 1


async def _abandon_stream(client: httpx.AsyncClient, kind: str) -> None:
    """Read three frames of a long stream, then hang up."""
    if kind == "fastapi":
        request = client.stream("POST", "/v1/stream", json={"n": 100000, "interval": 0.05})
    else:
        request = client.stream("POST", "/sse", content=b"")
    async with request as response:
        seen = 0
        async for line in response.aiter_lines():
            seen += bool(line)
            if seen == 3:
                break


async def main(
    sim: kelpie_dst.Simulation, kind: str = "fastapi", requests: int = 24, gap: float = 0.5
) -> dict[str, int]:
    """``requests`` requests ``gap`` seconds apart (long enough for the partition and clog
    nemeses, which act every 5 s), then the liveness phase."""
    sim.add_node("api", partial(api_node, kind=kind))
    await trio.sleep(0.01)
    out = Outcome()
    timeout = httpx.Timeout(4.0)
    async with httpx.AsyncClient(base_url=f"http://api:{PORT}", timeout=timeout) as client:
        for i in range(requests):
            try:
                if i % 3 == 2:
                    await _stream(client, kind, 3 + i % 4, out)
                else:
                    await _json_request(client, kind, i, out)
            except httpx.TransportError as error:
                out.failed += 1
                kelpie_dst.log("client error", i=i, error=type(error).__name__)
            await trio.sleep(gap)
        # liveness: once the network heals, the server answers and notices a hang-up
        sim.heal()
        await trio.sleep(11)  # held segments drain, half-dead connections time out
    log: AppLog = sim.node("api").volatile["log"]
    log.disconnected = trio.Event()
    with trio.fail_after(30):
        async with httpx.AsyncClient(base_url=f"http://api:{PORT}", timeout=timeout) as client:
            await _json_request(client, kind, requests, out)
            await _stream(client, kind, 4, out)
            await _abandon_stream(client, kind)
            await log.disconnected.wait()
            await trio.sleep(1)  # the abandoned request's access record comes once it ends
    assert log.errors() == [], log.errors()
    assert sim.node("api").alive
    statuses = sorted({record.status for record in log.access})
    assert set(statuses) <= {0, 200, 408}, statuses
    summary = {
        "complete": out.complete,
        "failed": out.failed,
        "partial_streams": out.partial_streams,
        "timeouts": out.timeouts,
        "server_requests": len(log.access),
    }
    kelpie_dst.log("summary", **summary)
    return summary


async def main_fastapi(sim: kelpie_dst.Simulation) -> dict[str, int]:
    return await main(sim, "fastapi")


async def main_raw(sim: kelpie_dst.Simulation) -> dict[str, int]:
    return await main(sim, "raw")


async def slowloris(sim: kelpie_dst.Simulation) -> tuple[float, bytes]:
    """Trickle a request head one byte per second: the server answers 408 after
    ``header_timeout`` virtual seconds and closes."""
    sim.add_node("api", partial(api_node, kind="raw"))
    await trio.sleep(0.01)
    stream = await trio.open_tcp_stream("api", PORT)
    start = trio.current_time()
    received = b""
    async with stream, trio.open_nursery() as nursery:

        async def trickle() -> None:
            for byte in b"GET /hello HTTP/1.1\r\nhost: api\r\nx-slow: " + b"z" * 100:
                try:
                    await stream.send_all(bytes([byte]))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                await trio.sleep(1)

        nursery.start_soon(trickle)
        while chunk := await stream.receive_some(65536):
            received += chunk
        nursery.cancel_scope.cancel()
    return trio.current_time() - start, received


async def crash_and_restart(sim: kelpie_dst.Simulation) -> list[str]:
    """The server node crashes mid-stream and restarts: the client sees the cut, and the
    restarted server (a new incarnation, listening again) answers."""
    node = sim.add_node("api", partial(api_node, kind="fastapi"))
    await trio.sleep(0.01)
    outcomes: list[str] = []
    timeout = httpx.Timeout(4.0)
    async with httpx.AsyncClient(base_url=f"http://api:{PORT}", timeout=timeout) as client:
        try:
            async with client.stream("POST", "/v1/stream", json={"n": 1000}) as response:
                async for line in response.aiter_lines():
                    if line == 'data: {"seq": 2, "message_type": "ping"}':
                        sim.crash(node)
                        sim.restart(node, after=1.0)
        except httpx.TransportError as error:
            outcomes.append(f"cut: {type(error).__name__}")
        for _ in range(20):
            try:
                response = await client.get("/v1/health/")
                outcomes.append(f"health {response.status_code}")
                break
            except httpx.TransportError as error:
                outcomes.append(f"down: {type(error).__name__}")
                await trio.sleep(0.5)
    assert node.incarnation == 2
    return outcomes
