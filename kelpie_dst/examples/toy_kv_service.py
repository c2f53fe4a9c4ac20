"""A toy trio service with a planted bug, and the Hypothesis state machine that finds it.

The tutorial docs/hypothesis.md walks through this file.

:class:`CachedKV` is a key-value server: GET and PUT over TCP (one request per connection, one
line each way), with a read-through cache in front of a slow disk. It is plain trio code and
never imports kelpie_dst; only :class:`SimDisk`, the simulated disk, talks to the simulator.

**The planted bug** (``CachedKV(disk, buggy=True)``): PUT drops the key from the cache *before*
it writes the disk. A GET whose disk read overlaps that write can read the old value and cache
it after the PUT dropped the key, and there it stays: every later GET returns the old value,
although the PUT was acknowledged. It takes a PUT and a GET of one key at the same time, and the
read finishing before the write: a matter of the disk latencies and of the order the tasks run
in, that is, of the seed. The fix (``buggy=False``): write the disk first, then drop the key
from the cache.

:class:`ToyKVMachine` drives the server from Hypothesis, with crashes, partitions, storage fault
windows and the passage of time. It checks every GET against a model of what the acknowledged
PUTs allow (black-box), and, between steps, that the cache agrees with the disk (white-box).
:class:`FixedToyKVMachine` runs the same rules against the fixed server.
"""

from __future__ import annotations

import functools
from typing import ClassVar, Protocol, cast

import attrs
import hypothesis.strategies as st
import trio
import trio.testing

import kelpie_dst
from kelpie_dst.hypothesis import (
    CrashRules,
    FaultWindowRules,
    PartitionRules,
    SimStateMachine,
    TimeRules,
    invariant,
    rule,
)

HOST = "kv"
PORT = 7000
TIMEOUT = 2.0  # seconds a client waits for a reply
# Seconds a disk read or write takes (writes are slower: they are flushed).
LATENCIES = {"read": (0.001, 0.002), "write": (0.002, 0.003, 0.004)}


# -- the service ---------------------------------------------------------------------------------
class Disk(Protocol):
    async def read(self, key: str) -> str | None: ...

    async def write(self, key: str, value: str) -> None: ...


class DiskError(Exception):
    """A disk operation failed; a failed write changed nothing."""


class CachedKV:
    """The server: a read-through cache in front of ``disk``."""

    def __init__(self, disk: Disk, *, buggy: bool) -> None:
        self.disk = disk
        self.buggy = buggy
        self.cache: dict[str, str | None] = {}

    async def get(self, key: str) -> str | None:
        if key in self.cache:
            return self.cache[key]
        value = await self.disk.read(key)
        self.cache[key] = value
        return value

    async def put(self, key: str, value: str) -> None:
        if self.buggy:
            self.cache.pop(key, None)  # BUG: a GET may re-cache the old value before the write
            await self.disk.write(key, value)
        else:
            await self.disk.write(key, value)
            self.cache.pop(key, None)

    async def handle(self, stream: trio.abc.Stream) -> None:
        """One request per connection: ``GET k`` -> ``VAL v`` | ``NONE``; ``PUT k v`` -> ``OK``."""
        try:
            words = (await read_line(stream)).split()
            try:
                if words[:1] == ["GET"] and len(words) == 2:
                    value = await self.get(words[1])
                    reply = "NONE" if value is None else f"VAL {value}"
                elif words[:1] == ["PUT"] and len(words) == 3:
                    await self.put(words[1], words[2])
                    reply = "OK"
                else:
                    reply = "ERR bad request"
            except DiskError as error:
                reply = f"ERR {error}"
            await stream.send_all(reply.encode() + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError, EOFError):
            pass  # the client went away


async def read_line(stream: trio.abc.ReceiveStream) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some(1024)
        if not chunk:
            raise EOFError("connection closed before a full line")
        data += chunk
    return data.decode().strip()


# -- the client ----------------------------------------------------------------------------------
class Unavailable(Exception):
    """No reply: the request may or may not have been applied (now or later)."""


class Rejected(Exception):
    """The server answered ERR: nothing was applied."""


async def request(line: str) -> str:
    try:
        with trio.fail_after(TIMEOUT):
            stream = await trio.open_tcp_stream(HOST, PORT)
            async with stream:
                await stream.send_all(line.encode() + b"\n")
                reply = await read_line(stream)
    except (OSError, EOFError, trio.BrokenResourceError, trio.TooSlowError) as error:
        raise Unavailable(f"{line}: {type(error).__name__}") from error
    if reply.startswith("ERR"):
        raise Rejected(f"{line}: {reply}")
    return reply


async def kv_get(key: str) -> str | None:
    reply = await request(f"GET {key}")
    return None if reply == "NONE" else reply.removeprefix("VAL ")


async def kv_put(key: str, value: str) -> None:
    await request(f"PUT {key} {value}")


# -- the simulated disk and node -----------------------------------------------------------------
class SimDisk:
    """A node's disk: its ``durable`` state, with seeded latencies and ``storage.*`` faults."""

    def __init__(self, node: kelpie_dst.Node) -> None:
        self.node = node
        self.data: dict[str, str] = node.durable.setdefault("toy_kv", {})
        self.rng = node.sim.rng(f"toy_kv/disk/{node.name}")

    async def _io(self, op: str) -> None:
        faults = self.node.sim.faults
        delay = self.rng.choice(LATENCIES[op])
        slow = faults.fires("storage.latency", node=self.node.name, op=op)
        if slow is not None:
            low, high = slow.param("min"), slow.param("max")
            delay += low + (high - low) * self.rng.random()
        await trio.sleep(delay)
        self.node.check_alive()
        if faults.fires(f"storage.{op}_fail", node=self.node.name):
            raise DiskError(f"{op} failed")

    async def read(self, key: str) -> str | None:
        await self._io("read")
        return self.data.get(key)

    async def write(self, key: str, value: str) -> None:
        await self._io("write")
        self.data[key] = value


