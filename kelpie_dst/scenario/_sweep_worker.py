"""What runs one sweep item, wherever it runs: this process, a local worker, a Dask worker.

:func:`run_checked` runs the item here; if it fails, it runs it again in a fresh Python process
(``python -m kelpie_dst.scenario._sweep_worker``, the item as JSON on stdin) before the failure
is reported. A seed's trace depends only on the seed, so a fresh run that gives another trace
means this process carried state over from the seeds it ran before (a module-level cache, a
class attribute, a mutable default argument, a module-level RNG), and the printed replay line
would not reproduce the failure. Such a result is reported as nondeterminism (exit 4) with both
trace hashes, the seeds this process ran before it, and, where :func:`state_digest` can see it,
the module-level state that differs between the two processes.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import sysconfig
from collections import deque
from collections.abc import Iterator
from typing import Any

import attrs

from .._entry import load_entry
from .._faults import Fault, FaultPlan
from .._hashseed import current_hashseed
from .._run import run
from ._loader import load_scenario
from ._model import Scenario
from ._runtime import describe_faults, run_scenario
from ._sweep import CarriedOver, EntryOptions, SeedResult, SweepItem

__all__ = ["fresh_run", "run_checked", "run_item", "state_digest"]

_SCENARIOS: dict[tuple[str, tuple[str, ...]], Scenario] = {}
_HISTORY: deque[str] = deque(maxlen=20)  # the items this process ran, latest last
_RAN = [0]
_FRESH_TIMEOUT = 600.0  # seconds a fresh re-run may take


def _label(item: SweepItem) -> str:
    name = item.ref if item.entry is not None else item.ref.rsplit("/", 1)[-1]
    return f"{name} seed={item.seed}" + (f" [{' '.join(item.overrides)}]" if item.overrides else "")


def run_item(item: SweepItem) -> SeedResult:
    """Run one item in this process (scenarios are loaded once per process)."""
    _HISTORY.append(_label(item))
    _RAN[0] += 1
    if item.entry is not None:
        return _run_entry(item, item.entry)
    key = (item.ref, item.overrides)
    scenario = _SCENARIOS.get(key)
    if scenario is None:
        scenario = _SCENARIOS[key] = load_scenario(item.ref, item.overrides)
    return SeedResult.from_run(run_scenario(scenario, item.seed))


def _run_entry(item: SweepItem, options: EntryOptions) -> SeedResult:
    main = load_entry(item.ref)
    explicit = tuple(Fault.parse(f) for f in options.faults)
    chosen = FaultPlan(explicit, options.swarm).resolve(item.seed)
    named = {f.type for f in explicit}
    swarm = tuple(f for f in chosen if f.type not in named)
    result = run(main, seed=item.seed, **options.as_kwargs())
    return SeedResult.from_entry(item, result, describe_faults(explicit, swarm), current_hashseed())


def run_checked(item: SweepItem, recheck: bool = True, hashseed: str | None = None) -> SeedResult:
    """Run ``item`` here; re-run a failure in a fresh process and report whether it depended
    on this process's earlier seeds. No re-run under a random hash seed (nothing replays).
    ``hashseed``: the hash seed this process really runs under, when its environment may say
    otherwise (a Dask worker's)."""
    earlier = tuple(_HISTORY)
    earlier_count = _RAN[0]
    result = run_item(item)
    if hashseed is not None:
        result = attrs.evolve(result, hashseed=hashseed)
    if result.ok or not recheck or result.hashseed is None:
        return result
    fresh = fresh_run(item, result.hashseed)
    if fresh["trace_hash"] == result.trace_hash:
        return result
    here = state_digest()
    differs = sorted(
        f"{name}: {here[name]} here, {there} in a fresh process"
        for name, there in fresh["state"].items()
        if name in here and here[name] != there
    )
    carried = CarriedOver(
        fresh_hash=fresh["trace_hash"],
        fresh_exit_code=fresh["exit_code"],
        earlier=earlier,
        earlier_count=earlier_count,
        state=tuple(differs[:10]),
    )
    cause = (
        "depends on earlier seeds in this process"
        if earlier_count
        else "not reproducible in a fresh process"
    )
    message = (
        f"{cause}: trace hash {result.trace_hash} here (exit {result.exit_code}: "
        f"{result.failure_class}), {carried.fresh_hash} in a fresh process "
        f"(exit {carried.fresh_exit_code})"
    )
    return attrs.evolve(
        result,
        exit_code=4,
        failure_class="nondeterminism",
        message=message,
        details=_details(result, carried),
        carried_over=carried,
    )


def _details(result: SeedResult, carried: CarriedOver) -> str:
    lines = []
    if carried.earlier_count:
        shown = ", ".join(carried.earlier)
        more = carried.earlier_count - len(carried.earlier)
        lines.append(
            f"this process ran {carried.earlier_count} seed(s) before it"
            + (f" (the last {len(carried.earlier)}: {shown})" if more else f": {shown}")
        )
    if carried.state:
        lines.append("module-level state that differs from a fresh process's:")
        lines += [f"  {line}" for line in carried.state]
    else:
        lines.append(
            "no differing module-level state found (look for caches, class attributes, "
            "mutable default arguments and module-level RNGs)"
        )
    first = result.message.splitlines()[0] if result.message else result.failure_class
    lines.append(f"the failure in this process: {first}")
    return "\n".join(lines)


def fresh_run(item: SweepItem, hashseed: str) -> dict[str, Any]:
    """Run ``item`` alone in a new Python process under ``hashseed``, with this process's path
    and directory: its trace hash, exit code and :func:`state_digest` afterwards."""
    request = {
        "item": _item_json(item),
        "sys_path": [p for p in sys.path if p],
        "cwd": os.getcwd(),
    }
    env = dict(os.environ, PYTHONHASHSEED=hashseed, KELPIE_DST_NO_REEXEC="1")
    proc = subprocess.run(
        [sys.executable, "-m", "kelpie_dst.scenario._sweep_worker"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=env,
        timeout=_FRESH_TIMEOUT,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"trace_hash": f"(the fresh process failed: {tail})", "exit_code": 3, "state": {}}
    answer: dict[str, Any] = json.loads(lines[-1])
    return answer


def _item_json(item: SweepItem) -> dict[str, Any]:
    return {
        "index": item.index,
        "ref": item.ref,
        "overrides": list(item.overrides),
        "seed": item.seed,
        "entry": attrs.asdict(item.entry) if item.entry is not None else None,
    }


def _item_from_json(data: dict[str, Any]) -> SweepItem:
    entry = data["entry"]
    options = None
    if entry is not None:
        options = EntryOptions(**{**entry, "faults": tuple(entry["faults"])})
    return SweepItem(data["index"], data["ref"], tuple(data["overrides"]), data["seed"], options)


# -- what a process carries over ---------------------------------------------------------------
_MUTABLE = (list, dict, set, bytearray, deque)
_SCALAR = (int, float, str, bytes, bool, type(None))
_SKIP_PREFIXES = ("kelpie_dst", "__main__", "__mp_main__")


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return tuple(sorted(os.path.realpath(d) + os.sep for d in dirs))


def _fingerprint(value: Any) -> str | None:
    if isinstance(value, bool | type(None)):
        return repr(value)
    if isinstance(value, _SCALAR):
        text = repr(value)
        return f"{type(value).__name__} {text[:40]}" + ("..." if len(text) > 40 else "")
    if isinstance(value, _MUTABLE):
        return f"{type(value).__name__} of {len(value)}"
    if isinstance(value, random.Random):
        return f"Random at state #{hash(value.getstate()) & 0xFFFFFF:06x}"
    return None


def _module_state(name: str, module: Any) -> Iterator[tuple[str, str]]:
    for attr, value in list(vars(module).items()):
        if attr.startswith("__"):
            continue
        where = f"{name}.{attr}"
        mark = _fingerprint(value)
        if mark is not None:
            yield where, mark
        elif isinstance(value, type) and value.__module__ == name:
            for key, inner in list(vars(value).items()):
                if not key.startswith("__") and isinstance(inner, (*_MUTABLE, random.Random)):
                    yield f"{where}.{key}", _fingerprint(inner) or ""
        elif callable(value) and getattr(value, "__module__", None) == name:
            defaults = getattr(value, "__defaults__", None) or ()
            for i, default in enumerate(defaults):
                if isinstance(default, _MUTABLE):
                    yield f"{where} (default argument {i + 1})", _fingerprint(default) or ""
            for key, default in (getattr(value, "__kwdefaults__", None) or {}).items():
                if isinstance(default, _MUTABLE):
                    yield f"{where} (default of {key})", _fingerprint(default) or ""


def state_digest() -> dict[str, str]:
    """Module-level state of the program's own modules (not the standard library, installed
    packages or kelpie_dst): scalars by value, containers by type and size, RNGs by state,
    and mutable class attributes and default arguments, by qualified name."""
    libraries = _library_dirs()
    out: dict[str, str] = {}
    for name, module in sorted(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if module is None or file is None or name.startswith(_SKIP_PREFIXES):
            continue
        real = os.path.realpath(file)
        if real.startswith(libraries) and "kelpie_agent" not in name:
            continue
        out.update(_module_state(name, module))
    return out


def _main() -> None:
    request = json.loads(sys.stdin.read())
    os.chdir(request["cwd"])
    sys.path[:] = [*request["sys_path"], *(p for p in sys.path if p not in request["sys_path"])]
    result = run_item(_item_from_json(request["item"]))
    answer = {"trace_hash": result.trace_hash, "exit_code": result.exit_code}
    print(json.dumps({**answer, "state": state_digest()}))


if __name__ == "__main__":
    _main()
