"""The production SqliteKV under simulation (``[topology.storage] backend = "sqlite"``): the
SIGKILL crash model, group commit reached by concurrent clients, faults inside the engine,
and determinism (docs/storage.md, "The real engine under simulation")."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from kelpie_agent.storage import StorageError, StorageUnavailableError
from kelpie_dst._nodes import Node
from kelpie_dst._run import run
from kelpie_dst._sim import Simulation
from kelpie_dst.scenario import ScenarioError, load_scenario, run_scenario
from kelpie_dst.shims import open_kv
from kelpie_dst.shims._sqlite_disk import SqliteFiles, use_sqlite
from kelpie_dst.shims._sqlite_faults import SqliteFaultyKV

ROOT = Path(__file__).resolve().parents[2]


def _simulate(body, fsync: float = 0.05, seed: int = 1):  # type: ignore[no-untyped-def]
    files = SqliteFiles(fsync=fsync)
    out: dict[str, object] = {}

    async def main(sim: Simulation) -> None:
        use_sqlite(sim, files)
        await body(sim, out)

    try:
        result = run(main, seed=seed)
    finally:
        files.close()
    assert result.failure is None, result.failure.describe()
    return out, result


def test_acknowledged_commits_survive_a_host_crash_and_the_open_one_is_rolled_back() -> None:
    async def body(sim: Simulation, out: dict[str, object]) -> None:
        db, client = sim.add_node("db"), sim.add_node("client")
        kv = open_kv(client, host=db)
        assert isinstance(kv, SqliteFaultyKV)
        await kv.set(b"acked", b"1")
        async with kv.transaction() as txn:
            await txn.set(b"acked-txn", b"2")

        async def in_flight() -> None:
            try:
                await kv.set(b"in-flight", b"3")
                out["in_flight"] = "ok"
            except StorageUnavailableError:
                out["in_flight"] = "unavailable"

        async with trio.open_nursery() as nursery:
            nursery.start_soon(in_flight)
            await trio.sleep(0.02)  # inside the engine's 50ms write, before its COMMIT
            sim.crash(db)
            sim.restart(db, after=0.5)
        out["during"] = kv.disk.view.keys()
        await trio.sleep(1.0)
        out["after"] = [await kv.get(k) for k in (b"acked", b"acked-txn", b"in-flight")]
        out["generation"] = kv.disk.generation

    out, _ = _simulate(body)
    assert out["in_flight"] == "unavailable"
    assert out["during"] == [b"acked", b"acked-txn"]  # the crash image: committed only
    assert out["after"] == [b"1", b"2", None]
    assert out["generation"] == 2  # reopened from the image: a new file, WAL recovery


def test_a_transaction_that_spans_a_host_restart_is_refused() -> None:
    async def body(sim: Simulation, out: dict[str, object]) -> None:
        db, client = sim.add_node("db"), sim.add_node("client")
        kv = open_kv(client, host=db)
        await kv.set(b"k", b"old")
        with pytest.raises(StorageUnavailableError, match="restarted since the transaction"):
            async with kv.transaction() as txn:
                assert await txn.get(b"k") == b"old"
                sim.crash(db)
                sim.restart(db, after=0.1)
                await trio.sleep(0.5)
                await txn.set(b"k", b"new")
        out["k"] = await kv.get(b"k")

    out, _ = _simulate(body)
    assert out["k"] == b"old"


def test_concurrent_commits_meet_in_one_group_commit() -> None:
    async def body(sim: Simulation, out: dict[str, object]) -> None:
        db, client = sim.add_node("db"), sim.add_node("client")
        kv = open_kv(client, host=db)
        assert isinstance(kv, SqliteFaultyKV)

        async def write(i: int) -> None:
            await trio.sleep(0.01 * i)  # each arrives while the first is writing
            async with kv.transaction() as txn:
                await txn.set(b"k%d" % i, b"v")

        async with trio.open_nursery() as nursery:
            for i in range(5):
                nursery.start_soon(write, i)
        out["batches"], out["commits"] = kv.disk.batches, kv.disk.commits
        out["keys"] = kv.disk.view.keys()

    out, _ = _simulate(body)
    assert out["commits"] == 5 and out["batches"] == 2  # the first alone, then the other four
    assert out["keys"] == [b"k0", b"k1", b"k2", b"k3", b"k4"]


def test_an_engine_write_failure_fails_the_whole_batch_and_applies_nothing() -> None:
    async def body(sim: Simulation, out: dict[str, object]) -> None:
        db, client = sim.add_node("db"), sim.add_node("client")
        kv = open_kv(client, host=db)
        assert isinstance(kv, SqliteFaultyKV)
        results: dict[int, str] = {}

        async def write(i: int) -> None:
            await trio.sleep(0.01 * min(i, 1))
            try:
                if i == 2:  # storage.write_fail fires for this one, inside the engine
                    await kv._write(
                        lambda: _poison(kv, b"k2"), lambda: kv._engine(lambda e: e.set(b"k2", b"v"))
                    )
                else:
                    await kv.set(b"k%d" % i, b"v")
                results[i] = "ok"
            except StorageError as exc:
                results[i] = type(exc).__name__

        async with trio.open_nursery() as nursery:
            for i in range(4):
                nursery.start_soon(write, i)
        out["results"] = dict(sorted(results.items()))
        out["keys"] = kv.disk.view.keys()
        await kv.set(b"after", b"v")  # the connection is usable again (rolled back)
        out["after"] = await kv.get(b"after")

    out, _ = _simulate(body)
    assert out["results"] == {0: "ok", 1: "StorageError", 2: "StorageError", 3: "StorageError"}
    assert out["keys"] == [b"k0"]
    assert out["after"] == b"v"


async def _poison(kv: SqliteFaultyKV, key: bytes) -> None:
    assert kv._fails_in_engine([key])
    await trio.lowlevel.checkpoint()


def test_kv_sqlite_groups_commits_and_repeats_its_trace_in_a_fresh_process() -> None:
    scenario = load_scenario("kv_sqlite")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["sqlite.batches"] < first.metrics["sqlite.commits"]
    assert first.result.trace_hash == again.result.trace_hash
    fresh = subprocess.run(
        [sys.executable, "-m", "kelpie_dst", "run", "kv_sqlite", "--seed", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"trace_hash=(\w+)", fresh.stdout + fresh.stderr)
    assert found is not None and found.group(1) == first.result.trace_hash


@pytest.mark.slow  # about 20 s; CI's short sweep of agent_sqlite runs two seeds anyway
def test_agent_sqlite_repeats_its_trace() -> None:
    scenario = load_scenario("agent_sqlite", ["workload.params.agents=2"])
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["sqlite.commits"] > 0
    assert first.result.trace_hash == again.result.trace_hash


def test_kv_ranges_sqlite_repeats_its_trace() -> None:
    scenario = load_scenario("kv_ranges_sqlite")
    first, again = run_scenario(scenario, 1), run_scenario(scenario, 1)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["ranges.scans"] > 0 and first.metrics["ranges.transactions"] > 0
    assert first.result.trace_hash == again.result.trace_hash


def test_a_bad_storage_backend_is_a_one_line_error(tmp_path: Path) -> None:
    source = (ROOT / "scenarios" / "kv_sqlite.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(source.replace('backend = "sqlite"', 'backend = "disk"'))
    with pytest.raises(ScenarioError, match=r"topology\.storage\.backend"):
        load_scenario(bad)
    negative = tmp_path / "negative.toml"
    negative.write_text(source.replace('fsync = "50ms"', 'fsync = "-1s"'))
    with pytest.raises(ScenarioError, match=r"topology\.storage\.fsync"):
        load_scenario(negative)


def test_a_workload_that_cannot_run_on_sqlite_says_so(tmp_path: Path) -> None:
    source = (ROOT / "scenarios" / "agent_uploads.toml").read_text()
    assert "[topology]" in source
    bad = tmp_path / "uploads_sqlite.toml"
    bad.write_text(source.replace("[topology]", '[topology]\nstorage = { backend = "sqlite" }'))
    with pytest.raises(ScenarioError, match=r"topology\.storage\.backend.* runs only on 'sim'"):
        load_scenario(bad)


def test_a_sweep_recheck_imports_no_engine_before_it_sets_its_path() -> None:
    """A fresh-process recheck imports the sweep worker, then takes its parent's sys.path: the
    engine must not be imported by then, or a mutant's overlay loses (DsqlD-8)."""
    probe = (
        "import sys, kelpie_dst.scenario._sweep_worker; "
        "print(sorted(m for m in sys.modules if m.startswith('kelpie_agent')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_a_node_local_file_survives_the_node_s_own_crash_mid_commit() -> None:
    """No database host: the node runs the engine in its own tasks and threads; a crash in
    the middle of a commit kills them, and the next incarnation recovers the committed state."""

    async def body(sim: Simulation, out: dict[str, object]) -> None:
        seen: list[object] = []

        async def server(node: Node) -> None:
            kv = open_kv(node)
            if node.incarnation == 1:
                await kv.set(b"before", b"1")
                node.start_soon(kv.set, b"cut", b"2")  # killed inside its 50ms write
                await trio.sleep(0.02)
                sim.crash(node)
                sim.restart(node, after=0.1)
                await trio.sleep_forever()
            seen.extend([await kv.get(b"before"), await kv.get(b"cut")])
            assert isinstance(kv, SqliteFaultyKV)
            seen.append(kv.disk.generation)

        sim.add_node("server", server)
        await trio.sleep(1.0)
        out["seen"] = seen

    out, _ = _simulate(body)
    assert out["seen"] == [b"1", None, 2]
