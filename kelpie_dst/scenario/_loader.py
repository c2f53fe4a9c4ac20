"""Finding, reading, overriding and validating scenario files (``scenarios/*.toml``).

The document is read with :mod:`tomllib`, dotted fault names are normalised into nested tables
(``[faults."network.partition"]`` is ``[faults.network.partition]``), ``--set PATH=VALUE``
overrides are applied to the document, and then every field is validated into a
:class:`~kelpie_dst.scenario.Scenario`. Errors are one line naming the file and the field.
"""

from __future__ import annotations

import copy
import importlib
import os
import re
import sys
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._errors import UsageError
from ._model import Liveness, Scenario, WorkloadSpec
from ._schema import Doc, ScenarioError, describe_value
from ._sections import NAME as _NAME
from ._sections import check_targets, faults, simulation, swarm, topology
from ._workload import BUILTIN_INVARIANTS, module_invariants, workload_info

__all__ = [
    "apply_overrides",
    "find_scenario",
    "load_scenario",
    "parse_override",
    "scenario_dirs",
    "scenario_files",
]

SCENARIOS_ENV = "KELPIE_DST_SCENARIOS"
MAX_FILE_BYTES = 4 << 20  # a scenario file is small; a larger one is a mistake
MAX_DEPTH = 32  # tables and arrays within each other (scenarios need about 5)
MAX_SEEDS = 1_000_000  # a scenario's default number of seeds
_TOP = (
    "name",
    "description",
    "seeds",
    "duration",
    "workload",
    "topology",
    "simulation",
    "faults",
    "swarm",
    "invariants",
    "liveness",
)
_PATH = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
_ENTRY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


# -- finding scenarios ---------------------------------------------------------------------------


def scenario_dirs() -> list[Path]:
    """Where scenario names are looked up: ``$KELPIE_DST_SCENARIOS`` (a path list), then
    ``./scenarios``, then the ``scenarios/`` directory of a source checkout of kelpie."""
    dirs = [Path(p) for p in os.environ.get(SCENARIOS_ENV, "").split(os.pathsep) if p]
    dirs.append(Path("scenarios"))
    dirs.append(Path(__file__).resolve().parents[2] / "scenarios")
    unique: list[Path] = []
    for d in dirs:
        if d.is_dir() and all(d.resolve() != u.resolve() for u in unique):
            unique.append(d)
    return unique


def scenario_files(dirs: Iterable[Path] | None = None) -> list[Path]:
    """Every ``*.toml`` in the search path; a name found twice keeps its first directory."""
    seen: dict[str, Path] = {}
    for directory in scenario_dirs() if dirs is None else dirs:
        for path in sorted(directory.glob("*.toml")):
            seen.setdefault(path.stem, path)
    return sorted(seen.values(), key=lambda p: p.stem)


def find_scenario(ref: str) -> Path:
    """A path (anything ending in ``.toml`` or containing a slash), or a name to look up."""
    if ref.endswith(".toml") or "/" in ref or os.sep in ref:
        path = Path(ref)
        if path.is_dir():
            raise UsageError(f"{ref}: is a directory, not a scenario file (give a .toml file)")
        if not path.is_file():
            raise UsageError(f"no scenario file {ref!r}")
        return path
    for directory in scenario_dirs():
        path = directory / f"{ref}.toml"
        if path.is_file():
            return path
    known = ", ".join(p.stem for p in scenario_files()) or "none found"
    raise UsageError(f"unknown scenario {ref!r} (allowed: {known}; or give a path to a .toml file)")


# -- overrides -----------------------------------------------------------------------------------


def parse_override(text: str) -> tuple[list[str], Any]:
    """``PATH=VALUE``: a dotted path, and a TOML value (bare words are strings)."""
    path, sep, value = text.partition("=")
    path = path.strip()
    if not sep or not _PATH.match(path):
        raise UsageError(f"--set {text!r}: expected PATH=VALUE, like duration=90s")
    value = value.strip()
    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value
    return path.split("."), parsed


def apply_overrides(
    document: Mapping[str, Any], overrides: Sequence[str]
) -> tuple[dict[str, Any], frozenset[str]]:
    """A copy of ``document`` with each override applied in order, and the paths they set."""
    doc = copy.deepcopy(dict(document))
    touched = []
    for text in overrides:
        parts, value = parse_override(text)
        table: dict[str, Any] = doc
        for depth, key in enumerate(parts[:-1]):
            inner = table.get(key)
            if inner is None:
                inner = table[key] = {}
            elif _is_fault_shorthand(parts, depth, inner):
                inner = table[key] = {"probability": inner}
            elif not isinstance(inner, dict):
                where = ".".join(parts[: depth + 1])
                raise UsageError(f"--set {text}: {where} is {describe_value(inner)}, not a table")
            table = inner
        table[parts[-1]] = value
        touched.append(".".join(parts))
    return doc, frozenset(touched)


