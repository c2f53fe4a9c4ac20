"""The self-contained HTML timeline of a trace (``kelpie-dst trace html``).

Python does the analysis and the page only draws: :func:`build_model` turns the events into a
compact, columnar JSON document (lanes, kinds, delta-encoded times, a table of distinct field
maps, node state spans, partitions, and links between lanes), which :func:`render_html` embeds
in one page with inline CSS and JavaScript (no network access). The page draws on a canvas and
only visits the events in view, aggregating them per pixel when they are dense, so traces of
100,000 events stay fluid. :func:`read_model` and :func:`decode_events` read the document back;
the tests use them to check that the embedded events round-trip exactly.

Links drawn between lanes: ``net.connect`` (the handshake, from ``t - rtt`` to ``t``),
``net.reset``, ``net.clog`` (for its duration), and any pair of events ``X.send`` / ``X.recv``
with the same ``msg`` field (each receive is linked to the latest matching send).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._trace import Event
from ._trace_page import CSS, JS, SKELETON

__all__ = ["build_model", "decode_events", "read_model", "render_html", "subject_nodes"]

FORMAT = "kelpie-trace-html/1"
_SUBJECT_FIELDS = ("node", "target", "host", "src", "dst")
_PLACEHOLDER = re.compile(r"\{\{(TITLE|CSS|DATA|JS)\}\}")
_DATA = re.compile(
    r'<script type="application/json" id="kelpie-trace-data">(.*?)</script>', re.DOTALL
)


def subject_nodes(event: Event) -> list[str]:
    """The node that emitted ``event`` and the nodes its fields name (node, target, ...)."""
    names = [event.node]
    for key in _SUBJECT_FIELDS:
        value = event.fields.get(key)
        if isinstance(value, str) and value not in names:
            names.append(value)
    return names


def _lane_name(event: Event, known: Mapping[str, int]) -> str:
    """The lane an event is drawn in: lifecycle events in the node they are about, faults in
    their target's, events emitted by the simulator (node ``-``) in the node they name."""
    fields = event.fields
    if event.kind.startswith("node.") and fields.get("node") in known:
        return str(fields["node"])
    if event.kind == "fault" and fields.get("target") in known:
        return str(fields["target"])
    if event.node == "-":
        for key in ("node", "host", "target"):
            if fields.get(key) in known:
                return str(fields[key])
    return event.node


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"__bytes__": value.hex()}
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__bytes__"}:
            return bytes.fromhex(value["__bytes__"])
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


class _Index:
    """Interns values, giving each distinct one a small integer."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.values: list[Any] = []

    def __call__(self, key: Any, value: Any = None) -> int:
        found = self.ids.get(key)
        if found is None:
            found = self.ids[key] = len(self.values)
            self.values.append(key if value is None else value)
        return found


def build_model(
    events: Sequence[Event], *, title: str = "", trace_hash: str = ""
) -> dict[str, Any]:
    """The page's JSON document for ``events`` (see the module docstring)."""
    nodes, kinds, fields_ix = _Index(), _Index(), _Index()
    nodes("-")
    for event in events:  # lanes in order of first appearance: "-" first, then "main", ...
        if event.kind == "node.start" and isinstance(event.fields.get("node"), str):
            nodes(event.fields["node"])
        elif event.node != "-":
            nodes(event.node)
    times: list[int] = []
    node_col: list[int] = []
    lane_col: list[int] = []
    kind_col: list[int] = []
    field_col: list[int] = []
    previous = 0
    for event in events:
        times.append(event.time_ns - previous)
        previous = event.time_ns
        node_col.append(nodes(event.node))
        lane_col.append(nodes(_lane_name(event, nodes.ids)))
        kind_col.append(kinds(event.kind))
        data = _jsonable(event.fields)
        field_col.append(fields_ix(json.dumps(data, sort_keys=True), data))
    end = events[-1].time_ns if events else 0
    outcome = None
    if events and events[-1].kind == "run.end":
        outcome = events[-1].fields.get("outcome")
    return {
        "format": FORMAT,
        "title": title,
        "hash": trace_hash,
        "count": len(events),
        "end": end,
        "outcome": outcome,
        "seed": events[0].fields.get("seed") if events and events[0].kind == "run.start" else None,
        "nodes": nodes.values,
        "kinds": kinds.values,
        "t": times,
        "n": node_col,
        "l": lane_col,
        "k": kind_col,
        "f": field_col,
        "fields": fields_ix.values,
        "spans": _spans(events, nodes.ids, end),
        "partitions": _partitions(events, nodes.ids, end),
        "links": _links(events, nodes.ids, lane_col),
    }


