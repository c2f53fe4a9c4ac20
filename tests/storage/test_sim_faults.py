"""SimKV under the storage faults, its topologies, durability across crashes, and
linearizability of recorded histories (issue #3's acceptance)."""

import pytest
import trio

import kelpie_dst
from kelpie_agent.storage import ChecksumError, ConflictError, StorageError, StorageUnavailableError
from kelpie_dst.checkers import UNKNOWN, HistoryRecorder, check_linearizability
from kelpie_dst.shims import open_kv


def run_on_node(body, *, seed=1, faults=(), settle=5.0):  # type: ignore[no-untyped-def]
    """Run ``body(kv, node)`` on a node called "db-client"; return the outcome list."""
    out: list[object] = []

    async def node_main(node: kelpie_dst.Node) -> None:
        out.append(await body(open_kv(node), node))

    async def main(sim: kelpie_dst.Simulation) -> list[object]:
        sim.add_node("db-client", node_main)
        await trio.sleep(settle)
        return out

    return kelpie_dst.run(main, seed=seed, faults=list(faults))


def test_write_and_read_failures_change_nothing() -> None:
    async def body(kv, node):  # type: ignore[no-untyped-def]
        errors = []
        for i in range(50):
            try:
                await kv.set(b"k%d" % i, b"v")
            except StorageError as error:
                errors.append(str(error))
        failed_reads = 0
        for i in range(50):
            try:
                await kv.get(b"k%d" % i)
            except StorageError:
                failed_reads += 1
        return len(errors), len(kv.store), failed_reads

    result = run_on_node(body, faults=["storage.write_fail=0.3", "storage.read_fail=0.3"])
    [(failed_writes, stored, failed_reads)] = result.value  # type: ignore[misc]
    assert 0 < failed_writes < 50 and stored == 50 - failed_writes
    assert 0 < failed_reads < 50


def test_latency_takes_virtual_time() -> None:
    async def body(kv, node):  # type: ignore[no-untyped-def]
        start = trio.current_time()
        for _ in range(10):
            await kv.set(b"k", b"v")
        return trio.current_time() - start

    fast = run_on_node(body).value[0]  # type: ignore[index]
    slow = run_on_node(body, faults=["storage.latency=1"]).value[0]  # type: ignore[index]
    assert fast == 0
    assert 10 * 0.01 <= slow <= 10 * 0.5


def test_corruption_surfaces_as_checksum_error_until_rewritten() -> None:
    async def body(kv, node):  # type: ignore[no-untyped-def]
        await kv.set(b"k", b"value")
        try:
            await kv.get(b"k")
        except ChecksumError:
            return "detected"
        return "clean"

    assert run_on_node(body, faults=["storage.corruption=1"]).value == ["detected"]
    assert run_on_node(body).value == ["clean"]


def test_conflict_and_unavailable_faults() -> None:
    async def body(kv, node):  # type: ignore[no-untyped-def]
        outcomes = []
        for i in range(40):
            try:
                async with kv.transaction() as tx:
                    await tx.set(b"k%d" % i, b"v")
                outcomes.append("ok")
            except ConflictError as error:
                assert error.retryable
                outcomes.append("conflict")
            except StorageUnavailableError:
                outcomes.append("unavailable")
        return sorted(set(outcomes)), len(kv.store), outcomes.count("ok")

    result = run_on_node(body, faults=["storage.conflict=0.3", "storage.unavailable=0.2"])
    [(kinds, stored, ok)] = result.value  # type: ignore[misc]
    assert kinds == ["conflict", "ok", "unavailable"]
    assert stored == ok  # injected failures apply nothing


def test_crash_before_write_loses_it_and_crash_after_write_keeps_it() -> None:
    for fault, expected in (("storage.crash_before_write", 0), ("storage.crash_after_write", 1)):
        acked: list[bool] = []
        stored: list[int] = []

        async def body(kv, node, acked=acked, stored=stored):  # type: ignore[no-untyped-def]
            if node.incarnation > 1:
                stored.append(len(kv.store))  # after the restart: what reached the disk?
                return None
            await kv.set(b"k", b"v")
            acked.append(True)

        result = run_on_node(body, faults=[f"{fault}=1"])
        assert result.ok, result.failure
        assert acked == []  # the caller never learned of the write
        assert stored == [expected]
        assert result.faults_fired[fault] == 1


