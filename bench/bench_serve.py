"""Agent turns per second of the ``kelpie serve`` stack with an instant LLM, and the fsyncs each
turn costs, with 1 client and with several at once (group commit, docs/storage.md).

    .venv/bin/python bench/bench_serve.py [--turns 200] [--clients 1 8] [--no-strace]
                                          [--fsync-ms 5]

The server is a child process running what ``kelpie serve`` runs: ``SqliteKV`` with
``synchronous=FULL`` in a fresh directory under the current one, ``open_agent_node`` with
``system_ports()``, ``create_app`` and Kelpie's HTTP server on 127.0.0.1. Only the model
differs: the SimLLM's helpful policy with no latency (``LlmTiming.instant()``), so the figures
are the server's. The clients are in this process (``httpx``, keep-alive), each sending
``--turns`` messages in turn to its own agent. For each client count a fresh server runs under
``strace -f -c`` (when strace is installed) counting ``fsync``/``fdatasync``; a run with no
turns gives the start-up's count, which is subtracted. ``commits/turn`` is SqliteKV's count of
SQLite transactions (each one fsync of the WAL). The figures need an idle machine; the load
average is printed beside them.

A virtual disk whose host caches writes makes ``fdatasync`` almost free (15 us here), which
hides what group commit saves on a disk that really flushes. ``--fsync-ms N`` makes every
``fsync``/``fdatasync`` of the server take N ms more, through a small ``LD_PRELOAD`` library
compiled with ``cc`` (a flush of a consumer SSD takes about 1-5 ms, of a spinning disk 8-15).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio

CHILD = """
import signal, sys, trio
from pathlib import Path
from kelpie_agent.api import create_app
from kelpie_agent.http import HttpServer, ServerOptions
from kelpie_agent.ports import system_ports
from kelpie_agent.service import open_agent_node
from kelpie_agent.storage import SqliteKV
from kelpie_dst.shims import HelpfulPolicy, LlmTiming, SimLlmClient

async def main(directory):
    kv = await SqliteKV.open(Path(directory) / "kelpie.db")
    llm = SimLlmClient(HelpfulPolicy(), timing=LlmTiming.instant())
    async with open_agent_node(kv, system_ports(), node_id="bench", llm=llm) as service:
        server = HttpServer(create_app(service), ServerOptions())
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve_listeners, listeners)
            with trio.open_signal_receiver(signal.SIGTERM) as signals:
                print(listeners[0].socket.getsockname()[1], flush=True)
                async for _ in signals:
                    break
            print(f"commits {getattr(kv, 'batches', -1)}", flush=True)  # -1: no group commit
            nursery.cancel_scope.cancel()
    await kv.close()

trio.run(main, sys.argv[1])
"""


def _fsyncs(strace_out: Path) -> int:
    total = 0
    for line in strace_out.read_text().splitlines():
        match = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(fsync|fdatasync)$", line)
        if match:
            total += int(match.group(1))
    return total


async def _drive(port: int, clients: int, turns: int) -> float:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        agents = []
        for i in range(clients):
            response = await http.post("/v1/agents/", json={"name": f"bench-{i}"})
            response.raise_for_status()
            agents.append(response.json()["id"])
        start = time.perf_counter()

        async def client(agent: str) -> None:
            for n in range(turns):
                url = f"/v1/agents/{agent}/messages"
                response = await http.post(url, json={"input": f"message {n}"})
                response.raise_for_status()

        async with trio.open_nursery() as nursery:
            for agent in agents:
                nursery.start_soon(client, agent)
        return time.perf_counter() - start


SLOW_FSYNC = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
static void pause_for_flush(void) {
    const char *text = getenv("KELPIE_BENCH_FSYNC_US");
    long us = text ? atol(text) : 0;
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, 0);
}
int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    pause_for_flush();
    return real(fd);
}
int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    pause_for_flush();
    return real(fd);
}
"""


def slow_fsync_library(directory: Path) -> Path:
    source, library = directory / "slow_fsync.c", directory / "slow_fsync.so"
    source.write_text(SLOW_FSYNC)
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-O2", "-o", str(library), str(source), "-ldl"], check=True
    )
    return library


def run_server(
    clients: int, turns: int, strace: bool, env: dict[str, str]
) -> tuple[float, int, int | None]:
    """Seconds for the turns, SQLite commits, fsyncs (None without strace)."""
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        out = Path(tmp, "strace.txt")
        argv = [sys.executable, "-c", CHILD, tmp]
        if strace:
            argv = ["strace", "-f", "-c", "--seccomp-bpf", "-e", "trace=fsync,fdatasync"]
            argv += ["-o", str(out), sys.executable, "-c", CHILD, tmp]
        server = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
        assert server.stdout is not None
        port = int(server.stdout.readline())
        seconds = trio.run(_drive, port, clients, turns) if turns else 0.0
        os.kill(_python_pid(server.pid) if strace else server.pid, signal.SIGTERM)
        commits = int(server.stdout.readline().split()[1])
        server.wait(timeout=60)
        return seconds, commits, _fsyncs(out) if strace else None


def _python_pid(strace_pid: int) -> int:
    """The traced Python process (strace's child)."""
    children = Path(f"/proc/{strace_pid}/task/{strace_pid}/children").read_text().split()
    return int(children[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200, help="turns per client")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--no-strace", action="store_true")
    parser.add_argument("--fsync-ms", type=float, default=0.0, help="extra ms per fsync")
    args = parser.parse_args()
    strace = not args.no_strace and shutil.which("strace") is not None
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as build:
        if args.fsync_ms:
            env["LD_PRELOAD"] = str(slow_fsync_library(Path(build)))
            env["KELPIE_BENCH_FSYNC_US"] = str(int(args.fsync_ms * 1000))
        print(
            f"load average {os.getloadavg()[0]:.2f}; strace: {'yes' if strace else 'no'}; "
            f"fsync: {f'+{args.fsync_ms:g} ms' if args.fsync_ms else 'as the disk does it'}"
        )
        for clients in args.clients:
            measure(clients, args.turns, strace, env)


def measure(clients: int, turns: int, strace: bool, env: dict[str, str]) -> None:
    _, base_commits, base_fsyncs = run_server(clients, 0, strace, env)  # start-up, creates
    seconds, commits, fsyncs = run_server(clients, turns, strace, env)
    total = clients * turns
    line = f"{clients} client(s) x {turns} turns: {total / seconds:7.1f} turns/s"
    if commits >= 0:
        line += f"  {(commits - base_commits) / total:5.2f} commits/turn"
    if fsyncs is not None and base_fsyncs is not None:
        line += f"  {(fsyncs - base_fsyncs) / total:5.2f} fsync+fdatasync/turn"
    print(line + f"  (load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