def _is_fault_shorthand(parts: list[str], depth: int, value: object) -> bool:
    return (
        parts[0] == "faults"
        and depth == 2
        and isinstance(value, int | float)
        and not isinstance(value, bool)
    )


def _split_dotted(doc: dict[str, Any], key: str, source: str) -> None:
    """Nest ``{"a.b": x}`` keys of ``doc[key]`` as ``{"a": {"b": x}}``."""
    table = doc.get(key)
    if not isinstance(table, dict):
        return
    nested: dict[str, Any] = {}
    for name, value in table.items():
        domain, dot, rest = name.partition(".")
        if not dot:
            inner = nested.setdefault(name, value)
            if inner is not value:
                if not (isinstance(inner, dict) and isinstance(value, dict)):
                    raise ScenarioError(source, f"{key}.{name}", "is given twice")
                _merge(inner, value, source, f"{key}.{name}")
            continue
        group = nested.setdefault(domain, {})
        if not isinstance(group, dict):
            raise ScenarioError(source, f"{key}.{domain}", f"expected a table, got {group!r}")
        if rest in group:
            raise ScenarioError(source, f"{key}.{name}", "is given twice")
        group[rest] = value
    doc[key] = nested


def _merge(into: dict[str, Any], other: dict[str, Any], source: str, where: str) -> None:
    for name, value in other.items():
        if name in into:
            raise ScenarioError(source, f"{where}.{name}", "is given twice")
        into[name] = value


# -- loading -------------------------------------------------------------------------------------


def load_scenario(ref: str | Path, overrides: Sequence[str] = ()) -> Scenario:
    """Find, read, override and validate a scenario. Raises a one-line
    :class:`~kelpie_dst.UsageError` for anything wrong."""
    path = find_scenario(str(ref))
    source = str(ref) if str(ref).endswith(".toml") else str(path)
    document = read_document(path, source)
    for key in ("faults",):
        _split_dotted(document, key, source)
    if isinstance(document.get("swarm"), dict):
        _split_dotted(document["swarm"], "ranges", source)
    doc, touched = apply_overrides(document, overrides)
    return build_scenario(doc, str(ref), path, source, tuple(overrides), touched)


