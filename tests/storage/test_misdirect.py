"""storage.misdirect (session 16): a written frame also lands on its neighbour's slot. The frame
is intact, but its checksum covers the key it was written for, so reading the neighbour must
raise ChecksumError (on SimKV and on the real SQLite engine), never hand back the other key's
value."""

from __future__ import annotations

import trio

import kelpie_dst
from kelpie_agent.storage import ChecksumError
from kelpie_dst._run import run
from kelpie_dst._sim import Simulation
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.shims import open_kv
from kelpie_dst.shims._sqlite_disk import SqliteFiles, use_sqlite
from kelpie_dst.shims._storage import SimKVStore


async def _reads(kv: object) -> tuple[str, str]:
    """Write k1 then k2 (k2's frame lands on k1, its only neighbour); read both back."""
    await kv.set(b"k1", b"one")  # type: ignore[attr-defined]
    await kv.set(b"k2", b"two")  # type: ignore[attr-defined]
    try:
        first = repr(await kv.get(b"k1"))  # type: ignore[attr-defined]
    except ChecksumError:
        first = "ChecksumError"
    second = repr(await kv.get(b"k2"))  # type: ignore[attr-defined]
    return first, second


def test_the_neighbour_of_a_misdirected_write_reads_as_corrupt_on_simkv() -> None:
    out: list[tuple[str, str]] = []

    async def node_main(node: kelpie_dst.Node) -> None:
        out.append(await _reads(open_kv(node)))

    async def main(sim: Simulation) -> None:
        sim.add_node("client", node_main)
        await trio.sleep(5)

    run(main, seed=1, faults=["storage.misdirect=1"])
    assert out == [("ChecksumError", "b'two'")]
    out.clear()
    run(main, seed=1)
    assert out == [("b'one'", "b'two'")]


def test_the_neighbour_of_a_misdirected_write_reads_as_corrupt_on_sqlite() -> None:
    out: list[tuple[str, str]] = []
    files = SqliteFiles(fsync=0.01)

    async def main(sim: Simulation) -> None:
        use_sqlite(sim, files)
        db, client = sim.add_node("db"), sim.add_node("client")
        out.append(await _reads(open_kv(client, host=db)))

    try:
        result = run(main, seed=1, faults=["storage.misdirect=1"])
    finally:
        files.close()
    assert result.failure is None, result.failure.describe()
    assert out == [("ChecksumError", "b'two'")]


def test_misdirect_picks_the_next_key_or_the_previous_one() -> None:
    store = SimKVStore()
    store._apply([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    assert store.misdirect(b"a") == b"b"
    assert store.misdirect(b"c") == b"b"
    assert store.misdirect(b"zz") is None
    lone = SimKVStore()
    lone._apply([(b"a", b"1")])
    assert lone.misdirect(b"a") is None
    assert lone._get(b"a") == b"1"


def test_kv_ranges_misdirect_passes_repeats_and_misdirects() -> None:
    scenario = load_scenario("kv_ranges_misdirect")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.result.trace_hash == again.result.trace_hash
    assert first.result.faults_fired["storage.misdirect"] > 0
    assert first.metrics["ranges.scans"] > 0
