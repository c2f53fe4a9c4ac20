"""The filtering proxy between a sandbox and the hosts it may reach.

A sandbox has its own network namespace with nothing but loopback. When its
:class:`~kelpie_agent.sandbox.SandboxNetwork` names hosts, each command gets this proxy on a
Unix socket (bound into the sandbox, where the supervisor's forwarder listens on
``127.0.0.1:3128`` and ``HTTP_PROXY``/``HTTPS_PROXY`` point at it). It speaks the two forms of
HTTP proxying that clients use (``CONNECT host:port`` for TLS, absolute-form requests for plain
HTTP), lets through only the destinations the allow-list names, resolves the names itself, and
refuses any address that is loopback, link-local, multicast or unspecified (so no allow-list
reaches the server itself or a cloud metadata service). A refusal is an HTTP 403 whose body says
why, which is what the tool's HTTP client shows.
"""

from __future__ import annotations

import os
import socket as stdlib_socket
from collections.abc import Callable

import trio

from ._network import SandboxNetwork, refused_address

__all__ = ["serve_proxy"]

HEAD_LIMIT = 16384
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 15.0
CHUNK = 65536


class _Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


async def _read_head(stream: trio.abc.Stream) -> tuple[bytes, bytes]:
    """The request head (up to the blank line) and whatever followed it."""
    buffer = b""
    with trio.move_on_after(HEAD_TIMEOUT):
        while b"\r\n\r\n" not in buffer:
            if len(buffer) > HEAD_LIMIT:
                raise _Refused(431, "request head too large")
            chunk = await stream.receive_some(CHUNK)
            if not chunk:
                raise _Refused(400, "connection closed before the request head ended")
            buffer += chunk
        head, _, rest = buffer.partition(b"\r\n\r\n")
        return head + b"\r\n\r\n", rest
    raise _Refused(408, "no request head")


def _split_authority(authority: str, default_port: int) -> tuple[str, int]:
    if authority.startswith("["):
        host, _, rest = authority[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, colon, port_text = authority.rpartition(":")
        if not colon:
            host, port_text = authority, ""
    if not host:
        raise _Refused(400, f"no host in {authority!r}")
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise _Refused(400, f"bad port in {authority!r}")
    return host, int(port_text)


def _destination(head: bytes) -> tuple[str, str, int, bytes]:
    """``(method, host, port, head to send upstream or b"" for CONNECT)``."""
    line, _, headers = head.partition(b"\r\n")
    try:
        method, target, version = line.decode("ascii").split(" ")
    except (UnicodeDecodeError, ValueError):
        raise _Refused(400, "malformed request line") from None
    if method == "CONNECT":
        host, port = _split_authority(target, 443)
        return method, host, port, b""
    if not target.lower().startswith("http://"):
        raise _Refused(400, "only CONNECT and http:// requests go through this proxy")
    rest = target[len("http://") :]
    authority, slash, path = rest.partition("/")
    authority = authority.split("?", 1)[0]
    host, port = _split_authority(authority, 80)
    origin = f"{method} /{path if slash else ''} {version}".encode("ascii")
    return method, host, port, origin + b"\r\n" + headers


async def _connect(network: SandboxNetwork, host: str, port: int) -> trio.SocketStream:
    if not network.allows(host, port):
        raise _Refused(403, f"{host}:{port} is not on this sandbox's allow-list")
    try:
        infos = await trio.socket.getaddrinfo(
            host.strip("[]"), port, type=stdlib_socket.SOCK_STREAM
        )
    except OSError as error:
        raise _Refused(502, f"cannot resolve {host}: {error}") from None
    addresses = [str(info[4][0]) for info in infos]
    allowed = [a for a in addresses if not refused_address(a)]
    if not allowed:
        raise _Refused(403, f"{host} resolves to an address sandboxes may not reach")
    with trio.move_on_after(CONNECT_TIMEOUT):
        try:
            return await trio.open_tcp_stream(allowed[0], port)
        except OSError as error:
            raise _Refused(502, f"cannot connect to {host}:{port}: {error}") from None
    raise _Refused(504, f"connecting to {host}:{port} timed out")


async def _pump(source: trio.abc.Stream, sink: trio.abc.Stream) -> None:
    try:
        while chunk := await source.receive_some(CHUNK):
            await sink.send_all(chunk)
        if isinstance(sink, trio.SocketStream):
            await sink.send_eof()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass


async def _handle(
    stream: trio.SocketStream, network: SandboxNetwork, note: Callable[..., None]
) -> None:
    async with stream:
        try:
            head, rest = await _read_head(stream)
            method, host, port, upstream_head = _destination(head)
            upstream = await _connect(network, host, port)
        except _Refused as refused:
            note("sandbox.proxy_refused", reason=str(refused))
            body = f"sandbox: {refused}\n".encode()
            answer = (
                f"HTTP/1.1 {refused.status} Refused\r\ncontent-type: text/plain\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
            ).encode()
            try:
                await stream.send_all(answer + body)
            except (trio.BrokenResourceError, OSError):
                pass
            return
        async with upstream:
            if method == "CONNECT":
                await stream.send_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    await upstream.send_all(rest)
            else:
                await upstream.send_all(upstream_head + rest)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_pump, stream, upstream)
                nursery.start_soon(_pump, upstream, stream)


async def serve_proxy(
    path: str,
    network: SandboxNetwork,
    *,
    note: Callable[..., None] = lambda kind, **fields: None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the proxy on a new Unix socket at ``path`` (mode 0666: the sandbox's user may
    connect; keep it in a private directory) until cancelled."""
    sock = trio.socket.socket(stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM)
    # A Unix socket's path may not exceed 107 bytes; through /proc/self/fd any directory will do.
    directory = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        await sock.bind(f"/proc/self/fd/{directory}/{os.path.basename(path)}")
        os.chmod(path, 0o666)
        sock.listen(64)
    except BaseException:
        sock.close()
        raise
    finally:
        os.close(directory)
    listener = trio.SocketListener(sock)
    async with listener, trio.open_nursery() as nursery:
        task_status.started()
        while True:
            stream = await listener.accept()
            nursery.start_soon(_handle, stream, network, note)
