"""Graceful stops of a server node, as ``kelpie serve`` does them on SIGTERM (rtN, session 18).

Crashes stop a node at once; nothing stopped one the way an operator does: the HTTP server
stops accepting, lets requests in flight finish for up to a grace, cancels what is left, and
only then does the node's dispatcher deactivate its agents and release their leases
(``kelpie_agent/cli/_serve.py``; docs/http-server.md, "Graceful shutdown"). With the agents
workload's ``graceful_stops`` (off by default; via http), a stopper on the main node stops a
random server node that many times while the clients run, each time with a grace drawn from
:data:`GRACES` (shorter and longer than the model's answers, so some stops wait for requests
and some cut them), and the node starts a new production node at once, as a restarted
process would (its durable check runs, as after a restart). Every other oracle of the workload
judges what the clients saw across the stops (acknowledged sends stored once, retries by otid
answered as they first were, memory equal to the database).

The property (:func:`check_drains`, ``graceful_stops_bounded``), from the documented contract:

- **a graceful stop returns within its grace** (plus the lifespan shutdown, which the API app
  does not have, and :data:`SLACK`): requests still running at the grace are cancelled, not
  waited for, whatever ended meanwhile;
- **it stops the node**: the server's listeners close and no connection is left open
  (``statistics()``: state ``stopped``, no open connection).

A stop is judged only if its node neither crashed nor froze while it ran (a crash ends it
another way; a frozen process runs late). The server's warning that the grace expired is the
contract's own (step 4), not a problem: :class:`DrainLog` takes it out of what
``server_raised_nothing`` judges and counts it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import trio

if TYPE_CHECKING:
    from kelpie_agent.http import HttpServer

    from .._nodes import Node
    from .._sim import Simulation

__all__ = ["GRACES", "SLACK", "DrainLog", "Drains", "Stop", "check_drains"]

PORT = 8283
"""The server nodes' HTTP port (``_agent_world.PORT``, which imports this module)."""
GRACES = (0.5, 1.0, 2.0, 6.0)
"""The graces a stop draws from (seconds): the simulated model answers in 0.05-3 s."""
SLACK = 0.5
"""How long after its grace a stop may still return: cancelled connections unwinding."""
IDLE_AT_ONCE = 0.05
"""How soon after a stop starts its idle keep-alive connections must be closed (seconds)."""
EXPIRED = "shutdown grace of %ss expired: cancelling %d connection(s)"
"""The server's warning when a stop's grace expired (kelpie_agent/http/_server.py)."""


@attrs.define
class Stop:
    """One graceful stop: the node, its incarnation, when it began and ended, its grace, how
    many connections were open at its start, and the server's state after it."""

    node: str
    incarnation: int
    grace: float
    started: float
    open_at_start: int
    ended: float | None = None
    state: str = ""
    open_after: int = -1
    crashed: bool = False  # the node crashed or froze during the stop: not judged
    idle: bool = False  # the stopper held an idle keep-alive connection to the node
    idle_closed: float | None = None  # ... which the server closed this long after the start


def check_drains(stops: list[Stop], slack: float = SLACK) -> list[str]:
    """The findings (empty: every judged stop kept the contract)."""
    problems = []

    for stop in stops:
        if stop.crashed or stop.ended is None:
            continue
        took = stop.ended - stop.started
        where = f"{stop.node}#{stop.incarnation} at t={stop.started:.3f}"
        if took > stop.grace + slack:
            problems.append(
                f"graceful stop of {where} took {took:.3f}s, over its grace of {stop.grace}s "
                f"(+{slack}s): the server waited for requests past the grace instead of "
                f"cancelling them ({stop.open_at_start} connection(s) open at its start)"
            )
        if stop.idle and (stop.idle_closed is None or stop.idle_closed > IDLE_AT_ONCE):
            after = "not" if stop.idle_closed is None else f"{stop.idle_closed:.3f}s after"
            problems.append(
                f"graceful stop of {where}: an idle keep-alive connection was {after} closed "
                "(a graceful stop closes idle connections at once)"
            )
        if stop.state != "stopped" or stop.open_after != 0:
            problems.append(
                f"graceful stop of {where} returned with the server {stop.state!r} and "
                f"{stop.open_after} connection(s) open"
            )
    return problems


