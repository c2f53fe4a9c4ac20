"""The agent workload's HTTP servers log their problems to the workload (``server_raised_nothing``):
a real kelpie_agent HTTP server on loopback, an app that raises, and what the log keeps."""

from __future__ import annotations

import re
from functools import partial
from typing import Any

import pytest
import trio

from kelpie_agent.http import HttpServer, serve
from kelpie_dst.workloads._agent_server_log import ServerLog
from tests.http.helpers import exchange


async def _broken(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    if scope["path"] == "/half":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        return  # never finishes the response it started
    if scope["path"] == "/ok":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"fine"})
        return
    raise KeyError("the route looked up a missing key")


@pytest.mark.trio
async def test_an_exception_escaping_the_app_is_kept_with_node_request_and_frame() -> None:
    log = ServerLog()
    async with trio.open_nursery() as nursery:
        start = partial(serve, _broken, "127.0.0.1", 0, logger=log.node("server-1"))
        server: HttpServer = await nursery.start(start)
        ok = await exchange(server, b"GET /ok HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        assert ok.startswith(b"HTTP/1.1 200") and log.problems == []
        bad = await exchange(server, b"GET /boom HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        assert bad.startswith(b"HTTP/1.1 500")
        await exchange(server, b"GET /half HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        with trio.fail_after(5):
            while len(log.problems) < 2:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    # the innermost frame of kelpie_agent's code the exception passed (here the server's own,
    # since the app is the test's; for the API's routes it is the route or the service)
    assert re.fullmatch(
        r"server-1 \(error\): Exception in ASGI application \(GET /boom\): KeyError: 'the route "
        r"looked up a missing key' at kelpie_agent/http/_connection\.py:\d+ in _run_app",
        log.problems[0],
    )
    assert log.problems[1] == (
        "server-1 (error): ASGI app returned without finishing the response (GET /half)"
    )


def test_debug_and_info_are_not_problems_and_the_log_is_bounded() -> None:
    log = ServerLog()
    node = log.node("n1")
    node.debug("ASGI app raised after the client went away (%s)", "GET /x")
    node.info("started")
    assert log.problems == []
    for i in range(30):
        node.warning("shutdown grace of %ss expired: cancelling %d connection(s)", 2, i)
    assert len(log.problems) == 20
    assert (
        log.problems[0] == "n1 (warning): shutdown grace of 2s expired: cancelling 0 connection(s)"
    )
