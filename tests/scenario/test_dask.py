"""The Dask executor on a ``LocalCluster`` of two worker processes: a sweep with ``--cluster``
gives the local sweep's results, failures carry their replay lines, and a worker killed in
the middle of a sweep loses no seed and counts none twice (Dask runs its seed again on the
other worker).

Dask's nanny starts its workers under ``PYTHONHASHSEED=6640`` whatever it is told, so these
sweeps (remote and local alike) run under 6640: the hash seed must match, not be 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..cli.helpers import QUALITY, ROOT, subprocess_cli

distributed = pytest.importorskip("distributed")

BUSY = "tests.cli.programs:busy"


DASK_HASHSEED = {"PYTHONHASHSEED": "6640"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as local:
        yield local


def _report(tmp_path: Path, name: str, *args: str) -> tuple[int, str, dict[str, Any]]:
    path = tmp_path / f"{name}.json"
    out = subprocess_cli("sweep", *args, "--json", str(path), env=DASK_HASHSEED, timeout=600)
    assert path.exists(), out
    return out.code, out.out + out.err, json.loads(path.read_text())


def _hashes(data: dict[str, Any]) -> dict[tuple[str, int], tuple[str, int]]:
    return {(r["scenario"], r["seed"]): (r["trace_hash"], r["exit_code"]) for r in data["results"]}


def test_a_cluster_sweep_equals_the_local_sweep(cluster: Any, tmp_path: Path) -> None:
    args = ("kv_linearizability", str(QUALITY / "lost_update.toml"), "--seeds", "6")
    code, out, remote = _report(tmp_path, "remote", *args, "--cluster", cluster.scheduler_address)
    local_code, _, local = _report(tmp_path, "local", *args)
    assert code == local_code == 1, out
    assert "Dask cluster tcp://" in out and remote["executor"].startswith("Dask cluster")
    assert _hashes(remote) == _hashes(local) and len(remote["results"]) == 12
    failed = [r for r in remote["results"] if not r["ok"]]
    assert failed and all(f"replay: {r['replay']}" in out for r in failed)
    assert [r["replay"] for r in failed] == [r["replay"] for r in local["results"] if not r["ok"]]


def test_a_worker_killed_mid_sweep_loses_no_seed(cluster: Any, tmp_path: Path) -> None:
    seeds = 12
    report = tmp_path / "killed.json"
    command = ["sweep", "--entry", BUSY, "--seeds", str(seeds), "--json", str(report)]
    sweep = subprocess.Popen(
        [sys.executable, "-m", "kelpie_dst", *command, "--cluster", cluster.scheduler_address],
        cwd=ROOT,
        env=dict(os.environ, **DASK_HASHSEED),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:
        pids = client.run(os.getpid)
        victim = None
        deadline = time.monotonic() + 120
        while victim is None and time.monotonic() < deadline:
            busy = [w for w, keys in client.processing().items() if keys]
            if busy:
                victim = busy[0]
            else:
                time.sleep(0.05)
        assert victim is not None, "no task ever ran"
        os.kill(pids[victim], signal.SIGKILL)
    out, _ = sweep.communicate(timeout=600)
    assert sweep.returncode == 0, out
    remote = json.loads(report.read_text())
    assert [r["seed"] for r in remote["results"]] == list(range(seeds))  # each once, in order
    _, _, local = _report(tmp_path, "local", "--entry", BUSY, "--seeds", str(seeds))
    assert _hashes(remote) == _hashes(local)


def test_workers_under_another_hash_seed_are_refused(cluster: Any) -> None:
    out = subprocess_cli(
        "sweep",
        "bank",
        "--seeds",
        "1",
        "--cluster",
        cluster.scheduler_address,
        env={"PYTHONHASHSEED": "0"},
    )
    assert out.code == 64, out
    assert "does not run under PYTHONHASHSEED=0 as this sweep does" in out.err
    assert len(out.err.strip().splitlines()) == 1


@pytest.mark.slow
def test_two_hundred_seeds_on_the_cluster_equal_the_local_sweep(
    cluster: Any, tmp_path: Path
) -> None:
    args = ("kv_linearizability", "bank", "--seeds", "100")
    code, out, remote = _report(tmp_path, "remote", *args, "--cluster", cluster.scheduler_address)
    local_code, _, local = _report(tmp_path, "local", *args)
    assert code == local_code == 0, out
    assert len(remote["results"]) == 200 and _hashes(remote) == _hashes(local)
