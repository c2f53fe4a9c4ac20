"""``kelpie-dst trace show|diff|html``: read, compare and draw saved traces.

A trace file is what ``kelpie-dst run --trace FILE`` or ``kelpie_dst.run(trace_file=PATH)``
writes (gzip-compressed when the name ends in ``.gz``). The group is registered on the main CLI
with ``cli.add_command(trace)``; usage errors raise :class:`UsageError`, which the CLI turns into
one line and exit 64.
"""

from __future__ import annotations

import collections
import os
import sys
from collections.abc import Iterable, Sequence

import click

from ._entry import parse_duration
from ._errors import UsageError
from ._trace import Event, TraceFile, first_divergence, load_trace
from ._trace_html import render_html, subject_nodes

__all__ = ["kind_matches", "trace"]

_FILE = click.Path(dir_okay=False, path_type=str)


def kind_matches(kind: str, patterns: Sequence[str]) -> bool:
    """``node`` matches ``node`` and ``node.crash``; ``node.`` matches ``node.*`` only."""
    for pattern in patterns:
        if kind == pattern or kind.startswith(pattern if pattern.endswith(".") else pattern + "."):
            return True
    return False


def _seconds(option: str, text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return round(parse_duration(text) * 1e9)
    except UsageError as error:
        raise UsageError(f"{option}: {error}") from None


def _head(name: str, loaded: TraceFile) -> str:
    seed = loaded.seed if loaded.seed is not None else "?"
    outcome = loaded.outcome or "unfinished"
    text = f"{name}: {len(loaded.events)} events, trace_hash={loaded.trace_hash}, seed={seed}"
    text += f", outcome={outcome}"
    return text + (" (truncated file)" if loaded.truncated else "")


@click.group("trace")
def trace() -> None:
    """Show, compare or draw a trace file (written by run --trace FILE)."""


@trace.command("show")
@click.argument("file", type=_FILE)
@click.option("--node", "nodes", multiple=True, metavar="NAME", help="Events on or about NAME.")
@click.option("--kind", "kinds", multiple=True, metavar="KIND", help="A kind or kind prefix.")
@click.option("--from", "start", metavar="TIME", help="From this virtual time (e.g. 2.5s, 1m).")
@click.option("--to", "end", metavar="TIME", help="Up to this virtual time (inclusive).")
@click.option("--limit", type=click.IntRange(min=0), default=None, help="Show at most N events.")
def show_command(
    file: str,
    nodes: tuple[str, ...],
    kinds: tuple[str, ...],
    start: str | None,
    end: str | None,
    limit: int | None,
) -> None:
    """List the events of FILE, one per line, optionally filtered."""
    loaded = load_trace(file)
    low, high = _seconds("--from", start), _seconds("--to", end)
    shown = 0
    out = sys.stdout
    for event in loaded.events:
        if low is not None and event.time_ns < low:
            continue
        if high is not None and event.time_ns > high:
            break
        if kinds and not kind_matches(event.kind, kinds):
            continue
        if nodes and not any(n in nodes for n in subject_nodes(event)):
            continue
        if limit is not None and shown >= limit:
            break
        out.write(event.describe() + "\n")
        shown += 1
    out.flush()
    click.echo(f"-- {shown} of {len(loaded.events)} events shown; {_head(file, loaded)}", err=True)


@trace.command("diff")
@click.argument("left", type=_FILE)
@click.argument("right", type=_FILE)
@click.option("--context", type=click.IntRange(min=0), default=5, show_default=True)
def diff_command(left: str, right: str, context: int) -> None:
    """Compare two traces: the first divergent event, with context. Exit 1 if they differ."""
    a, b = load_trace(left), load_trace(right)
    for line in diff_report(a, b, context=context):
        click.echo(line)
    if a.trace_hash != b.trace_hash:
        sys.exit(1)


def diff_report(a: TraceFile, b: TraceFile, *, context: int = 5) -> list[str]:
    """The lines ``trace diff`` prints for traces ``a`` and ``b``."""
    if a.trace_hash == b.trace_hash:
        return [f"identical: {len(a.events)} events, trace_hash={a.trace_hash}"]
    divergence = first_divergence(a.events, b.events, context=context)
    assert divergence is not None  # different hashes, so different events
    at = divergence.left or divergence.right
    assert at is not None
    lines = [f"traces differ at event #{divergence.index} (t={at.time:.9f}s)"]
    if divergence.before:
        lines.append(f"  last {len(divergence.before)} equal events:")
        lines += [f"      {event.describe()}" for event in divergence.before]
    for name, event in (("A", divergence.left), ("B", divergence.right)):
        lines.append(f"  {name}:  {event.describe() if event else '<trace ended>'}")
    changed = divergence.changed_fields()
    if changed:
        lines.append("  fields that differ: " + "; ".join(changed))
    index = divergence.index
    for name, events in (("A", a.events), ("B", b.events)):
        after = events[index + 1 : index + 1 + min(context, 3)]
        if after:
            lines.append(f"  then in {name}:")
            lines += [f"      {event.describe()}" for event in after]
    lines.append("summary:")
    lines.append("  " + _head(f"A {a.path}", a))
    lines.append("  " + _head(f"B {b.path}", b))
    share = 100.0 * index / max(len(a.events), 1)
    lines.append(f"  equal prefix: {index} events ({share:.1f}% of A)")
    counts = _count_differences(a.events, b.events)
    if counts:
        lines.append("  kinds whose counts differ: " + ", ".join(counts))
    return lines


def _count_differences(left: Iterable[Event], right: Iterable[Event]) -> list[str]:
    ca = collections.Counter(e.kind for e in left)
    cb = collections.Counter(e.kind for e in right)
    return [f"{k} {ca[k]} != {cb[k]}" for k in sorted(set(ca) | set(cb)) if ca[k] != cb[k]]


@trace.command("html")
@click.argument("file", type=_FILE)
@click.option("-o", "--output", type=_FILE, default=None, help="Default: FILE with .html.")
@click.option("--title", default=None, help="The page title (default: the file name).")
def html_command(file: str, output: str | None, title: str | None) -> None:
    """Write a self-contained HTML timeline of FILE: lanes per node, messages, faults."""
    loaded = load_trace(file)
    if output is None:
        base = file[:-3] if file.endswith(".gz") else file
        output = os.path.splitext(base)[0] + ".html"
    page = render_html(
        loaded.events, title=title or os.path.basename(file), trace_hash=loaded.trace_hash
    )
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as error:
        raise UsageError(f"cannot write {output!r}: {error.strerror or error}") from None
    size = len(page.encode()) / 1024
    click.echo(f"wrote {output}: {len(loaded.events)} events, {size:,.0f} KiB")
