"""A serializability checker for read-modify-write histories (Adya's direct serialization
graph, as Elle builds it), kept apart from the workload that records the history.

Every transaction of ``kv_write_skew`` reads each key it writes, and every value it writes names
the transaction that wrote it (``T<id>:<number>``), so the history says which transaction each
read observed and, per key, which version each write replaced. From that:

- a transaction whose outcome is unknown (the store was unreachable at commit, its node crashed)
  committed exactly when some read observed one of its writes (a write that was overwritten was
  read by its overwriter, one that was not is in the final state);
- per key, the committed writers form a chain from the initial version: two committed writers
  that replaced the same version are a lost update;
- a read of a version written by a transaction that failed is an aborted read;
- the committed transactions with their write-read, write-write and read-write (anti-)
  dependencies must form an acyclic graph: a cycle is a history no serial order explains
  (write skew is the two-transaction cycle of two anti-dependencies).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

__all__ = ["INITIAL", "Txn", "check_serializable", "parse_value"]

INITIAL = "init"
"""The writer of every key's first version (a key not yet written)."""


@attrs.define
class Txn:
    """One transaction as its client saw it: the writer of each version it read, what it wrote,
    and its outcome (``ok``, ``fail``: certainly not applied, or ``unknown``)."""

    id: str
    kind: str
    reads: dict[str, str] = attrs.field(factory=dict)  # key -> writer of the version read
    writes: dict[str, int] = attrs.field(factory=dict)  # key -> the number written
    status: str = "unknown"


def parse_value(raw: bytes | None, initial: int) -> tuple[str, int]:
    """``(writer, number)`` of a stored value; a missing key is the initial version."""
    if raw is None:
        return INITIAL, initial
    writer, _, number = raw.decode().rpartition(":")
    return writer, int(number)


def check_serializable(txns: Iterable[Txn], final: Mapping[str, str]) -> list[str]:
    """Problems with the history: lost updates, aborted reads, dependency cycles.

    ``final`` maps each key to the writer of its final version (read after the run)."""
    txns = list(txns)
    by_id = {t.id: t for t in txns}
    observed = {w for t in txns for w in t.reads.values()} | set(final.values())
    problems: list[str] = []
    for t in txns:
        for key, writer in sorted(t.reads.items()):
            if writer != INITIAL and writer not in by_id:
                problems.append(f"{t.id} read {key} from {writer}, which no client wrote")
            elif writer != INITIAL and by_id[writer].status == "fail":
                problems.append(f"{t.id} read {key} from {writer}, which failed (aborted read)")
            elif writer != INITIAL and key not in by_id[writer].writes:
                problems.append(f"{t.id} read {key} from {writer}, which did not write it")
    committed = [
        t for t in txns if t.status == "ok" or (t.status == "unknown" and t.id in observed)
    ]
    edges: dict[str, set[str]] = {t.id: set() for t in committed}
    edges[INITIAL] = set()
    nxt: dict[tuple[str, str], str] = {}  # (key, version's writer) -> committed overwriter
    for t in committed:
        for key in sorted(t.writes):
            prev = t.reads[key]
            other = nxt.setdefault((key, prev), t.id)
            if other != t.id:
                problems.append(
                    f"lost update: {other} and {t.id} both replaced {prev}'s version of {key}"
                )
            edges.setdefault(prev, set()).add(t.id)  # ww
    for key, writer in sorted(final.items()):
        if (key, writer) in nxt:
            problems.append(
                f"{key}'s final version is {writer}'s, which {nxt[key, writer]} replaced"
            )
    for t in committed:
        for key, writer in t.reads.items():
            if writer != t.id:
                edges.setdefault(writer, set()).add(t.id)  # wr
            overwriter = nxt.get((key, writer))
            if overwriter is not None and overwriter != t.id:
                edges[t.id].add(overwriter)  # rw (anti-dependency)
    cycle = _cycle(edges)
    if cycle:
        detail = {t: by_id[t] for t in cycle if t in by_id}
        shown = "; ".join(
            f"{t.id} {t.kind} read {dict(sorted(t.reads.items()))} wrote {sorted(t.writes)}"
            for t in detail.values()
        )
        problems.append(
            f"no serial order explains the history: cycle {' -> '.join([*cycle, cycle[0]])} "
            f"({shown})"
        )
    return problems


def _cycle(edges: Mapping[str, set[str]]) -> list[str]:
    """A cycle of the graph (the first found, in a deterministic order), or []."""
    colour: dict[str, int] = {}
    for root in sorted(edges):
        if colour.get(root):
            continue
        stack: list[tuple[str, list[str]]] = [(root, sorted(edges.get(root, ())))]
        path = [root]
        colour[root] = 1
        while stack:
            node, todo = stack[-1]
            if not todo:
                stack.pop()
                path.pop()
                colour[node] = 2
                continue
            child = todo.pop(0)
            state = colour.get(child, 0)
            if state == 1:
                return path[path.index(child) :]
            if state == 0:
                colour[child] = 1
                path.append(child)
                stack.append((child, sorted(edges.get(child, ()))))
    return []
