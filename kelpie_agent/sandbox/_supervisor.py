"""The first process inside a ProcessSandbox's namespaces: it runs one command and answers for it.

This file is not imported by the server: a copy in the sandbox's run directory is run as
``python -I -S /run/kelpie/supervisor.py SETTINGS... -- COMMAND...`` as PID 1 of the sandbox's
PID namespace (bubblewrap's ``--as-pid-1``), so it uses the standard library only and nothing
from kelpie, and imports little (it starts with every command: no json, typing or socket unless
the forwarder needs it). Its stdin is a socket to the server (the control channel); the
command's stdin is ``/dev/null``. SETTINGS are, in order (:data:`FIELDS`): uid, gid (``-``
to stay who it is), processes, cpu seconds, memory, file size and disk bytes, the working
directory, and the proxy socket (``-`` for none).

In order, it: drops to the sandbox's own user (when the server runs as root), caps the number
of processes (``RLIMIT_NPROC`` counts this user's processes, so one command cannot fork-bomb),
starts the network forwarder if the sandbox may reach hosts (``127.0.0.1:3128`` inside,
relayed to the server's filtering proxy over a Unix socket), starts the command with its
CPU, memory and file-size limits, then waits. Meanwhile it obeys the control channel (``S``
stops every process of the namespace, ``C`` continues them; end of file kills them all) and
measures the working area every 50 ms (and once more at the end): once it grows past its
disk limit, every process is killed. When the command exits it kills whatever the command
left behind (PID 1 exiting would too), sends one line, ``WAIT_STATUS REASON`` (``-`` or
``disk``), on the control channel, and exits.
"""

from __future__ import annotations

import os
import resource
import select
import sys

TYPE_CHECKING = False  # mypy reads this name as true; importing typing costs 15 ms
if TYPE_CHECKING:
    import signal
    import socket
else:
    import _signal as signal  # signal imports enum: 20 ms more on every command's start

FIELDS = ("uid", "gid", "processes", "cpu", "memory", "fsize", "disk", "workdir", "proxy")
PROXY_PORT = 3128
DISK_EVERY = 0.05  # seconds between measurements of the working area
ENTRY_COST = 4096  # bytes each file or directory costs on top of its blocks
CHUNK = 65536


def _cap(kind: int, soft: int, hard: int) -> None:
    top = resource.getrlimit(kind)[1]
    if top != resource.RLIM_INFINITY:
        soft, hard = min(soft, top), min(hard, top)
    resource.setrlimit(kind, (soft, hard))


def usage(root: str, stop_at: int) -> int:
    """Bytes the tree under ``root`` occupies (its blocks plus ENTRY_COST per entry); the
    walk stops as soon as the total passes ``stop_at``."""
    total, stack = 0, [root]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += info.st_blocks * 512 + ENTRY_COST
                    if total > stop_at:
                        return total
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return total


