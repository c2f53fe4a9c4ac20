"""The simulated network: hosts, links, partitions, clogs, and network faults.

Installed into every run through trio's official hooks (``set_custom_socket_factory`` and
``set_custom_hostname_resolver``), so unmodified code using trio sockets, anyio on trio, httpx
and httpx2 talks over it. Every node is a host with its own address and ``127.0.0.1``; node
names resolve to addresses. No real socket is ever created.

Timing model: each directed link has a latency drawn once per run from ``[latency_min,
latency_max]`` and a bandwidth; a TCP segment departs when the link is free, arrives after the
latency (plus fault-induced delay), and never before the segment sent before it on the same
connection. While a link is partitioned or clogged, segments are held and get their arrival
time when it opens again (TCP retransmits; it does not lose data). Datagrams are simply lost.
"""

from __future__ import annotations

import errno
import itertools
import math
import socket as stdlib_socket
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._faults import FaultSpec, register_fault
from .._nodes import Node
from .._storms import StormSpec, register_storm
from ._pipe import DATA, Segment
from ._socket import DEFAULT_WINDOW, Address, SimSocket

if TYPE_CHECKING:
    from .._sim import Simulation

__all__ = ["Host", "NetworkConfig", "SimNetwork"]

LOOPBACK = "127.0.0.1"
WILDCARDS = ("", "0.0.0.0", "::")
EPHEMERAL_START = 49152
CONNECT_TIMEOUT = 60.0  # seconds a SYN is retried before connect() gives up

_F = register_fault
DELAY = _F(
    FaultSpec(
        "network.delay",
        "a latency spike on one TCP segment or datagram",
        params={"max_extra": 1.0},
        swarm_range=(0.0, 0.05),
        observed="a send arrives up to max_extra seconds later (TCP: and so does all after it)",
    )
)
LOSS = _F(
    FaultSpec(
        "network.packet_loss",
        "a packet is lost: TCP retransmits it after rto seconds, UDP drops it",
        params={"rto": 0.2},
        swarm_range=(0.0, 0.05),
        observed="TCP: extra delay of one retransmission timeout; UDP: the datagram never arrives",
    )
)
PARTITION = _F(
    FaultSpec(
        "network.partition",
        "the hosts split in two groups that cannot reach each other (or only one way)",
        params={"interval": 5.0, "duration": 10.0, "one_way": 0.3},
        swarm_range=(0.0, 0.3),
        observed="connects time out, TCP data stalls until the partition heals, datagrams vanish",
    )
)
CLOG = _F(
    FaultSpec(
        "network.clog",
        "one directed link holds everything it is given, then releases it all at once",
        params={"interval": 5.0, "duration": 2.0},
        swarm_range=(0.0, 0.3),
        observed="data stalls on one link, then arrives in a burst",
    )
)
RESET = _F(
    FaultSpec(
        "network.reset",
        "a TCP connection is reset in the middle of a stream",
        swarm_range=(0.0, 0.01),
        observed="both ends get ECONNRESET (trio: BrokenResourceError) on their next operation",
    )
)
DUPLICATE = _F(
    FaultSpec(
        "network.duplicate",
        "a datagram is delivered twice (UDP only)",
        swarm_range=(0.0, 0.05),
        observed="recvfrom returns the same payload twice",
    )
)
REORDER = _F(
    FaultSpec(
        "network.reorder",
        "a datagram is delayed past later ones (UDP only)",
        params={"max_extra": 0.05},
        swarm_range=(0.0, 0.1),
        observed="datagrams arrive out of order",
    )
)
STORM = register_storm(
    StormSpec(
        "network",
        "partitions and clogs longer than a lease, long delays, packet loss",
        (
            ("network.partition", 1.0, (("interval", 1.0), ("duration", 8.0))),
            ("network.clog", 0.5, (("interval", 1.0), ("duration", 8.0))),
            ("network.delay", 0.3, (("max_extra", 8.0),)),
            ("network.packet_loss", 0.2, ()),
        ),
        length=(1.0, 3.0),
    )
)


@attrs.frozen
class NetworkConfig:
    """Link characteristics. Latencies are per directed link, drawn once per run."""

    latency_min: float = 0.0005
    latency_max: float = 0.002
    bandwidth: float = 125_000_000.0  # bytes/s (1 Gbit/s)
    window: int = DEFAULT_WINDOW


class _Link:
    __slots__ = ("free_at", "latency")

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.free_at = 0.0


