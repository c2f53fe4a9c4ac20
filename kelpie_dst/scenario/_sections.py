"""Validating the tables of a scenario file: topology, simulation, faults and swarm."""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._buggify import DORMANT_SITES
from .._clock import DEFAULT_LIVELOCK_STEPS
from .._faults import fault_types
from ..threads._watchdog import DEFAULT_WATCHDOG
from ._model import (
    FaultEntry,
    LlmTopology,
    McpServer,
    SimOptions,
    StorageTopology,
    Swarm,
    Topology,
)
from ._schema import Doc, describe_value

__all__ = ["check_targets", "faults", "simulation", "swarm", "topology"]

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
MAX_NODES = 1000


def topology(doc: Doc, path: Path) -> Topology:
    doc.only(("nodes", "database", "llm", "sandbox", "mcp", "storage"))
    nodes_value = doc.raw("nodes", [])
    if isinstance(nodes_value, int) and not isinstance(nodes_value, bool):
        count = doc.integer("nodes", minimum=1, maximum=MAX_NODES)
        nodes = tuple(f"node-{i}" for i in range(1, count + 1))
    else:
        nodes = doc.str_list("nodes", [])
        if doc.has("nodes") and not nodes:
            doc.fail("nodes", "is empty: name at least one node, or leave nodes out")
        if len(nodes) > MAX_NODES:
            doc.fail("nodes", f"names {len(nodes)} nodes; at most {MAX_NODES}")
    for index, node in enumerate(nodes):
        if not NAME.match(node) or node == "main":
            doc.fail(f"nodes[{index}]", f"{node!r} is not a valid node name")
        if node in nodes[:index]:
            doc.fail(f"nodes[{index}]", f"node {node!r} is listed twice")
    database = doc.text("database", "")
    if database and (database in nodes or not NAME.match(database) or database == "main"):
        doc.fail("database", f"{database!r} must be a new node name, not one of the nodes")
    sandbox = doc.sub("sandbox")
    sandbox.only(("enabled",))
    storage = doc.sub("storage")
    storage.only(("backend", "fsync"))
    backend = storage.text("backend", "sim", choices=("sim", "sqlite"))
    fsync = storage.duration("fsync") if storage.has("fsync") else 0.0
    mcp_value = doc.raw("mcp", [])
    if not isinstance(mcp_value, list):
        doc.fail("mcp", f"expected an array of tables ([[topology.mcp]]), got {mcp_value!r}")
    servers = []
    for index, item in enumerate(mcp_value):
        if not isinstance(item, dict):
            doc.fail(f"mcp[{index}]", f"expected a table, got {describe_value(item)}")
        server = Doc(item, doc.field(f"mcp[{index}]"), doc.source, doc.overridden)
        server.only(("name", "tools"))
        servers.append(McpServer(server.text("name"), server.str_list("tools", [])))
    return Topology(
        nodes=nodes,
        database=database,
        llm=_llm(doc.sub("llm"), path),
        sandbox=sandbox.flag("enabled", False),
        mcp=tuple(servers),
        storage=StorageTopology(backend, fsync),
    )


def check_targets(doc: Doc, entries: tuple[FaultEntry, ...], topology: Topology) -> None:
    """Every fault target names a node the topology declares (``doc`` is the faults table)."""
    known = [*topology.nodes, *([topology.database] if topology.database else [])]
    for entry in entries:
        domain, _, name = entry.type.partition(".")
        for index, target in enumerate(entry.targets):
            where = f"{domain}.{name}.targets[{index}]"
            if not known:
                doc.fail(where, f"names node {target!r}, but topology.nodes declares no nodes")
            if target not in known:
                doc.fail(where, f"no node {target!r} in the topology", known)


def _llm(doc: Doc, path: Path) -> LlmTopology:
    doc.only(("mode", "transport", "script", "rules", "default", "options"))
    mode = doc.text("mode", "none", choices=("none", "scripted", "adversarial", "helpful"))
    transport = doc.text("transport", "direct", choices=("direct", "anthropic_api"))
    policy: dict[str, Any] = {"mode": mode}
    if mode == "scripted":
        if doc.has("script") and doc.has("rules"):
            doc.fail("script", "give either a script file or inline rules, not both")
        if doc.has("script"):
            policy.update(_read_script(doc, path.parent / doc.text("script")))
        else:
            policy["rules"] = doc.raw("rules", [])
        if doc.has("default"):
            policy["default"] = doc.text("default")
    else:
        for key in ("script", "rules", "default"):
            if doc.has(key):
                doc.fail(key, f"only for mode = 'scripted', not {mode!r}")
    if doc.has("options"):
        if mode != "adversarial":
            doc.fail("options", f"only for mode = 'adversarial', not {mode!r}")
        policy.update(doc.sub("options").data)
    if mode != "none":
        from ..shims.llm import policy_from_dict

        try:
            policy_from_dict(policy)
        except (ValueError, TypeError) as error:
            doc.fail(None, str(error))
    return LlmTopology(mode, transport, policy)


def _read_script(doc: Doc, file: Path) -> dict[str, Any]:
    try:
        text = file.read_text()
    except OSError as error:
        doc.fail("script", f"cannot read {str(file)!r}: {error.strerror}")
    try:
        data = json.loads(text) if file.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as error:
        doc.fail("script", f"{str(file)!r} is not valid {file.suffix[1:] or 'TOML'}: {error}")
    if not isinstance(data, dict):
        doc.fail("script", f"{str(file)!r} must hold a table with rules")
    return data