def read_document(path: Path, source: str) -> dict[str, Any]:
    """The TOML document in ``path``: at most MAX_FILE_BYTES of UTF-8, nested at most
    MAX_DEPTH tables and arrays deep; otherwise one :class:`ScenarioError` line."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise ScenarioError(source, "", f"cannot read it: {error.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ScenarioError(source, "", f"is over {MAX_FILE_BYTES} bytes: not a scenario file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        bom = " (it looks like UTF-16)" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise ScenarioError(
            source,
            "",
            f"not UTF-8 text{bom}: byte 0x{raw[error.start]:02x} at offset {error.start}; "
            "a scenario file is TOML, which is UTF-8",
        ) from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(source, "", f"invalid TOML: {error}") from None
    except RecursionError:
        raise ScenarioError(source, "", f"nested too deeply (at most {MAX_DEPTH} levels)") from None
    where = _too_deep(document)
    if where is not None:
        raise ScenarioError(source, where, f"nested too deeply (at most {MAX_DEPTH} levels)")
    return document


def _too_deep(document: Mapping[str, Any]) -> str | None:
    """The first field nested deeper than MAX_DEPTH, if any (walked without recursion)."""
    stack: list[tuple[Any, str, int]] = [(document, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            return where
        if isinstance(value, Mapping):
            stack.extend(
                (v, f"{where}.{k}" if where else str(k), depth + 1) for k, v in value.items()
            )
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value))
    return None


def build_scenario(
    data: Mapping[str, Any],
    ref: str,
    path: Path,
    source: str,
    overrides: tuple[str, ...] = (),
    touched: frozenset[str] = frozenset(),
) -> Scenario:
    doc = Doc(data, "", source, touched)
    doc.only(_TOP)
    name = doc.text("name", path.stem)
    if not _NAME.match(name):
        doc.fail("name", f"{name!r} is not a valid name (letters, digits, '_', '-', '.')")
    duration = doc.duration("duration", "1m")
    workload = _workload(doc.sub("workload", default_empty=False))
    invariants = _invariants(doc, workload)
    liveness = _liveness(doc)
    if liveness is not None and liveness.heal_at is not None and liveness.heal_at > duration:
        doc.fail("liveness.heal_at", "must not be after the scenario's duration")
    world = topology(doc.sub("topology"), path)
    info = workload.info
    backend = world.storage.backend
    if info is not None and backend not in info.backends:
        doc.fail(
            "topology.storage.backend",
            f"{backend!r}: workload {workload.entry} runs only on "
            + ", ".join(repr(b) for b in info.backends),
        )
    fault_entries = faults(doc.sub("faults"))
    check_targets(doc.sub("faults"), fault_entries, world)
    return Scenario(
        name=name,
        ref=ref,
        path=path,
        workload=workload,
        description=doc.text("description", ""),
        seeds=doc.integer("seeds", 100, minimum=1, maximum=MAX_SEEDS),
        duration=duration,
        topology=world,
        simulation=simulation(doc.sub("simulation")),
        faults=fault_entries,
        swarm=swarm(doc.sub("swarm")),
        invariants=invariants,
        invariant_names=tuple(n for n, _ in invariants),
        liveness=liveness,
        overrides=overrides,
        document=data,
    )


def _import_entry(doc: Doc, key: str, spec: str) -> Callable[..., Any]:
    if not _ENTRY.match(spec):
        doc.fail(key, f"expected package.module:function, got {spec!r}")
    module_name, _, attr_path = spec.partition(":")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            doc.fail(key, f"no module named {error.name!r}")
        doc.fail(key, f"importing {module_name} failed: {error}")
    except Exception as error:
        doc.fail(key, f"importing {module_name} failed: {type(error).__name__}: {error}")
    target: Any = module
    for part in attr_path.split("."):
        if not hasattr(target, part):
            doc.fail(key, f"{module_name} has no attribute {part!r}")
        target = getattr(target, part)
    if not callable(target):
        doc.fail(key, f"{attr_path} is not callable")
    return target  # type: ignore[no-any-return]


def _workload(doc: Doc) -> WorkloadSpec:
    doc.only(("entry", "params"))
    entry = doc.text("entry")
    fn = _import_entry(doc, "entry", entry)
    info = workload_info(fn)
    given = doc.sub("params")
    if info is None:
        if given.data:
            given.fail(next(iter(given.data)), "unknown parameter", [])
        return WorkloadSpec(entry, fn, {}, None)
    params: dict[str, Any] = dict(info.params)
    for key, value in given.data.items():
        if key not in info.params:
            given.fail(key, "unknown parameter", sorted(info.params))
        params[key] = _param(given, key, value, info.params[key])
    for size, minimum in info.sizes.items():
        if params[size] < minimum:
            given.fail(size, f"must be at least {minimum}, got {params[size]}")
    for key in given.data:
        limits = info.bounds_of(key)
        if limits is not None and not limits[0] <= params[key] <= limits[1]:
            low, high = (f"{v:g}" for v in limits)
            given.fail(
                key, f"must be from {low} to {high} (the workload's bounds), got {params[key]}"
            )
    return WorkloadSpec(entry, fn, params, info)


def _param(doc: Doc, key: str, value: object, default: object) -> Any:
    if isinstance(default, bool):
        return doc.flag(key)
    if isinstance(default, int):
        return doc.integer(key)
    if isinstance(default, float):
        return doc.number(key)
    if isinstance(default, str):
        return doc.text(key)
    return value


def _invariants(doc: Doc, workload: WorkloadSpec) -> tuple[tuple[str, Callable[..., Any]], ...]:
    names = doc.str_list("invariants", [])
    module = sys.modules.get(getattr(workload.fn, "__module__", "") or "")
    available: dict[str, Callable[..., Any]] = dict(BUILTIN_INVARIANTS)
    if module is not None:
        available.update(module_invariants(module))
    resolved = []
    for index, name in enumerate(names):
        if name not in available:
            doc.fail(f"invariants[{index}]", f"unknown invariant {name!r}", sorted(available))
        if name in names[:index]:
            doc.fail(f"invariants[{index}]", f"invariant {name!r} is listed twice")
        resolved.append((name, available[name]))
    return tuple(resolved)


def _liveness(doc: Doc) -> Liveness | None:
    if not doc.has("liveness"):
        return None
    live = doc.sub("liveness")
    live.only(("heal_at", "within"))
    heal_at = live.duration("heal_at") if live.has("heal_at") else None
    return Liveness(within=live.duration("within"), heal_at=heal_at)