def test_shared_database_host_unavailable_when_partitioned_or_down() -> None:
    async def main(sim: kelpie_dst.Simulation) -> list[str]:
        db = sim.add_node("db")
        log: list[str] = []

        async def server(node: kelpie_dst.Node) -> None:
            kv = open_kv(node, host=db)
            await kv.set(node.name.encode(), b"hello")
            log.append(f"{node.name} wrote")
            await trio.sleep(10)
            try:
                await kv.get(b"a")
                log.append(f"{node.name} read")
            except StorageUnavailableError:
                log.append(f"{node.name} unavailable")

        sim.add_node("a", server)
        sim.add_node("b", server)
        await trio.sleep(5)
        sim.network.partition(["a"], ["db"])
        await trio.sleep(10)
        sim.network.heal()
        stored = open_kv(db).store.keys()
        return sorted(log) + sorted(k.decode() for k in stored)

    result = kelpie_dst.run(main, seed=3)
    assert result.value == ["a unavailable", "a wrote", "b read", "b wrote", "a", "b"]


# -- durability: acknowledged writes survive crashes; unacknowledged ones are all or nothing --

DURABILITY_FAULTS = [
    "storage.crash_before_write=0.05",
    "storage.crash_after_write=0.05",
    "storage.write_fail=0.05",
    "storage.latency=0.2",
    "process.crash=0.2",
]


async def durability_workload(sim: kelpie_dst.Simulation) -> tuple[int, int]:
    acknowledged: list[str] = []

    async def writer(node: kelpie_dst.Node) -> None:
        kv = open_kv(node)
        for j in range(8):
            txn = f"{node.incarnation}-{j}"
            try:
                async with kv.transaction() as tx:
                    for part in (b"a", b"b", b"c"):
                        await tx.set(f"{txn}/".encode() + part, txn.encode())
            except StorageError:
                continue
            acknowledged.append(txn)
            await trio.sleep(0.3)

    node = sim.add_node("writer", writer)
    await trio.sleep(30)
    sim.heal()
    await trio.sleep(10)  # let a last restart happen
    store = open_kv(node).store
    keys = store.keys()
    stored = {key.decode() for key in keys}
    for txn in acknowledged:
        assert {f"{txn}/a", f"{txn}/b", f"{txn}/c"} <= stored, f"acknowledged {txn} was lost"
    for txn in {key.split("/")[0] for key in stored}:
        parts = {key for key in stored if key.startswith(txn + "/")}
        assert len(parts) == 3, f"transaction {txn} is partial: {sorted(parts)}"
    return len(acknowledged), len(stored) // 3


@pytest.mark.parametrize("block", range(5))
def test_acknowledged_writes_survive_crashes_over_500_seeds(block: int) -> None:
    crashes = 0
    unacknowledged_but_durable = 0
    for seed in range(block * 100, block * 100 + 100):
        result = kelpie_dst.run(durability_workload, seed=seed, faults=DURABILITY_FAULTS)
        assert result.ok, (seed, result.failure)
        acked, durable = result.value  # type: ignore[misc]
        unacknowledged_but_durable += durable - acked
        crashes += sum(result.faults_fired.get(f.split("=")[0], 0) for f in DURABILITY_FAULTS[:2])
    assert crashes > 0
    assert unacknowledged_but_durable > 0  # crash-after-write really left durable, unacked writes


# -- linearizability of SimKV histories under concurrency and faults -----------------------

LINEARIZABILITY_FAULTS = [
    "storage.latency=0.5",
    "storage.conflict=0.1",
    "storage.unavailable=0.05",
    "storage.write_fail=0.05",
]


