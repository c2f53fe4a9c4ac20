"""No way out: the standard library's sockets and name lookups, inside a simulation.

trio sockets reach the simulated network through trio's own hooks (:mod:`._network`). Code can
also use the standard library directly: ``socket.socket``, ``socket.create_connection``,
``socket.getaddrinfo``, or a stdlib socket handed to ``trio.socket.from_stdlib_socket`` (what
``hypercorn.trio.serve`` does). While a simulation steps, the guards replace these (by identity,
like every guarded original) so that nothing reaches the host's network:

* ``socket.socket(...)`` makes a :class:`StdlibSocket`, a stdlib-shaped socket on the calling
  node's simulated stack. Everything that does not wait is served: ``bind``, ``listen``,
  options, names, ``setblocking``/``settimeout``, ``close``; in non-blocking mode also
  ``accept``, ``recv`` and ``send`` (``BlockingIOError`` when they would wait).
* ``trio.socket.from_stdlib_socket`` of such a socket returns its simulated trio socket, so
  ``hypercorn.trio.serve`` listens on the simulated network, unmodified.
* A call that would block (``connect``, a blocking ``accept``/``recv``/``send``, and so
  ``socket.create_connection``) cannot wait on the simulation's own thread: it is refused with
  :class:`~kelpie_dst.HostNetworkError`, one line naming the caller's file and line, and the run
  fails (exit 4) even if the program catches it. From a simulated thread (docs/threads.md),
  plain or ``trio.to_thread``'s, it is served by the simulated network through the thread's
  host task (``trio.from_thread``), while the thread waits.
* ``socket.getaddrinfo``, ``gethostbyname(_ex)``, ``gethostbyaddr`` and ``getnameinfo`` resolve
  through the simulated network (numeric addresses are parsed without any lookup), and
  ``socket.gethostname()`` is the calling node's name (a guarded call: strict fails it).
* A real socket (created before the run) given to ``trio.socket.from_stdlib_socket``, and
  ``trio.socket.fromfd``, are refused, except ``AF_UNIX`` sockets (no network).

``socket.socket(fileno=...)`` (how the standard library wraps descriptors it already has, as in
``socket.socketpair`` or a real socket's ``accept``) still makes a real socket: wrapping a
descriptor reaches nothing new.
"""

from __future__ import annotations

import errno
import ipaddress
import socket as _socket_module
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NoReturn

import trio

from .. import _guards as _g
from .._errors import HostNetworkError
from .._guard_sites import call_site, describe_call
from ._pipe import DATA, Segment

if TYPE_CHECKING:
    from ._network import SimNetwork
    from ._socket import SimSocket

__all__ = ["IDENTITY", "StdlibSocket"]

_real_socket = _socket_module.socket
_getaddrinfo = _socket_module.getaddrinfo
_gethostbyname = _socket_module.gethostbyname
_gethostbyname_ex = _socket_module.gethostbyname_ex
_gethostbyaddr = _socket_module.gethostbyaddr
_getnameinfo = _socket_module.getnameinfo
_gethostname = _socket_module.gethostname
_from_stdlib_socket = trio.socket.from_stdlib_socket
_fromfd = trio.socket.fromfd
_AI_NUMERIC = _socket_module.AI_NUMERICHOST


def _network() -> SimNetwork | None:
    guards = _g._active()
    return guards.sim.network if guards is not None else None


def refuse(what: str, why: str) -> NoReturn:
    """Raise :class:`HostNetworkError` naming the user's line, and fail the run."""
    site = call_site(3)
    what = describe_call(what, site)
    message = f"{what} at {site.file}:{site.line} (in {site.function}): {why}"
    guards = _g._ACTIVE
    if guards is not None:
        guards.violations.append(message)
        guards.sim.trace_event("guard.violation", call=what, site=site.traced)
    raise HostNetworkError(errno.EPERM, message)


_BLOCKING = "a blocking call cannot wait on the simulation's thread; use trio sockets"


class _SocketType(type):
    """``isinstance(real_socket, socket.socket)`` stays true while the class is replaced."""

    def __instancecheck__(cls, obj: object) -> bool:
        return type.__instancecheck__(cls, obj) or isinstance(obj, _real_socket)


