"""UDP datagram faults, unmodified anyio/httpx/httpx2 clients, and no real sockets."""

import json
import os
import socket
import subprocess
import sys

import anyio
import httpx
import pytest
import trio

import kelpie_dst
from kelpie_dst.examples import http

ALL_NETWORK_FAULTS = [
    "network.delay=0.05",
    "network.packet_loss=0.05",
    "network.partition=0.3",
    "network.clog=0.3",
    "network.reset=0.01",
    "network.duplicate=0.05",
    "network.reorder=0.05",
]


def test_udp_loss_duplication_and_reordering() -> None:
    async def main(sim: kelpie_dst.Simulation) -> list[int]:
        sim.add_node("web", http.web_node)
        await trio.sleep(0.01)
        return await http.udp_exchange(200)

    clean = kelpie_dst.run(main, seed=1).value
    assert clean == list(range(200))
    faulty = kelpie_dst.run(
        main,
        seed=1,
        faults=["network.packet_loss=0.1", "network.duplicate=0.1", "network.reorder=0.3"],
    )
    got = faulty.value
    assert isinstance(got, list)
    assert len(set(got)) < 200  # some were lost
    assert len(got) != len(set(got))  # some were duplicated
    assert got != sorted(got)  # some were reordered
    assert set(faulty.faults_fired) == {
        "network.packet_loss",
        "network.duplicate",
        "network.reorder",
    }


def test_anyio_httpx_and_httpx2_run_unmodified() -> None:
    async def main(sim: kelpie_dst.Simulation) -> list[str]:
        import httpx2

        sim.add_node("web", http.web_node)
        await trio.sleep(0.01)
        out = []
        stream = await anyio.connect_tcp("web", http.ECHO_PORT)
        await stream.send(b"anyio")
        out.append((await stream.receive()).decode())
        await stream.aclose()
        async with httpx.AsyncClient() as client:
            out.append((await client.get(f"http://web:{http.PORT}/echo/httpx")).text)
        async with httpx2.AsyncClient() as client2:
            out.append((await client2.get(f"http://web:{http.PORT}/echo/httpx2")).text)
        return out

    result = kelpie_dst.run(main, seed=2)
    assert result.value == ["anyio", "httpx", "httpx2"], result.failure


_REAL_SOCKETS: list[tuple[str, tuple[object, ...]]] = []
_WATCHING = [False]


def _audit(event: str, args: tuple[object, ...]) -> None:
    if _WATCHING[0] and event in ("socket.__new__", "socket.bind", "socket.connect"):
        family = args[1] if event == "socket.__new__" else getattr(args[0], "family", None)
        if family in (socket.AF_INET, socket.AF_INET6):
            _REAL_SOCKETS.append((event, args))


sys.addaudithook(_audit)


def test_no_real_socket_is_created_bound_or_connected() -> None:
    _WATCHING[0] = True
    try:
        for seed in range(10):
            result = kelpie_dst.run(http.main, seed=seed, faults=ALL_NETWORK_FAULTS)
            assert result.ok, result.failure
    finally:
        _WATCHING[0] = False
    assert _REAL_SOCKETS == []
    # the hook does see real sockets (so the assertion above can fail)
    _WATCHING[0] = True
    try:
        socket.socket().close()
    finally:
        _WATCHING[0] = False
    assert _REAL_SOCKETS and _REAL_SOCKETS[0][0] == "socket.__new__"
    _REAL_SOCKETS.clear()


_FRESH = """
import json, sys
import kelpie_dst
from kelpie_dst.examples import http
faults = json.loads(sys.argv[1])
seeds = range(int(sys.argv[2]))
print(json.dumps([kelpie_dst.run(http.main, seed=s, faults=faults).trace_hash for s in seeds]))
"""


# Every fault fires by seed 1 (network.reset, the rarest, at 0.01); a run costs ~0.3 s, so the
# default run checks 50 seeds (three times: first, repeat, fresh process) and -m slow 200.
@pytest.mark.parametrize("count", [50, pytest.param(200, marks=pytest.mark.slow)])
def test_seeds_under_all_network_faults_are_deterministic(count: int) -> None:
    first = [kelpie_dst.run(http.main, seed=s, faults=ALL_NETWORK_FAULTS) for s in range(count)]
    assert all(r.ok for r in first), [r.failure for r in first if r.failure][:1]
    fired: set[str] = set()
    for r in first:
        fired |= set(r.faults_fired)
    assert fired == {f.split("=")[0] for f in ALL_NETWORK_FAULTS}
    repeat = [
        kelpie_dst.run(http.main, seed=s, faults=ALL_NETWORK_FAULTS).trace_hash
        for s in range(count)
    ]
    assert [r.trace_hash for r in first] == repeat
    env = dict(os.environ, PYTHONHASHSEED="4242")
    proc = subprocess.run(
        [sys.executable, "-c", _FRESH, json.dumps(ALL_NETWORK_FAULTS), str(count)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(proc.stdout) == repeat
