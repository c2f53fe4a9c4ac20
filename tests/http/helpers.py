"""Running a server on real loopback sockets, and raw-socket clients, for the HTTP tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import trio

from kelpie_agent.http import HttpServer, ServerOptions, serve

from .apps import AppLog, raw_app


@asynccontextmanager
async def running(
    app: Any = None, log: AppLog | None = None, **options: Any
) -> AsyncIterator[tuple[HttpServer, AppLog]]:
    """A server on 127.0.0.1 (a free port) for the body of the ``async with``; shut down after."""
    log = log if log is not None else AppLog()
    app = app if app is not None else raw_app(log)
    async with trio.open_nursery() as nursery:
        server: HttpServer = await nursery.start(
            partial(
                serve,
                app,
                "127.0.0.1",
                0,
                ServerOptions(**options),
                logger=log,
                access_log=log.record_access,
            )
        )
        try:
            yield server, log
        finally:
            with trio.fail_after(10):
                await server.shutdown(grace=2)


async def connect(server: HttpServer) -> trio.SocketStream:
    return await trio.open_tcp_stream("127.0.0.1", server.port)


async def read_all(stream: trio.abc.ReceiveStream, timeout: float = 5.0) -> bytes:
    """Everything until the server closes (fails the test after ``timeout`` seconds)."""
    data = b""
    with trio.fail_after(timeout):
        while True:
            try:
                chunk = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                return data
            if not chunk:
                return data
            data += chunk


async def read_until(stream: trio.abc.ReceiveStream, marker: bytes, timeout: float = 5.0) -> bytes:
    data = b""
    with trio.fail_after(timeout):
        while marker not in data:
            chunk = await stream.receive_some(65536)
            if not chunk:
                break
            data += chunk
    return data


async def exchange(server: HttpServer, data: bytes, timeout: float = 5.0) -> bytes:
    """Send raw bytes on a new connection, return everything until the server closes it."""
    stream = await connect(server)
    async with stream:
        await stream.send_all(data)
        return await read_all(stream, timeout)
