"""trio's zero-timeout ``epoll`` at every guest tick, skipped while it cannot find anything.

In guest mode trio ends every tick with ``io_manager.get_events(0)``, a real ``epoll_wait``
system call, to see whether I/O is ready before it queues the next tick. The virtual clock
makes every tick's timeout zero (``_clock.py``), so a seed makes one such call per tick,
some 10,000 to 30,000 per agent seed, and almost all of them find nothing: a simulation does
no real I/O. The only descriptors trio watches in a simulation are its two wakeup socket
pairs, the I/O manager's own (``force_wakeup``, always registered) and the entry queue's
(``run_sync_soon``, registered while its task waits), and they only become readable when
somebody writes to them, which trio does through ``WakeupSocketpair.wakeup_thread_and_signal_safe``.

While a simulation runs, :func:`quiet_polls` swaps in copies of that method and of
``WakeupSocketpair.drain`` that also note whether a pair may hold unread bytes (set after
every write, cleared before every drain, which reads the socket empty), and a copy of
``EpollIOManager.get_events`` that, for an I/O manager :func:`gate` registered, answers a
zero timeout with no events, without the system call, when neither pair may hold a byte and
nothing but the entry queue's socket is registered: exactly what ``epoll_wait`` would have
answered. Any other descriptor registered, any byte possibly unread, or any other timeout
makes the real call. So trio sees the same events at the same ticks and every trace is
unchanged (Dspeed-16).

Like :mod:`._trio_speed`, the copies are installed only if trio's three methods are, word for
word, the ones they copy (:data:`_ORIGINALS`); any other trio release keeps its own.
"""

from __future__ import annotations

import contextlib
import inspect
import socket
import textwrap
from collections.abc import Iterator
from typing import Any

from trio._core._io_epoll import EpollIOManager
from trio._core._wakeup_socketpair import WakeupSocketpair

__all__ = ["gate", "quiet_polls", "ungate"]

# trio 0.35's methods, which the copies below repeat (and extend).
_ORIGINALS = {
    "get_events": """\
def get_events(self, timeout: float) -> EventResult:
    # max_events must be > 0 or epoll gets cranky
    # accessing self._registered from a thread looks dangerous, but it's
    # OK because it doesn't matter if our value is a little bit off.
    max_events = max(1, len(self._registered))
    return self._epoll.poll(timeout, max_events)
""",
    "wakeup_thread_and_signal_safe": """\
def wakeup_thread_and_signal_safe(self) -> None:
    with contextlib.suppress(BlockingIOError):
        self.write_sock.send(b"\\x00")
""",
    "drain": """\
def drain(self) -> None:
    try:
        while True:
            self.wakeup_sock.recv(2**16)
    except BlockingIOError:
        pass
""",
}


class _Gate:
    """One simulation's trio I/O manager: its two wakeup pairs and the entry queue's fd."""

    __slots__ = ("entry", "entry_fd", "force")

    def __init__(self, force: Any, entry: Any) -> None:
        self.force, self.entry = force, entry
        self.entry_fd: int = entry.wakeup_sock.fileno()


_GATES: dict[int, _Gate] = {}  # id(io manager) -> its gate, while its simulation runs


def _get_events(self: Any, timeout: float) -> Any:
    if timeout == 0:
        gate = _GATES.get(id(self))
        if gate is not None and not gate.force.kelpie_unread and not gate.entry.kelpie_unread:
            registered = self._registered
            if not registered or (len(registered) == 1 and gate.entry_fd in registered):
                return []
    max_events = max(1, len(self._registered))
    return self._epoll.poll(timeout, max_events)


def _wakeup(self: Any) -> None:
    with contextlib.suppress(BlockingIOError):
        self.write_sock.send(b"\x00")
    self.kelpie_unread = True  # after the write: a poll that misses this flag sees the byte


def _drain(self: Any) -> None:
    self.kelpie_unread = False  # before the reads: a byte written meanwhile sets it again
    try:
        while True:
            self.wakeup_sock.recv(2**16)
    except BlockingIOError:
        pass


_COPIES = {"get_events": _get_events, "wakeup_thread_and_signal_safe": _wakeup, "drain": _drain}
_OWNERS = {
    "get_events": EpollIOManager,
    "wakeup_thread_and_signal_safe": WakeupSocketpair,
    "drain": WakeupSocketpair,
}


def _matches(name: str, method: Any) -> bool:
    try:
        source = textwrap.dedent(inspect.getsource(method))
    except (OSError, TypeError):
        return False
    return source == _ORIGINALS[name]


_USABLE: list[bool] = []  # whether trio's three methods are the ones copied (checked once)


def _installed() -> bool:
    return WakeupSocketpair.__dict__["drain"] is _drain


def _unread(pair: Any) -> bool:
    """Whether ``pair``'s socket holds a byte now (a peek, without reading it)."""
    try:
        return bool(pair.wakeup_sock.recv(1, socket.MSG_PEEK))
    except BlockingIOError:
        return False


def gate(runner: Any) -> bool:
    """Let ``runner``'s zero-timeout polls be skipped when they cannot find anything.
    Returns whether it did (not for another I/O manager, or when the copies are not in)."""
    io = runner.io_manager
    if type(io) is not EpollIOManager or not _installed():
        return False
    force, entry = io._force_wakeup, runner.entry_queue.wakeup
    for pair in (force, entry):
        pair.kelpie_unread = getattr(pair, "kelpie_unread", False) or _unread(pair)  # type: ignore[union-attr]
    _GATES[id(io)] = _Gate(force, entry)
    return True


def ungate(runner: Any) -> None:
    _GATES.pop(id(runner.io_manager), None)


@contextlib.contextmanager
def quiet_polls() -> Iterator[None]:
    """Use the copies (see the module) while the block runs; put trio's own back after."""
    if not _USABLE:
        _USABLE.append(all(_matches(n, _OWNERS[n].__dict__[n]) for n in _ORIGINALS))
    if not _USABLE[0] or _installed():
        yield
        return
    saved = {name: _OWNERS[name].__dict__[name] for name in _COPIES}
    for name, copy in _COPIES.items():
        setattr(_OWNERS[name], name, copy)
    try:
        yield
    finally:
        for name, original in saved.items():
            setattr(_OWNERS[name], name, original)