class Host:
    """A node's network stack: its addresses, bound ports and sockets."""

    def __init__(self, network: SimNetwork, node: Node) -> None:
        self.network = network
        self.node = node
        self.address = node.address
        self.sockets: list[SimSocket] = []
        self.bound: dict[tuple[int, int, int], SimSocket] = {}  # (family, type, port)
        self.listeners: dict[tuple[int, int], SimSocket] = {}  # (family, port)
        self._ports = itertools.count(EPHEMERAL_START)

    def bind(self, sock: SimSocket, ip: str, port: int) -> Address:
        if ip not in (*WILDCARDS, LOOPBACK, self.address):
            raise OSError(
                errno.EADDRNOTAVAIL, f"cannot bind {ip}: not an address of {self.address}"
            )
        if port == 0:
            port = self.ephemeral(sock.family, sock.type)
        key = (int(sock.family), int(sock.type), port)
        if key in self.bound and self.bound[key] is not sock:
            raise OSError(errno.EADDRINUSE, f"address {ip}:{port} already in use")
        self.bound[key] = sock
        return (self.address if ip in WILDCARDS else ip, port)

    def ephemeral(self, family: int, type: int) -> int:
        while True:
            port = next(self._ports)
            if (int(family), int(type), port) not in self.bound:
                return port

    def unbind(self, sock: SimSocket) -> None:
        for key, bound in list(self.bound.items()):
            if bound is sock:
                del self.bound[key]
        if sock in self.sockets:
            self.sockets.remove(sock)

    def listen(self, sock: SimSocket) -> None:
        self.listeners[(int(sock.family), sock.getsockname()[1])] = sock

    def unlisten(self, sock: SimSocket) -> None:
        for key, listener in list(self.listeners.items()):
            if listener is sock:
                del self.listeners[key]

    def crash(self) -> None:
        for sock in list(self.sockets):
            sock.abort(reset_peer=True)
        self.sockets.clear()
        self.bound.clear()
        self.listeners.clear()