def _spans(events: Iterable[Event], lanes: Mapping[str, int], end: int) -> list[list[Any]]:
    """``[lane, start_ns, end_ns, state]`` for each node's up/down/paused/stopped periods."""
    spans: list[list[Any]] = []
    open_: dict[int, list[Any]] = {}
    states = {
        "node.start": "up",
        "node.crash": "down",
        "node.pause": "paused",
        "node.resume": "up",
        "node.stop": "stopped",
    }
    for event in events:
        state = states.get(event.kind)
        name = event.fields.get("node")
        if state is None or name not in lanes:
            continue
        lane = lanes[str(name)]
        current = open_.get(lane)
        if current is not None:
            current[2] = event.time_ns
            spans.append(current)
        open_[lane] = [lane, event.time_ns, end, state]
    spans += [open_[lane] for lane in sorted(open_)]
    return sorted(spans, key=lambda s: (s[1], s[0]))


def _partitions(events: Iterable[Event], lanes: Mapping[str, int], end: int) -> list[list[Any]]:
    """``[start_ns, end_ns, side_a_lanes, side_b_lanes, one_way]`` for each partition."""
    found: list[list[Any]] = []
    current: list[Any] | None = None
    for event in events:
        if event.kind == "net.partition":
            side = [[lanes[n] for n in event.fields.get(k, ()) if n in lanes] for k in "ab"]
            current = [event.time_ns, end, side[0], side[1], bool(event.fields.get("one_way"))]
            found.append(current)
        elif event.kind in ("net.heal", "fault.heal_all") and current is not None:
            current[1] = event.time_ns
            current = None
    return found


def _links(events: Sequence[Event], lanes: Mapping[str, int], lane_col: list[int]) -> list[Any]:
    """``[from_event, to_event, from_lane, to_lane, start_ns, end_ns, type]``; an event index
    is -1 where the link has only one event (a connect, a reset, a clog)."""
    links: list[list[Any]] = []
    sends: dict[tuple[str, str], int] = {}
    for index, event in enumerate(events):
        fields, kind = event.fields, event.kind
        if kind in ("net.connect", "net.reset", "net.clog"):
            src, dst = fields.get("src"), fields.get("dst")
            if src not in lanes or dst not in lanes:
                continue
            start = end = event.time_ns
            if kind == "net.connect" and isinstance(fields.get("rtt"), int | float):
                start = end - round(fields["rtt"] * 1e9)
            if kind == "net.clog" and isinstance(fields.get("duration"), int | float):
                end = start + round(fields["duration"] * 1e9)
            links.append(
                [index, -1, lanes[str(src)], lanes[str(dst)], start, end, kind.split(".")[1]]
            )
        elif kind.endswith(".send") and "msg" in fields:
            sends[(kind[:-5], json.dumps(_jsonable(fields["msg"])))] = index
        elif kind.endswith(".recv") and "msg" in fields:
            sent = sends.get((kind[:-5], json.dumps(_jsonable(fields["msg"]))))
            if sent is not None:
                origin = events[sent]
                lanes_ = (lane_col[sent], lane_col[index])
                links.append([sent, index, *lanes_, origin.time_ns, event.time_ns, "msg"])
    return links


def render_html(events: Sequence[Event], *, title: str = "trace", trace_hash: str = "") -> str:
    """The complete page: inline CSS, the data, inline JavaScript."""
    model = build_model(events, title=title, trace_hash=trace_hash)
    data = json.dumps(model, separators=(",", ":"), ensure_ascii=False)
    data = data.replace("<", "\\u003c")  # no "</script>" or "<!--" can end the data early
    parts = {"TITLE": html.escape(f"{title} · kelpie trace"), "CSS": CSS, "DATA": data, "JS": JS}
    return _PLACEHOLDER.sub(lambda m: parts[m.group(1)], SKELETON)  # one pass


def read_model(page: str) -> dict[str, Any]:
    """The JSON document embedded in a page written by :func:`render_html`."""
    match = _DATA.search(page)
    if match is None:
        raise ValueError("no kelpie trace data in this page")
    model: dict[str, Any] = json.loads(match.group(1))
    if model.get("format") != FORMAT:
        raise ValueError(f"unknown trace page format {model.get('format')!r}")
    return model


def decode_events(model: Mapping[str, Any]) -> list[Event]:
    """The events of a page's document, exactly as they were in the trace."""
    events = []
    now = 0
    nodes, kinds, fields = model["nodes"], model["kinds"], model["fields"]
    columns = zip(model["t"], model["n"], model["k"], model["f"], strict=True)
    for index, (delta, node, kind, field) in enumerate(columns):
        now += delta
        events.append(Event(index, now, nodes[node], kinds[kind], _from_json(fields[field])))
    return events
