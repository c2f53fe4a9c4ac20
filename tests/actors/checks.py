"""Checkers for the actor tests: pure functions over what a run recorded.

* :func:`check_fencing` walks the store's commit log. Every committed write of actor state
  must carry the token of the activation that owned the lease *at that commit*; and the writes
  of different activations of one actor must not interleave (each activation's effective
  interval, from its first to its last committed write, is disjoint from every other's).
* :func:`check_ledgers`: every acknowledged increment is in the final state, at the position
  the client was told, with no duplicates and nothing that no client asked for.
* :func:`check_spans_disjoint`: no two activations of one actor ran activate/handle/deactivate
  at overlapping times (holds only while the clock-skew assumption holds: no pauses, no jumps).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from kelpie_agent.actors._lease import OWNER, decode_owner, parse_actor_key

from .actors import Span, unpack

STATE_PREFIX = b"test/ledger/"


@attrs.frozen
class Effective:
    """One activation's committed writes: [first, last] in commit order and virtual time."""

    actor: str
    token: str
    epoch: int
    writes: int
    first: float
    last: float


@attrs.frozen
class FencingReport:
    effective: tuple[Effective, ...]
    stale_writes: tuple[str, ...]
    interleaved: tuple[str, ...]
    acquisitions: int

    @property
    def ok(self) -> bool:
        return not self.stale_writes and not self.interleaved


def check_fencing(
    log: Iterable[tuple[float, Sequence[tuple[bytes, bytes | None]]]],
) -> FencingReport:
    owner: dict[str, str | None] = {}
    order: dict[str, list[str]] = {}  # actor -> tokens in the order of their first write
    spans: dict[tuple[str, str], list[Any]] = {}
    stale: list[str] = []
    acquisitions = 0
    for time, writes in log:
        for key, value in writes:
            if key.startswith(OWNER) and value is not None:
                aid = parse_actor_key(OWNER, key)
                record = decode_owner(value)
                assert aid is not None and record is not None, key
                owner[str(aid)] = record.token
                acquisitions += record.token is not None
        for key, value in writes:
            if not key.startswith(STATE_PREFIX) or value is None:
                continue
            actor = "ledger/" + key[len(STATE_PREFIX) :].decode()
            state = unpack(value)
            token = state["token"]
            if owner.get(actor) != token:
                stale.append(
                    f"t={time:.3f} {actor}: write by epoch {state['epoch']} ({token}) while "
                    f"the lease belonged to {owner.get(actor)}"
                )
            entry = spans.setdefault((actor, token), [state["epoch"], 0, time, time])
            entry[1] += 1
            entry[3] = time
            tokens = order.setdefault(actor, [])
            if not tokens or tokens[-1] != token:
                tokens.append(token)
    interleaved = [
        f"{actor}: activations wrote in the order {tokens}"
        for actor, tokens in order.items()
        if len(tokens) != len(set(tokens))
    ]
    effective = tuple(
        Effective(actor, token, epoch, n, first, last)
        for (actor, token), (epoch, n, first, last) in spans.items()
    )
    return FencingReport(effective, tuple(stale), tuple(interleaved), acquisitions)


def check_ledgers(
    final: Mapping[str, Any], acked: Sequence[tuple[str, str, int]], issued: Sequence[str]
) -> list[str]:
    problems: list[str] = []
    for actor, state in final.items():
        applied = state["applied"] if state else []
        if len(applied) != len(set(applied)):
            problems.append(f"{actor}: duplicate requests in {applied}")
        if state and state["count"] != len(applied):
            problems.append(f"{actor}: count {state['count']} != {len(applied)} applied")
        unknown = set(applied) - set(issued)
        if unknown:
            problems.append(f"{actor}: applied requests nobody sent: {sorted(unknown)}")
    for actor, request, count in acked:
        state = final.get(actor)
        applied = state["applied"] if state else []
        if request not in applied:
            problems.append(f"{actor}: acknowledged {request} (count {count}) was lost")
        elif applied.index(request) + 1 != count:
            problems.append(
                f"{actor}: {request} acknowledged as #{count} but is #{applied.index(request) + 1}"
            )
    return problems


def activation_intervals(spans: Sequence[Span]) -> dict[str, list[tuple[float, float, Span]]]:
    """Per actor, each activation's [first call start, last call end], sorted by start."""
    bounds: dict[tuple[str, str], tuple[float, float, Span]] = {}
    for span in spans:
        key = (span.actor, span.token)
        start, end, first = bounds.get(key, (span.start, span.end, span))
        bounds[key] = (min(start, span.start), max(end, span.end), first)
    result: dict[str, list[tuple[float, float, Span]]] = {}
    for (actor, _), interval in bounds.items():
        result.setdefault(actor, []).append(interval)
    for intervals in result.values():
        intervals.sort(key=lambda i: (i[0], i[1]))
    return result


def check_spans_disjoint(spans: Sequence[Span]) -> list[str]:
    """Activations of one actor never overlap in virtual time (touching is allowed)."""
    problems: list[str] = []
    for actor, intervals in activation_intervals(spans).items():
        for (s1, e1, a), (s2, e2, b) in itertools.pairwise(intervals):
            if s2 < e1:
                problems.append(
                    f"{actor}: epoch {a.epoch} on {a.node} ran [{s1:.3f}, {e1:.3f}] and "
                    f"epoch {b.epoch} on {b.node} ran [{s2:.3f}, {e2:.3f}]"
                )
    return problems