async def register_workload(sim: kelpie_dst.Simulation, stale_cache: bool = False) -> object:
    """Four clients read, write and compare-and-set three registers through transactions."""
    recorder = HistoryRecorder()
    db = sim.add_node("db")
    cache: dict[str, bytes | None] = {}

    async def client(number: int) -> None:
        kv = open_kv(sim.node("main"), host=db)
        rng = sim.rng(f"client/{number}")
        for i in range(12):
            key = rng.choice(["x", "y", "z"])
            op = rng.choice(["read", "write", "cas"])
            value = f"{number}.{i}"
            now = trio.current_time
            if op == "read":
                handle = recorder.invoke(number, "read", key, time=now())
                if stale_cache and key in cache:
                    got = cache[key]  # the planted bug: serve a possibly stale cached value
                else:
                    try:
                        got = await kv.get(key.encode())
                    except StorageError:
                        recorder.fail(handle)
                        continue
                    cache[key] = got
                recorder.ok(handle, None if got is None else got.decode(), time=now())
            else:
                expected = rng.choice([None, *[f"{n}.{i - 1}" for n in range(4)]])
                kind = "write" if op == "write" else "cas"
                handle = recorder.invoke(
                    number, kind, key, value=value, expected=expected, time=now()
                )
                try:
                    async with kv.transaction() as tx:
                        if kind == "cas":
                            current = await tx.get(key.encode())
                            current_s = None if current is None else current.decode()
                            if current_s != expected:
                                swapped = False
                            else:
                                await tx.set(key.encode(), value.encode())
                                swapped = True
                        else:
                            await tx.set(key.encode(), value.encode())
                except (ConflictError, StorageError) as error:
                    if isinstance(error, StorageUnavailableError):
                        recorder.info(handle)  # may or may not have been applied
                    else:
                        recorder.fail(handle)
                    continue
                recorder.ok(handle, swapped if kind == "cas" else None, time=now())
            await trio.sleep(0.01 * rng.random())

    async with trio.open_nursery() as nursery:
        for number in range(4):
            nursery.start_soon(client, number)
    result = check_linearizability(recorder.history())
    assert result.ok is not False, result.describe()
    return len(recorder.history()), sum(op.output is UNKNOWN for op in recorder.history())


def test_simkv_histories_are_linearizable_under_faults() -> None:
    ops = unknown = 0
    for seed in range(60):
        result = kelpie_dst.run(register_workload, seed=seed, faults=LINEARIZABILITY_FAULTS)
        assert result.ok, (seed, result.failure and result.failure.describe())
        n, u = result.value  # type: ignore[misc]
        ops += n
        unknown += u
    assert ops > 60 * 30 and unknown > 0


def test_the_checker_catches_a_stale_cache() -> None:
    async def buggy(sim: kelpie_dst.Simulation) -> object:
        return await register_workload(sim, stale_cache=True)

    failures = [
        seed
        for seed in range(30)
        if not kelpie_dst.run(buggy, seed=seed, faults=LINEARIZABILITY_FAULTS).ok
    ]
    assert failures, "a stale cache should produce a non-linearizable history"
    result = kelpie_dst.run(buggy, seed=failures[0], faults=LINEARIZABILITY_FAULTS)
    assert result.failure is not None
    assert "not linearizable" in result.failure.message.lower() or "linearizab" in (
        result.failure.details.lower()
    )


def test_commit_unknown_lag_makes_reading_back_the_commit_fail_for_a_while() -> None:
    """``storage.commit_unknown`` with ``lag``: the commit applied, a get of what it wrote
    fails until ``lag`` seconds have passed; other keys (and scans) read normally."""
    from kelpie_dst import Fault

    async def body(kv, node):  # type: ignore[no-untyped-def]
        await kv.set(b"other", b"o")
        try:
            async with kv.transaction() as txn:
                await txn.set(b"k", b"v")
        except StorageUnavailableError:
            pass
        else:
            return "the commit answered"
        outcomes = []
        for _ in range(3):
            for key in (b"k", b"other"):
                try:
                    outcomes.append((key, await kv.get(key)))
                except StorageUnavailableError:
                    outcomes.append((key, "lagging"))
            outcomes.append(("scan", len(await kv.scan(b"", None))))
            await trio.sleep(1.5)
        return outcomes

    lag = Fault("storage.commit_unknown", 1.0, params=(("lag", 2.0),))
    [outcomes] = run_on_node(body, faults=[lag]).value  # type: ignore[misc]
    assert outcomes == [
        (b"k", "lagging"), (b"other", b"o"), ("scan", 2),
        (b"k", "lagging"), (b"other", b"o"), ("scan", 2),
        (b"k", b"v"), (b"other", b"o"), ("scan", 2),
    ]  # fmt: skip
    [without] = run_on_node(body, faults=["storage.commit_unknown=1"]).value  # type: ignore[misc]
    assert without[0] == (b"k", b"v")