class DrainLog:
    """A :class:`kelpie_agent.http.ServerLogger` in front of a node's log that takes out the
    documented grace-expiry warning (counted in ``expired``)."""

    def __init__(self, inner: Any, drains: Drains) -> None:
        self.inner, self.drains = inner, drains

    def error(self, msg: object, *args: object, exc_info: Any = None) -> None:
        self.inner.error(msg, *args, exc_info=exc_info)

    def warning(self, msg: object, *args: object, exc_info: Any = None) -> None:
        if msg == EXPIRED:
            self.drains.expired += 1
            return
        self.inner.warning(msg, *args, exc_info=exc_info)

    def info(self, msg: object, *args: object, exc_info: Any = None) -> None:
        self.inner.info(msg, *args, exc_info=exc_info)

    def debug(self, msg: object, *args: object, exc_info: Any = None) -> None:
        self.inner.debug(msg, *args, exc_info=exc_info)


class Drains:
    """The live HTTP server of each node, and the stopper that stops them gracefully."""

    def __init__(self, sim: Simulation, count: int, rng: Any) -> None:
        self.sim, self.count, self.rng = sim, count, rng
        self.servers: dict[str, tuple[HttpServer, Node]] = {}
        self.stops: list[Stop] = []
        self.expired = 0  # stops whose grace expired (the server said so)

    def serving(self, node: Node, server: HttpServer) -> None:
        self.servers[node.name] = (server, node)

    async def run(self, nodes: tuple[str, ...], window: float) -> None:
        """``count`` stops at times drawn over ``window`` seconds, each of a drawn node."""
        times = sorted(self.rng.uniform(1.0, window) for _ in range(self.count))
        start = trio.current_time()
        for at in times:
            await trio.sleep(max(0.0, start + at - trio.current_time()))
            name = self.rng.choice(sorted(nodes))
            grace = self.rng.choice(GRACES)
            # a stop under way finishes even when the clients are done (the node must not
            # be left half stopped); the contract bounds it, and so does this scope
            with trio.CancelScope(shield=True) as scope:
                scope.deadline = trio.current_time() + grace + 60.0
                await self.stop(name, grace)

    async def stop(self, name: str, grace: float) -> None:
        entry = self.servers.get(name)
        if entry is None:
            return
        server, node = entry
        incarnation = node.incarnation
        if not node.alive or node.paused or server.statistics().state != "serving":
            return
        idle = await self._idle_connection(name)
        if not node.alive or server.statistics().state != "serving":
            return
        stop = Stop(name, incarnation, grace, trio.current_time(), len(server._connections))
        stop.idle = idle is not None
        self.stops.append(stop)
        async with trio.open_nursery() as nursery:
            if idle is not None:
                nursery.start_soon(self._watch_idle, idle, stop)
            await server.shutdown(grace)
            stop.ended = trio.current_time()
            nursery.cancel_scope.deadline = stop.ended + 1.0
        stats = server.statistics()
        stop.state, stop.open_after = stats.state, stats.connections_open
        stop.crashed = node.incarnation != incarnation or node.paused_between(
            stop.started, stop.ended
        )

    async def _idle_connection(self, name: str) -> trio.abc.Stream | None:
        """A connection to ``name`` left idle after one answered request (None if the node
        did not answer one within a few seconds: a crash, storage trouble)."""
        with trio.move_on_after(3.0):
            try:
                stream = await trio.open_tcp_stream(name, PORT)
            except OSError:
                return None
            try:
                await stream.send_all(b"GET /v1/health/ HTTP/1.1\r\nhost: drain\r\n\r\n")
                data = b""
                while b"\r\n\r\n" not in data or not _complete(data):
                    more = await stream.receive_some(65536)
                    if not more:
                        raise OSError("closed")
                    data += more
                if b" 200 " not in data.split(b"\r\n", 1)[0] + b" ":
                    raise OSError("not answered 200")
                return stream
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
                await trio.aclose_forcefully(stream)
                return None
        return None

    @staticmethod
    async def _watch_idle(stream: trio.abc.Stream, stop: Stop) -> None:
        try:
            while await stream.receive_some(65536):
                pass  # nothing is due on an idle connection; read to its end
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        stop.idle_closed = trio.current_time() - stop.started
        await trio.aclose_forcefully(stream)


def _complete(data: bytes) -> bool:
    """Whether ``data`` holds a whole answer with a content-length body."""
    head, _, body = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value.strip())
    return True