class SimNetwork:
    """The network of one simulation."""

    def __init__(self, sim: Simulation, config: NetworkConfig | None = None) -> None:
        self.sim = sim
        self.config = config or NetworkConfig()
        self._rng = sim.rng("network")
        self.hosts: dict[str, Host] = {}  # by address
        self.names: dict[str, str] = {}  # hostname -> address
        self._links: dict[tuple[str, str], _Link] = {}
        self.blocked: set[tuple[str, str]] = set()  # directed (src, dst) pairs cut off
        self.clogged: dict[tuple[str, str], float] = {}  # directed pair -> until
        self._holding: list[SimSocket] = []  # sockets whose outbound pipe holds segments
        self._topology = trio.Event()
        self._seq = itertools.count()
        self.stats = {"segments": 0, "bytes": 0, "datagrams": 0, "connections": 0}

    # -- setup --------------------------------------------------------------------------------
    def install(self) -> None:
        """Route this run's trio sockets and name lookups here (call inside the run)."""
        trio.socket.set_custom_socket_factory(_Factory(self))
        trio.socket.set_custom_hostname_resolver(_Resolver(self))

    def attach(self, node: Node) -> Host:
        host = Host(self, node)
        self.hosts[node.address] = host
        self.names[node.name] = node.address
        node.crash_hooks.append(lambda n: self._crashed(host))
        return host

    def socket(
        self, family: int | None = None, type: int | None = None, proto: int | None = None
    ) -> SimSocket:
        """A new socket of the calling task's node (trio's socket factory, and the
        standard library's ``socket.socket`` in a simulation)."""
        family = stdlib_socket.AF_INET if family is None else family
        type = stdlib_socket.SOCK_STREAM if type is None else type
        if family not in (stdlib_socket.AF_INET, stdlib_socket.AF_INET6):
            raise OSError(errno.EAFNOSUPPORT, "the simulated network supports AF_INET/AF_INET6")
        if type not in (stdlib_socket.SOCK_STREAM, stdlib_socket.SOCK_DGRAM):
            raise OSError(errno.ESOCKTNOSUPPORT, "the simulated network supports TCP and UDP")
        host = self.host_of(self.sim.current_node())
        host.node.check_alive()
        return SimSocket(self, host, family, type, proto or 0)

    def host_of(self, node: Node | None) -> Host:
        if node is None:
            node = self.sim.node(self.sim.main_node_name)
        return self.hosts[node.address]

    def _crashed(self, host: Host) -> None:
        self.sim.trace_event("net.crash", host=host.node.name, sockets=len(host.sockets))
        host.crash()

    def link(self, src: str, dst: str) -> _Link:
        link = self._links.get((src, dst))
        if link is None:
            cfg = self.config
            latency = cfg.latency_min + (cfg.latency_max - cfg.latency_min) * self._rng.random()
            link = self._links[(src, dst)] = _Link(latency)
        return link

    # -- addressing -----------------------------------------------------------------------------
    def resolve_name(self, name: str, host: Host) -> str:
        if name in ("localhost", LOOPBACK, "::1"):
            return LOOPBACK
        if name in self.names:
            return self.names[name]
        if name in self.hosts:
            return name
        raise stdlib_socket.gaierror(stdlib_socket.EAI_NONAME, "Name or service not known")

    def normalize(self, address: Any, host: Host, *, binding: bool = False) -> Address:
        if not isinstance(address, tuple) or len(address) < 2:
            raise OSError(errno.EINVAL, f"bad address {address!r}")
        ip, port = address[0], int(address[1])
        if isinstance(ip, bytes):
            ip = ip.decode()
        if binding:
            return (ip, port)
        if ip in WILDCARDS:
            ip = LOOPBACK
        return (self.resolve_name(ip, host) if ip != LOOPBACK else LOOPBACK, port)

    def _target(self, src: Host, ip: str) -> Host | None:
        if ip == LOOPBACK or ip == src.address:
            return src
        return self.hosts.get(ip)

    def reachable(self, src: str, dst: str) -> bool:
        return src == dst or (src, dst) not in self.blocked

    def _open(self, src: str, dst: str) -> bool:
        if src == dst:
            return True
        until = self.clogged.get((src, dst))
        return (src, dst) not in self.blocked and (until is None or until <= self.sim.now())

    # -- TCP ------------------------------------------------------------------------------------
    async def connect(self, sock: SimSocket, remote: Address) -> None:
        src = sock._host
        faults = self.sim.faults
        deadline = self.sim.now() + CONNECT_TIMEOUT
        ip, port = remote
        target = self._target(src, ip)
        if sock._local is None:
            sock._local = src.bind(sock, "0.0.0.0", 0)
        if target is None:
            with trio.move_on_at(deadline):
                await trio.sleep_forever()
            raise TimeoutError(errno.ETIMEDOUT, f"connect to {ip}:{port} timed out (no route)")
        # The SYN and SYN-ACK must get through; a partition makes connect retry until it heals.
        while not (
            self.reachable(src.address, target.address)
            and self.reachable(target.address, src.address)
        ):
            event = self._topology
            with trio.move_on_at(deadline):
                await event.wait()
            if self.sim.now() >= deadline:
                raise TimeoutError(errno.ETIMEDOUT, f"connect to {ip}:{port} timed out")
        rtt = (
            self.link(src.address, target.address).latency
            + self.link(target.address, src.address).latency
        )
        if faults.fires(LOSS.name, node=src.node.name, what="syn"):
            rtt += 1.0  # the initial SYN retransmission timeout
        await trio.sleep(rtt)
        sock._check_open()
        sock._check_node()
        if not target.node.alive:
            with trio.move_on_at(deadline):
                await trio.sleep_forever()
            raise TimeoutError(errno.ETIMEDOUT, f"connect to {ip}:{port} timed out (host down)")
        listener = target.listeners.get((int(sock.family), port))
        if listener is None:
            raise ConnectionRefusedError(errno.ECONNREFUSED, f"connection to {ip}:{port} refused")
        window = self.config.window
        server = SimSocket(self, target, sock.family, sock.type, sock.proto)
        server._options.update(listener._options)  # accepted sockets inherit options
        to_server = _pipe(server, window)
        to_client = _pipe(sock, window)
        local_ip = LOOPBACK if target is src and ip == LOOPBACK else target.address
        client_ip = LOOPBACK if target is src and ip == LOOPBACK else src.address
        assert sock._local is not None
        client_addr = (client_ip, sock._local[1])
        server.attach((local_ip, port), client_addr, sock, to_server)
        server.outbound = to_client
        sock.attach(client_addr, (local_ip, port), server, to_client)
        sock.outbound = to_server
        self.stats["connections"] += 1
        self.sim.trace_event(
            "net.connect", src=src.node.name, dst=target.node.name, port=port, rtt=rtt
        )
        listener.deliver_connection(server)

    def send_segment(self, sock: SimSocket, segment: Segment) -> None:
        """Queue ``segment`` from ``sock`` to its peer with its arrival time (or held)."""
        pipe = sock.outbound
        peer = sock.peer
        if pipe is None or peer is None or pipe.reset:
            return
        src, dst = sock._host.address, peer._host.address
        node = sock._host.node.name
        faults = self.sim.faults
        if segment.kind == DATA and faults.fires(RESET.name, node=node):
            self.sim.trace_event("net.reset", src=node, dst=peer._host.node.name)
            pipe.break_()  # both directions: each end's next operation gets ECONNRESET
            if sock.inbound is not None:
                sock.inbound.break_()
            return
        if self._open(src, dst):
            segment.arrival = self._arrival(src, dst, len(segment.data), node)
        else:
            self._hold(sock)
        self.stats["segments"] += 1
        self.stats["bytes"] += len(segment.data)
        pipe.push(segment)

    def _arrival(self, src: str, dst: str, size: int, node: str) -> float:
        link = self.link(src, dst)
        now = self.sim.now()
        departure = max(now, link.free_at) + size / self.config.bandwidth
        link.free_at = departure
        arrival = departure + link.latency
        faults = self.sim.faults
        delay = faults.fires(DELAY.name, node=node)
        if delay is not None:
            arrival += delay.param("max_extra") * self._rng.random()
        loss = faults.fires(LOSS.name, node=node)
        if loss is not None:
            arrival += loss.param("rto")
        return arrival

    def _hold(self, sock: SimSocket) -> None:
        if sock not in self._holding:
            self._holding.append(sock)

    def _release_held(self) -> None:
        still = []
        for sock in self._holding:
            pipe, peer = sock.outbound, sock.peer
            if pipe is None or peer is None or pipe.reset:
                continue
            src, dst = sock._host.address, peer._host.address
            if self._open(src, dst):
                arrival = self._arrival(src, dst, 0, sock._host.node.name)
                pipe.release_held(arrival)
            elif pipe.holding:
                still.append(sock)
        self._holding = still

    def reset_later(self, sock: SimSocket, peer: SimSocket) -> None:
        """``sock``'s host crashed: ``peer`` sees a reset once the RST crosses the link."""
        if peer._fd < 0 or peer.inbound is None:
            return
        latency = self.link(sock._host.address, peer._host.address).latency
        assert self.sim._nursery is not None
        self.sim._spawn(self._deliver_reset, peer, latency, name="kelpie_dst.net.rst")

    async def _deliver_reset(self, peer: SimSocket, latency: float) -> None:
        await trio.sleep(latency)
        if peer.inbound is not None:
            peer.inbound.break_()
        if peer.outbound is not None:
            peer.outbound.break_()

    # -- UDP ------------------------------------------------------------------------------------
    def send_datagram(self, sock: SimSocket, payload: bytes, remote: Address) -> None:
        src = sock._host
        ip, port = remote
        target = self._target(src, ip)
        node = src.node.name
        faults = self.sim.faults
        self.stats["datagrams"] += 1
        if target is None or not target.node.alive or not self._open(src.address, target.address):
            return
        if faults.fires(LOSS.name, node=node, what="datagram"):
            return
        receiver = target.bound.get((int(sock.family), int(stdlib_socket.SOCK_DGRAM), port))
        if receiver is None:
            return
        copies = 2 if faults.fires(DUPLICATE.name, node=node) else 1
        assert sock._local is not None
        source = (LOOPBACK if target is src else src.address, sock._local[1])
        for _ in range(copies):
            arrival = self.sim.now() + self.link(src.address, target.address).latency
            delay = faults.fires(DELAY.name, node=node)
            if delay is not None:
                arrival += delay.param("max_extra") * self._rng.random()
            reorder = faults.fires(REORDER.name, node=node)
            if reorder is not None:
                arrival += reorder.param("max_extra") * self._rng.random()
            receiver.deliver_datagram(arrival, next(self._seq), payload, source)

    # -- partitions and clogs --------------------------------------------------------------------
    def partition(
        self, side_a: Iterable[str], side_b: Iterable[str], *, one_way: bool = False
    ) -> None:
        """Cut traffic from ``side_a`` to ``side_b`` (and back, unless ``one_way``).

        Sides are node names. Heal with :meth:`heal`.
        """
        a = [self.names[n] for n in side_a]
        b = [self.names[n] for n in side_b]
        for x in a:
            for y in b:
                self.blocked.add((x, y))
                if not one_way:
                    self.blocked.add((y, x))
        self.sim.trace_event("net.partition", a=sorted(side_a), b=sorted(side_b), one_way=one_way)
        self._changed()

    def heal(self) -> None:
        """Remove every partition and clog."""
        self.blocked.clear()
        self.clogged.clear()
        self.sim.trace_event("net.heal")
        self._changed()

    def clog(self, src: str, dst: str, duration: float) -> None:
        """Hold everything sent from node ``src`` to node ``dst`` for ``duration`` seconds."""
        until = self.sim.now() + duration
        self.clogged[(self.names[src], self.names[dst])] = until
        self.sim.trace_event("net.clog", src=src, dst=dst, duration=duration)
        self.sim._spawn(self._unclog_at, until, name="kelpie_dst.net.unclog")

    async def _unclog_at(self, until: float) -> None:
        await trio.sleep_until(until)
        for key, end in list(self.clogged.items()):
            if end <= self.sim.now():
                del self.clogged[key]
        self._changed()

    def _changed(self) -> None:
        self._release_held()
        self._topology.set()
        self._topology = trio.Event()

    def nemesis_enabled(self) -> bool:
        return self.sim.faults.enabled(PARTITION.name) or self.sim.faults.enabled(CLOG.name)

    async def nemesis(self) -> None:
        """Inject partitions and clogs while those faults are enabled."""
        faults = self.sim.faults
        intervals = [
            fault.param("interval")
            for name in (PARTITION.name, CLOG.name)
            for fault in faults.active.get(name, ())
        ]
        if not intervals:
            return
        rng = self.sim.rng("network/nemesis")
        while not faults.healed:
            await trio.sleep(min(intervals))
            names = sorted(n.name for n in self.sim.nodes)
            if len(names) < 2 or faults.healed:
                continue
            partition = faults.fires(PARTITION.name, periodic=True)
            if partition is not None and not self.blocked:
                shuffled = names[:]
                rng.shuffle(shuffled)
                cut = rng.randrange(1, len(shuffled))
                one_way = rng.random() < partition.param("one_way")
                self.partition(shuffled[:cut], shuffled[cut:], one_way=one_way)
                self.sim._spawn(
                    self._heal_after, partition.param("duration"), name="kelpie_dst.net.heal"
                )
            clog = faults.fires(CLOG.name, periodic=True)
            if clog is not None:
                src, dst = rng.sample(names, 2)
                self.clog(src, dst, clog.param("duration"))

    async def _heal_after(self, duration: float) -> None:
        await trio.sleep(duration)
        if self.blocked:
            self.blocked.clear()
            self.sim.trace_event("net.heal")
            self._changed()