class StdlibSocket(metaclass=_SocketType):
    """``socket.socket`` on the simulated network (see the module docstring)."""

    def __new__(
        cls,
        family: int = -1,
        type: int = -1,
        proto: int = -1,
        fileno: int | None = None,
        **kwargs: Any,
    ) -> Any:
        network = _network()
        if fileno is not None or network is None:
            return _real_socket(family, type, proto, fileno)
        return super().__new__(cls)

    def __init__(
        self,
        family: int = -1,
        type: int = -1,
        proto: int = -1,
        fileno: int | None = None,
        *,
        _sim: SimSocket | None = None,
    ) -> None:
        network = _network()
        assert network is not None
        if _sim is None:
            family = _socket_module.AF_INET if family == -1 else family
            type = _socket_module.SOCK_STREAM if type == -1 else type
            if family == _socket_module.AF_UNIX:
                refuse("socket.socket(AF_UNIX)", "the simulated network has no Unix sockets")
            _sim = network.socket(family, type, None if proto == -1 else proto)
        self._net = network
        self.sim_socket = _sim
        self._timeout: float | None = _socket_module.getdefaulttimeout()

    # -- what never waits ------------------------------------------------------------------------
    family = property(lambda self: self.sim_socket.family)
    type = property(lambda self: self.sim_socket.type)
    proto = property(lambda self: self.sim_socket.proto)

    def fileno(self) -> int:
        return self.sim_socket.fileno()

    def getsockname(self) -> Any:
        return self.sim_socket.getsockname()

    def getpeername(self) -> Any:
        return self.sim_socket.getpeername()

    def setsockopt(self, *args: Any) -> None:
        self.sim_socket.setsockopt(*args)

    def getsockopt(self, *args: Any) -> Any:
        return self.sim_socket.getsockopt(*args)

    def set_inheritable(self, inheritable: bool) -> None:
        pass

    def get_inheritable(self) -> bool:
        return False

    def setblocking(self, flag: bool) -> None:
        self._timeout = None if flag else 0.0

    def getblocking(self) -> bool:
        return self._timeout != 0.0

    def settimeout(self, value: float | None) -> None:
        self._timeout = value

    def gettimeout(self) -> float | None:
        return self._timeout

    def bind(self, address: Any) -> None:
        sock = self.sim_socket
        sock._check_open()
        sock._check_node()
        ip, port = self._net.normalize(address, sock._host, binding=True)
        sock._local = sock._host.bind(sock, ip, port)

    def listen(self, backlog: int = 128) -> None:
        self.sim_socket.listen(backlog)

    def shutdown(self, how: int) -> None:
        self.sim_socket.shutdown(how)

    def close(self) -> None:
        self.sim_socket.close()

    def detach(self) -> int:
        raise OSError(errno.EOPNOTSUPP, "simulated sockets cannot be detached")

    def __enter__(self) -> StdlibSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<StdlibSocket {self.sim_socket!r}>"

    # -- what may wait ---------------------------------------------------------------------------
    def _wait(self, what: str, operation: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``operation`` in the simulation from another thread, or refuse."""
        if trio.lowlevel.in_trio_task():  # a trio task: nothing else runs while it blocks
            refuse(f"socket.socket.{what}", _BLOCKING)
        token = self._net.sim._token
        try:  # a simulated thread (any kind): its host task runs the operation
            return trio.from_thread.run(operation, trio_token=token)
        except RuntimeError:
            refuse(f"socket.socket.{what}", "this thread cannot reach the simulation")

    def _nonblocking(self) -> bool:
        return self._timeout == 0.0

    def connect(self, address: Any) -> None:
        if self._nonblocking():
            refuse("socket.socket.connect", "non-blocking connects are not simulated")
        self._wait("connect", lambda: self.sim_socket.connect(address))

    def connect_ex(self, address: Any) -> int:
        try:
            self.connect(address)
        except HostNetworkError:
            raise
        except OSError as error:
            return error.errno or errno.EIO
        return 0

    def accept(self) -> tuple[StdlibSocket, Any]:
        sock = self.sim_socket
        if self._nonblocking():
            sock._check_open()
            if not sock._backlog:
                raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
            conn = sock._backlog.popleft()
            return StdlibSocket(_sim=conn), conn._remote
        conn, address = self._wait("accept", sock.accept)
        return StdlibSocket(_sim=conn), address

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        sock = self.sim_socket
        if not self._nonblocking():
            return self._wait("recv", lambda: sock.recv(bufsize, flags))  # type: ignore[no-any-return]
        sock._check_open()
        pipe = sock.inbound
        if pipe is None:
            raise OSError(errno.ENOTCONN, "Transport endpoint is not connected")
        if pipe.reset:
            raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
        if not pipe.readable_now():
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        first = pipe.segments[0]
        if first.kind != DATA:
            return b""
        return pipe._take(bufsize, trio.current_time())

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        view = memoryview(buffer)
        data = self.recv(nbytes or len(view), flags)
        view[: len(data)] = data
        return len(data)

    def send(self, data: Any, flags: int = 0) -> int:
        sock = self.sim_socket
        if not self._nonblocking():
            return self._wait("send", lambda: sock.send(data, flags))  # type: ignore[no-any-return]
        sock._check_open()
        pipe = sock.outbound
        if pipe is None:
            raise OSError(errno.ENOTCONN, "Transport endpoint is not connected")
        if pipe.reset or pipe.reader_closed:
            raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
        if pipe.room() == 0:
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        chunk = bytes(memoryview(data)[: pipe.room()])
        self._net.send_segment(sock, Segment(DATA, chunk, None))
        return len(chunk)

    def sendall(self, data: Any, flags: int = 0) -> None:
        view = memoryview(data)
        while view:
            view = view[self.send(view, flags) :]

    def sendto(self, data: Any, *args: Any) -> int:
        return self._wait("sendto", lambda: self.sim_socket.sendto(data, *args))  # type: ignore[no-any-return]

    def recvfrom(self, bufsize: int, flags: int = 0) -> Any:
        return self._wait("recvfrom", lambda: self.sim_socket.recvfrom(bufsize, flags))

    def makefile(self, *args: Any, **kwargs: Any) -> NoReturn:
        refuse("socket.socket.makefile", _BLOCKING)


# -- name lookups ---------------------------------------------------------------------------------
def _numeric(host: Any) -> bool:
    if host is None:
        return True
    text = host.decode() if isinstance(host, bytes) else str(host)
    try:
        ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return False
    return True


def _sim_getaddrinfo(
    host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0
) -> list[tuple[Any, ...]]:
    network = _network()
    if network is None:
        return _getaddrinfo(host, port, family, type, proto, flags)
    if _numeric(host):  # parsed, never looked up
        return _getaddrinfo(host, port, family, type, proto, flags | _AI_NUMERIC)
    if flags & _AI_NUMERIC:
        raise _socket_module.gaierror(_socket_module.EAI_NONAME, "Name or service not known")
    name = host.decode() if isinstance(host, bytes) else str(host)
    ip = network.resolve_name(name, network.host_of(network.sim.current_node()))
    return _getaddrinfo(ip, port, family, type, proto, flags | _AI_NUMERIC)


def _sim_gethostbyname(name: str) -> str:
    if _network() is None:
        return _gethostbyname(name)
    return str(_sim_getaddrinfo(name, None, _socket_module.AF_INET)[0][4][0])


def _sim_gethostbyname_ex(name: str) -> tuple[str, list[str], list[str]]:
    if _network() is None:
        return _gethostbyname_ex(name)
    return name, [], [_sim_gethostbyname(name)]


def _sim_gethostbyaddr(address: str) -> tuple[str, list[str], list[str]]:
    network = _network()
    if network is None:
        return _gethostbyaddr(address)
    ip = _sim_gethostbyname(address)
    names = sorted(n for n, a in network.names.items() if a == ip)
    if not names:
        raise _socket_module.herror(1, "Unknown host")
    return names[0], names[1:], [ip]


def _sim_getnameinfo(sockaddr: tuple[Any, ...], flags: int) -> tuple[str, str]:
    network = _network()
    if network is None:
        return _getnameinfo(sockaddr, flags)
    ip, port = sockaddr[0], sockaddr[1]
    names = sorted(n for n, a in network.names.items() if a == ip)
    return (names[0] if names else ip), str(port)


def _sim_gethostname() -> str:
    def node_name(g: Any) -> str:
        node = g.sim.current_node()
        return str(node.name if node is not None else g.sim.main_node_name)

    return _g._guarded("socket.gethostname", _gethostname, node_name)


# -- trio's stdlib entry points -------------------------------------------------------------------
def _sim_from_stdlib_socket(sock: Any) -> Any:
    if _network() is None:
        return _from_stdlib_socket(sock)
    if type(sock) is StdlibSocket:
        return sock.sim_socket
    if getattr(sock, "family", None) == _socket_module.AF_UNIX:
        return _from_stdlib_socket(sock)
    refuse(
        "trio.socket.from_stdlib_socket",
        f"{sock!r} is a real socket of the host; make sockets inside the simulation",
    )


def _sim_fromfd(fd: Any, family: Any, type: Any, proto: int = 0) -> Any:
    if _network() is None or family == _socket_module.AF_UNIX:
        return _fromfd(fd, family, type, proto)
    refuse("trio.socket.fromfd", "a descriptor is a real socket of the host")


# original -> replacement, merged into the guards' identity table
IDENTITY: list[tuple[object, object]] = [
    (_real_socket, StdlibSocket),
    (_getaddrinfo, _sim_getaddrinfo),
    (_gethostbyname, _sim_gethostbyname),
    (_gethostbyname_ex, _sim_gethostbyname_ex),
    (_gethostbyaddr, _sim_gethostbyaddr),
    (_getnameinfo, _sim_getnameinfo),
    (_gethostname, _sim_gethostname),
    (_from_stdlib_socket, _sim_from_stdlib_socket),
    (_fromfd, _sim_fromfd),
]
