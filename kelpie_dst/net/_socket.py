"""``SimSocket``: a trio socket object whose bytes travel over the simulated network.

It implements the part of :class:`trio.socket.SocketType` that trio's high-level networking
(``open_tcp_stream``, ``serve_tcp``, ``SocketStream``, ``SocketListener``), anyio on trio, and
httpcore use. Errors are the ``OSError`` subclasses real sockets raise, with real errno values,
so ``SocketStream`` translates them to ``ClosedResourceError``/``BrokenResourceError`` as usual.
"""

from __future__ import annotations

import collections
import errno
import heapq
import itertools
import operator
import socket as stdlib_socket
from typing import TYPE_CHECKING, Any

import trio

from ._pipe import DATA, FIN, Pipe, Segment

if TYPE_CHECKING:
    from ._network import Host, SimNetwork

__all__ = ["SimSocket"]

DEFAULT_WINDOW = 256 * 1024
_fds = itertools.count(100_000)  # fake descriptors: positive while open, -1 once closed
Address = tuple[str, int]


def _closed() -> OSError:
    return OSError(errno.EBADF, "Bad file descriptor")


class SimSocket(trio.socket.SocketType):
    """A simulated TCP or UDP socket that belongs to one host (node)."""

    def __init__(self, network: SimNetwork, host: Host, family: int, type: int, proto: int):
        super().__init__()
        self._network = network
        self._host = host
        self._family = stdlib_socket.AddressFamily(family)
        self._type = stdlib_socket.SocketKind(type)
        self._proto = proto
        self._fd = next(_fds)
        self._options: dict[tuple[int, int], int | bytes] = {}
        self._reading = False  # one task at a time may wait to read (as with real sockets)
        self._writing = False
        self._local: Address | None = None
        self._remote: Address | None = None
        self._shut_wr = False
        # TCP connection state
        self.inbound: Pipe | None = None  # peer -> us
        self.outbound: Pipe | None = None  # us -> peer
        self.peer: SimSocket | None = None
        # TCP listening state
        self._listening = False
        self._backlog: collections.deque[SimSocket] = collections.deque()
        self._accept_ready = trio.Event()
        # UDP state
        self._datagrams: list[tuple[float, int, bytes, Address]] = []
        self._datagram_ready = trio.Event()
        host.sockets.append(self)

    # -- SocketType properties -----------------------------------------------------------------
    @property
    def family(self) -> stdlib_socket.AddressFamily:
        return self._family

    @property
    def type(self) -> stdlib_socket.SocketKind:
        return self._type

    @property
    def proto(self) -> int:
        return self._proto

    @property
    def did_shutdown_SHUT_WR(self) -> bool:
        return self._shut_wr

    def __repr__(self) -> str:
        kind = "tcp" if self._type == stdlib_socket.SOCK_STREAM else "udp"
        return f"<SimSocket {kind} {self._host.node.name} {self._local}->{self._remote}>"

    def fileno(self) -> int:
        return self._fd

    def getsockname(self) -> Address:
        if self._local is None:
            return ("0.0.0.0", 0)
        return self._local

    def getpeername(self) -> Address:
        if self._remote is None:
            raise OSError(errno.ENOTCONN, "Transport endpoint is not connected")
        return self._remote

    def setsockopt(self, level: int, optname: int, value: Any, optlen: int | None = None) -> None:
        self._check_open()
        self._options[(level, optname)] = value

    def getsockopt(self, level: int, optname: int, buflen: int | None = None) -> Any:
        self._check_open()
        if (level, optname) == (stdlib_socket.SOL_SOCKET, stdlib_socket.SO_ACCEPTCONN):
            return int(self._listening)
        if (level, optname) == (stdlib_socket.SOL_SOCKET, stdlib_socket.SO_ERROR):
            return 0
        if (level, optname) == (stdlib_socket.SOL_SOCKET, stdlib_socket.SO_TYPE):
            return int(self._type)
        return self._options.get((level, optname), 0)

    def get_inheritable(self) -> bool:
        return False

    def set_inheritable(self, inheritable: bool) -> None:
        pass

    def setblocking(self, flag: bool) -> None:
        pass

    def dup(self) -> SimSocket:
        raise OSError(errno.EOPNOTSUPP, "simulated sockets cannot be duplicated")

    def detach(self) -> int:
        raise OSError(errno.EOPNOTSUPP, "simulated sockets cannot be detached")

    # -- lifecycle -----------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._fd < 0:
            raise _closed()

    def _check_node(self) -> None:
        self._host.node.check_alive()

    def close(self) -> None:
        if self._fd < 0:
            return
        self._fd = -1
        # Like trio.lowlevel.notify_closing: tasks blocked on this socket wake with EBADF.
        if self.inbound is not None:
            self.inbound.reader_closed = True
            self.inbound.wake_reader()
            self.inbound.wake_writer()  # the peer's blocked sender learns of the close
        if self.outbound is not None:
            self.outbound.writer_closed = True
            self.outbound.wake_writer()
        self._accept_ready.set()
        self._datagram_ready.set()
        outbound = self.outbound
        if outbound is not None and not self._shut_wr and not outbound.reset:
            self._shut_wr = True  # a graceful close sends FIN after any data in flight
            self._network.send_segment(self, Segment(FIN, b"", None))
        if self._listening:
            self._listening = False
            self._host.unlisten(self)
            for pending in self._backlog:
                pending.abort(reset_peer=True)
            self._backlog.clear()
        self._host.unbind(self)

    def abort(self, reset_peer: bool) -> None:
        """Crash semantics: close at once; the peer sees a reset (after the link's latency)."""
        if self._fd < 0 and not reset_peer:
            return
        was_listening = self._listening
        self._fd = -1
        self._listening = False
        if was_listening:
            self._host.unlisten(self)
            for pending in self._backlog:
                pending.abort(reset_peer=True)
            self._backlog.clear()
        if self.inbound is not None:
            self.inbound.break_()
        if reset_peer and self.peer is not None:
            self._network.reset_later(self, self.peer)
        self._host.unbind(self)
        self._accept_ready.set()
        self._datagram_ready.set()

    def __enter__(self) -> SimSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def shutdown(self, flag: int) -> None:
        self._check_open()
        if flag in (stdlib_socket.SHUT_WR, stdlib_socket.SHUT_RDWR) and not self._shut_wr:
            self._shut_wr = True
            if self.outbound is not None:
                self._network.send_segment(self, Segment(FIN, b"", None))

    # -- addresses -----------------------------------------------------------------------------
    async def bind(self, address: Any) -> None:
        await trio.lowlevel.checkpoint()
        self._check_open()
        self._check_node()
        ip, port = self._network.normalize(address, self._host, binding=True)
        self._local = self._host.bind(self, ip, port)

    def listen(self, backlog: int = 128) -> None:
        self._check_open()
        if self._type != stdlib_socket.SOCK_STREAM:
            raise OSError(errno.EOPNOTSUPP, "listen() on a datagram socket")
        if self._local is None:
            self._local = self._host.bind(self, "0.0.0.0", 0)
        self._listening = True
        self._host.listen(self)

    async def accept(self) -> tuple[SimSocket, Address]:
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            self._check_open()
            self._check_node()
            if self._backlog:
                conn = self._backlog.popleft()
                await trio.lowlevel.checkpoint()
                assert conn._remote is not None
                return conn, conn._remote
            event = self._accept_ready
            await event.wait()

    def deliver_connection(self, conn: SimSocket) -> None:
        self._backlog.append(conn)
        self._accept_ready.set()
        self._accept_ready = trio.Event()

    async def connect(self, address: Any) -> None:
        self._check_open()
        self._check_node()
        if self._type == stdlib_socket.SOCK_DGRAM:
            await trio.lowlevel.checkpoint()
            self._remote = self._network.normalize(address, self._host)
            if self._local is None:
                self._local = self._host.bind(self, "0.0.0.0", 0)
            return
        if self._remote is not None:
            raise OSError(errno.EISCONN, "Transport endpoint is already connected")
        await self._network.connect(self, self._network.normalize(address, self._host))

    def attach(self, local: Address, remote: Address, peer: SimSocket, inbound: Pipe) -> None:
        self._local = local
        self._remote = remote
        self.peer = peer
        self.inbound = inbound

    # -- TCP data --------------------------------------------------------------------------------
    async def send(self, data: Any, flags: int = 0) -> int:
        self._check_open()
        self._check_node()
        if self._type == stdlib_socket.SOCK_DGRAM:
            if self._remote is None:
                raise OSError(errno.EDESTADDRREQ, "Destination address required")
            return await self.sendto(data, self._remote)
        pipe = self.outbound
        if pipe is None:
            raise OSError(errno.ENOTCONN, "Transport endpoint is not connected")
        if self._shut_wr:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._writing:
            raise trio.BusyResourceError("another task is already writing to this socket")
        self._writing = True
        try:
            await pipe.wait_room()
        finally:
            self._writing = False
        self._check_open()
        chunk = bytes(memoryview(data)[: pipe.room()])
        self._network.send_segment(self, Segment(DATA, chunk, None))
        await trio.lowlevel.cancel_shielded_checkpoint()
        return len(chunk)

    async def recv(self, buflen: int, flags: int = 0) -> bytes:
        buflen = operator.index(buflen)  # TypeError for floats, as with real sockets
        if buflen < 0:
            raise ValueError("negative buffersize in recv")
        self._check_open()
        if self._type == stdlib_socket.SOCK_DGRAM:
            data, _ = await self.recvfrom(buflen)
            return data
        if self.inbound is None:
            raise OSError(errno.ENOTCONN, "Transport endpoint is not connected")
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._reading:
            raise trio.BusyResourceError("another task is already reading from this socket")
        self._reading = True
        try:
            data = await self.inbound.read(buflen)
        finally:
            self._reading = False
        self._check_open()
        await trio.lowlevel.cancel_shielded_checkpoint()
        return data

    async def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        view = memoryview(buffer)
        data = await self.recv(nbytes or len(view))
        view[: len(data)] = data
        return len(data)

    def is_readable(self) -> bool:
        if self._listening:
            return bool(self._backlog)
        if self._type == stdlib_socket.SOCK_DGRAM:
            return bool(self._datagrams) and self._datagrams[0][0] <= trio.current_time()
        return self.inbound is not None and self.inbound.readable_now()

    async def wait_writable(self) -> None:
        self._check_open()
        if self.outbound is not None:
            await self.outbound.wait_room()
        await trio.lowlevel.checkpoint()

    # -- UDP -------------------------------------------------------------------------------------
    async def sendto(self, data: Any, *args: Any) -> int:
        self._check_open()
        self._check_node()
        address = args[-1]
        if self._local is None:
            self._local = self._host.bind(self, "0.0.0.0", 0)
        payload = bytes(memoryview(data))
        self._network.send_datagram(self, payload, self._network.normalize(address, self._host))
        await trio.lowlevel.checkpoint()
        return len(payload)

    async def recvfrom(self, buflen: int, flags: int = 0) -> tuple[bytes, Address]:
        while True:
            self._check_open()
            now = trio.current_time()
            if self._datagrams and self._datagrams[0][0] <= now:
                _arrival, _seq, payload, source = heapq.heappop(self._datagrams)
                await trio.lowlevel.checkpoint()
                return payload[:buflen], source
            deadline = self._datagrams[0][0] if self._datagrams else float("inf")
            event = self._datagram_ready
            with trio.move_on_at(deadline):
                await event.wait()

    def deliver_datagram(self, arrival: float, seq: int, payload: bytes, source: Address) -> None:
        heapq.heappush(self._datagrams, (arrival, seq, payload, source))
        self._datagram_ready.set()
        self._datagram_ready = trio.Event()