async def kv_node(node: kelpie_dst.Node, *, buggy: bool) -> None:
    """The program of the ``kv`` node (run again from the start after each restart)."""
    server = node.volatile["server"] = CachedKV(SimDisk(node), buggy=buggy)
    await trio.serve_tcp(server.handle, PORT)


# -- the model and the state machine -------------------------------------------------------------
@attrs.frozen
class Get:
    key: str


@attrs.frozen
class Put:
    key: str
    value: int


KEYS = st.sampled_from(["a", "b"])
VALUES = st.integers(0, 99)
OPS = st.one_of(st.builds(Get, KEYS), st.builds(Put, KEYS, VALUES))
OK, UNKNOWN, REJECTED = "ok", "unknown", "rejected"


async def run_op(op: Get | Put) -> object:
    """Run one client request: a GET's value (an int or None), OK, UNKNOWN or REJECTED."""
    try:
        if isinstance(op, Get):
            value = await kv_get(op.key)
            return None if value is None else int(value)
        await kv_put(op.key, str(op.value))
        return OK
    except Unavailable:
        return UNKNOWN
    except Rejected:
        return REJECTED


@attrs.define
class Model:
    """What each key may hold, given what the clients saw.

    ``values[k]``: the values k may hold now (several after concurrent PUTs). ``unknown[k]``:
    values of PUTs that got no reply; such a PUT may take effect at any later time.
    """

    values: dict[str, set[int | None]] = attrs.field(factory=dict)
    unknown: dict[str, set[int]] = attrs.field(factory=dict)

    def allowed(self, key: str) -> set[int | None]:
        return self.values.get(key, {None}) | self.unknown.get(key, set())

    def check_read(self, key: str, got: object, allowed: set[int | None]) -> None:
        shown = ", ".join(sorted(map(str, allowed)))
        assert got in allowed, f"GET {key} returned {got}, expected one of {{{shown}}}"

    def puts_done(self, key: str, puts: list[tuple[int, object]]) -> None:
        acked = {value for value, outcome in puts if outcome == OK}
        if acked:
            self.values[key] = set(acked)  # of concurrent PUTs, any one may win
        for value, outcome in puts:
            if outcome == UNKNOWN:
                self.unknown.setdefault(key, set()).add(value)


class ToyKVMachine(CrashRules, PartitionRules, FaultWindowRules, TimeRules, SimStateMachine):
    """GETs, PUTs and concurrent batches of them, with crashes, partitions, storage fault
    windows and time passing."""

    buggy: ClassVar[bool] = True
    crash_nodes = (HOST,)
    partition_nodes = ("main", HOST)
    fault_window_types = ("storage.latency", "storage.write_fail", "storage.read_fail")
    fault_window_nodes = (HOST,)

    def __init__(self) -> None:
        super().__init__()
        self.model = Model()

    async def setup(self) -> None:
        self.sim.add_node(HOST, functools.partial(kv_node, buggy=self.buggy))
        await trio.testing.wait_all_tasks_blocked()  # until the server listens

    @invariant()
    def cache_agrees_with_disk(self) -> None:
        """White-box: between steps, every cached value is the value on disk."""
        node = self.sim.node(HOST)
        server = node.volatile.get("server")
        if server is None:  # down, or booting
            return
        disk = node.durable.get("toy_kv", {})
        for key, value in sorted(server.cache.items()):
            assert value == disk.get(key), f"cache has {key}={value}, disk has {disk.get(key)}"

    @rule(key=KEYS, value=VALUES)
    async def put(self, key: str, value: int) -> None:
        outcome = await run_op(Put(key, value))
        self.model.puts_done(key, [(value, outcome)])

    @rule(key=KEYS)
    async def get(self, key: str) -> None:
        got = await run_op(Get(key))
        if got not in (UNKNOWN, REJECTED):
            self.model.check_read(key, got, self.model.allowed(key))
            self.model.values[key] = {cast(int | None, got)}

    @rule(ops=st.lists(OPS, min_size=2, max_size=3))
    async def concurrently(self, ops: list[Get | Put]) -> None:
        """Send two or three requests at once, each from its own client task."""
        outcomes: list[object] = [None] * len(ops)

        async def one(i: int) -> None:
            outcomes[i] = await run_op(ops[i])

        before = {op.key: self.model.allowed(op.key) for op in ops}
        async with trio.open_nursery() as nursery:
            for i in range(len(ops)):
                nursery.start_soon(one, i)
        done = list(zip(ops, outcomes, strict=True))
        for op, outcome in done:
            if isinstance(op, Get) and outcome not in (UNKNOWN, REJECTED):
                # A GET overlapping PUTs may see the old value or any of theirs.
                theirs = {o.value for o in ops if isinstance(o, Put) and o.key == op.key}
                self.model.check_read(op.key, outcome, before[op.key] | theirs)
        for key in sorted({op.key for op in ops if isinstance(op, Put)}):
            puts = [(o.value, r) for o, r in done if isinstance(o, Put) and o.key == key]
            self.model.puts_done(key, puts)


class FixedToyKVMachine(ToyKVMachine):
    """The same rules against the fixed server: must pass."""

    buggy: ClassVar[bool] = False
