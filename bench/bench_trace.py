"""Trace files and the HTML timeline on a large trace: write, load, render.

Runs the replication example long enough for about 100,000 events, then prints the cost of
writing the trace (plain and gzip) during the run, loading it back, and rendering the HTML
timeline, with the sizes of each file::

    python bench/bench_trace.py [--entries 5000]
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
import time

import kelpie_dst
from kelpie_dst._trace import Event, Trace, load_trace, open_trace_file
from kelpie_dst._trace_html import render_html
from kelpie_dst.examples import replication

FAULTS = ["process.crash=0.02", "network.partition=0.05", "network.delay=0.05"]


def timed(label: str, fn: functools.partial[object]) -> object:
    start = time.perf_counter()
    value = fn()
    print(f"{label:<34}{time.perf_counter() - start:8.3f} s")
    return value


def save(events: list[Event], path: str) -> str:
    """Encode, hash and write ``events`` as a run does, without the simulation around it."""
    with open_trace_file(path) as sink:
        trace = Trace(file=sink)
        for event in events:
            trace.emit(event.time_ns / 1e9, event.node, event.kind, event.fields)
    return trace.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=5000)
    args = parser.parse_args()
    workload = functools.partial(replication.main, entries=args.entries)
    with tempfile.TemporaryDirectory() as tmp:
        plain, packed = os.path.join(tmp, "run.trace"), os.path.join(tmp, "run.trace.gz")
        run = functools.partial(kelpie_dst.run, workload, seed=1, faults=FAULTS)
        result = timed("run, no trace file", run)
        assert isinstance(result, kelpie_dst.RunResult)
        print(f"  {result.summary_line()}")
        timed("run, trace file", functools.partial(run, trace_file=plain))
        timed("run, gzip trace file", functools.partial(run, trace_file=packed))
        loaded = timed("load plain", functools.partial(load_trace, plain))
        timed("load gzip", functools.partial(load_trace, packed))
        assert loaded.trace_hash == result.trace_hash  # type: ignore[attr-defined]
        events = loaded.events  # type: ignore[attr-defined]
        again = os.path.join(tmp, "again.trace")
        assert timed("save plain (no simulation)", functools.partial(save, events, again)) == (
            result.trace_hash
        )
        timed("save gzip (no simulation)", functools.partial(save, events, again + ".gz"))
        page = timed("render html", functools.partial(render_html, events, title="bench"))
        assert isinstance(page, str)
        print(f"events                            {len(events):8,d}")
        print(f"trace file                        {os.path.getsize(plain) / 1024:8,.0f} KiB")
        print(f"gzip trace file                   {os.path.getsize(packed) / 1024:8,.0f} KiB")
        print(f"html page                         {len(page.encode()) / 1024:8,.0f} KiB")
        with open(os.path.join("/tmp", "kelpie-bench-trace.html"), "w") as f:
            f.write(page)
        print("page written to /tmp/kelpie-bench-trace.html")


if __name__ == "__main__":
    main()