class _Relay:
    """The forwarder's connections: each socket, its peer, and the bytes waiting for it."""

    def __init__(self) -> None:
        self.peer: dict[socket.socket, socket.socket] = {}
        self.pending: dict[socket.socket, bytearray] = {}
        self.ended: set[socket.socket] = set()  # sockets whose reading side ended

    def add(self, one: socket.socket, other: socket.socket) -> None:
        for a, b in ((one, other), (other, one)):
            a.setblocking(False)
            self.peer[a], self.pending[a] = b, bytearray()

    def readers(self) -> list[socket.socket]:
        return [
            s for s in self.peer if s not in self.ended and len(self.pending[self.peer[s]]) < CHUNK
        ]

    def writers(self) -> list[socket.socket]:
        return [s for s in self.peer if self.pending[s]]

    def write(self, sock: socket.socket) -> None:
        try:
            del self.pending[sock][: sock.send(self.pending[sock])]
        except OSError:
            self.pending[sock].clear()
            self.ended.update((sock, self.peer[sock]))

    def read(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.pending[self.peer[sock]] += data
        else:
            self.ended.add(sock)

    def settle(self) -> None:
        """Pass each end of file on once its bytes are through; close finished pairs."""
        import socket

        for sock in list(self.peer):
            other = self.peer.get(sock)
            if other is None or sock not in self.ended or self.pending[other]:
                continue
            try:
                other.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            if other in self.ended and not self.pending[sock]:
                for done in (sock, other):
                    del self.peer[done], self.pending[done]
                    self.ended.discard(done)
                    done.close()


def forward(path: str) -> None:
    """Listen on 127.0.0.1:PROXY_PORT in a child process and relay every connection to the
    Unix socket ``path`` (non-blocking, a bounded buffer each way, so neither side can stall
    the other)."""
    import socket

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", PROXY_PORT))
    listener.listen(64)
    if os.fork():
        listener.close()
        return
    relay = _Relay()
    try:
        while True:
            readable, writable, _ = select.select([listener, *relay.readers()], relay.writers(), [])
            for sock in writable:
                relay.write(sock)
            for sock in readable:
                if sock is not listener:
                    relay.read(sock)
                    continue
                client, _ = listener.accept()
                upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    upstream.connect(path)
                except OSError:
                    client.close()
                    upstream.close()
                    continue
                relay.add(client, upstream)
            relay.settle()
    finally:
        os._exit(0)


def start_command(settings: dict[str, str], argv: list[str]) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:
        cpu = int(settings["cpu"])
        _cap(resource.RLIMIT_CPU, cpu, cpu + 1)
        _cap(resource.RLIMIT_AS, int(settings["memory"]), int(settings["memory"]))
        _cap(resource.RLIMIT_FSIZE, int(settings["fsize"]), int(settings["fsize"]))
        _cap(resource.RLIMIT_CORE, 0, 0)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.execv(argv[0], argv)
    except OSError as error:
        os.write(2, f"sandbox: cannot run {argv[0]}: {error.strerror}\n".encode())
    os._exit(127)


def kill_all(signum: int) -> None:
    """Signal every process of the namespace but this one (PID 1 is spared by ``kill(-1)``)."""
    try:
        os.kill(-1, signum)
    except ProcessLookupError:
        pass  # nobody else is left


def drop_privileges(settings: dict[str, str]) -> None:
    if settings["uid"] == "-":
        return
    os.setgroups([])
    os.setgid(int(settings["gid"]))
    os.setuid(int(settings["uid"]))
    try:  # a change of user clears the parent-death signal; set it again
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (ImportError, OSError, AttributeError):
        pass  # the control channel's end of file still stops everything


def main() -> None:
    settings = dict(zip(FIELDS, sys.argv[1 : 1 + len(FIELDS)], strict=True))
    argv = sys.argv[2 + len(FIELDS) :]  # after the "--"
    control = os.dup(0)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    drop_privileges(settings)
    # The command's own processes, plus this one and the forwarder.
    processes = int(settings["processes"]) + 1 + (settings["proxy"] != "-")
    _cap(resource.RLIMIT_NPROC, processes, processes)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    if settings["proxy"] != "-":
        forward(settings["proxy"])
    workdir, disk = settings["workdir"], int(settings["disk"])
    allowed = max(disk, usage(workdir, sys.maxsize))  # may start over (then: must not grow)
    main_pid = start_command(settings, argv)
    os.dup2(null, 1)
    os.dup2(null, 2)
    status, reason, paused = None, "-", False
    while status is None:
        readable, _, _ = select.select([control, wake_r], [], [], DISK_EVERY)
        if wake_r in readable:
            os.read(wake_r, 4096)
        if control in readable:
            data = os.read(control, 64)
            if not data:
                kill_all(signal.SIGKILL)
                os._exit(0)
            for byte in data:
                if byte in b"SC":
                    paused = byte == ord("S")
                    kill_all(signal.SIGSTOP if paused else signal.SIGCONT)
        while True:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid == main_pid:
                status = wait_status
        if status is None and not paused and reason == "-" and usage(workdir, allowed) > allowed:
            reason = "disk"
            kill_all(signal.SIGKILL)
    kill_all(signal.SIGKILL)
    if reason == "-" and usage(workdir, allowed) > allowed:
        reason = "disk"  # it filled the disk between two measurements, then exited
    os.write(control, f"{status} {reason}\n".encode())
    os._exit(0)


if __name__ == "__main__":
    main()