def _pipe(receiver: SimSocket, window: int) -> Any:
    from ._pipe import Pipe

    rcvbuf = receiver._options.get((stdlib_socket.SOL_SOCKET, stdlib_socket.SO_RCVBUF))
    return Pipe(int(rcvbuf) if isinstance(rcvbuf, int) and rcvbuf > 0 else window)


class _Factory(trio.abc.SocketFactory):
    def __init__(self, network: SimNetwork) -> None:
        self.network = network

    def socket(
        self,
        family: int | None = None,
        type: int | None = None,
        proto: int | None = None,
    ) -> SimSocket:
        return self.network.socket(family, type, proto)


_SERVICES = {"http": 80, "https": 443}


class _Resolver(trio.abc.HostnameResolver):
    def __init__(self, network: SimNetwork) -> None:
        self.network = network

    async def getaddrinfo(
        self,
        host: bytes | None,
        port: bytes | str | int | None,
        family: int = 0,
        type: int = 0,
        proto: int = 0,
        flags: int = 0,
    ) -> list[tuple[Any, Any, int, str, Any]]:
        await trio.lowlevel.checkpoint()
        name = host.decode() if isinstance(host, bytes) else (host or "localhost")
        network = self.network
        ip = network.resolve_name(name, network.host_of(network.sim.current_node()))
        if family == stdlib_socket.AF_INET6:
            raise stdlib_socket.gaierror(stdlib_socket.EAI_ADDRFAMILY, "no IPv6 address")
        if isinstance(port, bytes):
            port = port.decode()
        if isinstance(port, str):
            port = _SERVICES.get(port) if not port.isdigit() else int(port)
            if port is None:
                raise stdlib_socket.gaierror(stdlib_socket.EAI_SERVICE, "unknown service")
        kinds = [type] if type else [stdlib_socket.SOCK_STREAM, stdlib_socket.SOCK_DGRAM]
        return [
            (
                stdlib_socket.AF_INET,
                stdlib_socket.SocketKind(kind),
                proto
                or (
                    stdlib_socket.IPPROTO_TCP
                    if kind == stdlib_socket.SOCK_STREAM
                    else stdlib_socket.IPPROTO_UDP
                ),
                "",
                (ip, port or 0),
            )
            for kind in kinds
        ]

    async def getnameinfo(self, sockaddr: tuple[Any, ...], flags: int) -> tuple[str, str]:
        await trio.lowlevel.checkpoint()
        ip, port = sockaddr[0], sockaddr[1]
        for name, address in sorted(self.network.names.items()):
            if address == ip:
                return name, str(port)
        return ip, str(port)


_ = math