def simulation(doc: Doc) -> SimOptions:
    doc.only(
        (
            "strategy",
            "pct_depth",
            "guards",
            "guard_allow",
            "buggify",
            "hazards",
            "watchdog",
            "preemption",
            "livelock_steps",
        )
    )
    watchdog = doc.raw("watchdog", DEFAULT_WATCHDOG)
    if isinstance(watchdog, bool) or not isinstance(watchdog, int | float) or not watchdog > 0:
        doc.fail(
            "watchdog",
            f"expected a positive number of seconds (real time), got {describe_value(watchdog)}",
        )
    return SimOptions(
        strategy=doc.text("strategy", "random", choices=("random", "pct")),
        pct_depth=doc.integer("pct_depth", 3, minimum=1),
        guards=doc.text("guards", "redirect", choices=("redirect", "strict", "off")),
        guard_allow=doc.str_list("guard_allow", ()),
        buggify=doc.flag("buggify", True),
        hazards=_hazards(doc),
        watchdog=float(watchdog),
        preemption=doc.flag("preemption", True),
        livelock_steps=doc.integer("livelock_steps", DEFAULT_LIVELOCK_STEPS, minimum=0),
    )


def _hazards(doc: Doc) -> tuple[str, ...]:
    sites = doc.str_list("hazards", ())
    for site in sites:
        if site not in DORMANT_SITES:
            doc.fail("hazards", f"unknown dormant hazard site {site!r}", sorted(DORMANT_SITES))
    return sites


def _check_domain(doc: Doc, domain: str) -> None:
    domains = sorted({t.split(".", 1)[0] for t in fault_types()})
    if domain not in domains:
        doc.fail(domain, f"unknown fault domain {domain!r}", domains)


def _fault_name(doc: Doc, domain: str, name: str) -> str:
    types = fault_types()
    _check_domain(doc, domain)
    full = f"{domain}.{name}"
    if full not in types:
        doc.fail(
            f"{domain}.{name}",
            f"unknown fault type {full!r}",
            [t for t in types if t.startswith(domain + ".")],
        )
    return full


def faults(doc: Doc) -> tuple[FaultEntry, ...]:
    entries = []
    for domain, group in doc.data.items():
        if not isinstance(group, Mapping):
            _check_domain(doc, domain)
            doc.fail(domain, f"expected a table of fault types, got {describe_value(group)}")
        for name, value in group.items():
            full = _fault_name(doc, domain, name)
            entries.append(_fault_entry(doc, full, value))
    return tuple(sorted(entries, key=lambda e: e.type))


def _fault_entry(doc: Doc, full: str, value: Any) -> FaultEntry:
    if not isinstance(value, Mapping):
        if isinstance(value, bool) or not isinstance(value, int | float):
            doc.fail(full, f"expected a probability or a table, got {describe_value(value)}")
        value = {"probability": value}
    entry = Doc(value, doc.field(full), doc.source, doc.overridden)
    entry.only(("probability", "window", "targets", "params"))
    start, end = 0.0, math.inf
    if entry.has("window"):
        window = entry.raw("window")
        if not isinstance(window, list) or len(window) != 2:
            entry.fail("window", f"expected [start, end], like ['10s', '1m'], got {window!r}")
        start = 0.0 if window[0] in (0, "0", "0s") else entry.as_duration("window[0]", window[0])
        end = math.inf if window[1] == "inf" else entry.as_duration("window[1]", window[1])
        if start >= end:
            entry.fail("window", f"is empty: it starts at {window[0]} and ends at {window[1]}")
    spec = fault_types()[full]
    params_doc = entry.sub("params")
    params = []
    for key, param in sorted(params_doc.data.items()):
        if key not in spec.params:
            params_doc.fail(key, f"{full} has no parameter {key!r}", list(spec.params))
        params.append((key, params_doc.as_number(key, param)))
    return FaultEntry(
        type=full,
        probability=entry.probability("probability"),
        start=start,
        end=end,
        targets=entry.str_list("targets", []),
        params=tuple(params),
    )


def swarm(doc: Doc) -> Swarm:
    doc.only(("enabled", "include", "exclude", "p_enabled", "ranges", "intensity", "keep_on"))
    types = fault_types()
    choices = sorted({t.split(".", 1)[0] for t in types}) + list(types)
    selections = {}
    for key in ("include", "exclude", "keep_on"):
        values = doc.str_list(key, [])
        for index, value in enumerate(values):
            if value not in choices:
                doc.fail(f"{key}[{index}]", f"unknown fault domain or type {value!r}", choices)
        selections[key] = values
    ranges = []
    ranges_doc = doc.sub("ranges")
    for domain, group in ranges_doc.data.items():
        if not isinstance(group, Mapping):
            ranges_doc.fail(domain, f"expected a table of fault types, got {describe_value(group)}")
        for name, value in group.items():
            full = _fault_name(ranges_doc, domain, name)
            if (
                not isinstance(value, list)
                or len(value) != 2
                or not all(
                    isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1
                    for v in value
                )
                or value[0] > value[1]
            ):
                ranges_doc.fail(full, f"expected [low, high] within [0, 1], got {value!r}")
            ranges.append((full, float(value[0]), float(value[1])))
    return Swarm(
        enabled=doc.flag("enabled", False),
        include=selections["include"],
        exclude=selections["exclude"],
        p_enabled=doc.probability("p_enabled", 0.5),
        ranges=tuple(sorted(ranges)),
        intensity=doc.flag("intensity", False),
        keep_on=tuple(sorted({v.split(".", 1)[0] for v in selections["keep_on"]})),
    )
