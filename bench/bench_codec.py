"""CPU of decoding the agent's stored records, the codec's hook against the one it replaced.

    .venv/bin/python bench/bench_codec.py [--scenario agent_chaos] [--seed 3] [--rounds 9]

Runs one seed with ``kelpie_agent.agent._codec.unpack`` wrapped to keep every payload it
decodes, then decodes them all again with msgpack and each object hook in turn (the current
``_hook`` and ``_hook_before``, the code before DspeedO-1), alternating, and prints the minimum
over the rounds of the CPU per seed, the ratio, and what msgpack alone takes (no hook). Every
payload must decode to equal values of the same type both ways.

Figures (session 19, load average 5-6 on 2 cores): agent_chaos seed 3 decodes 16,358 payloads,
8.0 MB; msgpack alone 97 ms, with the hook before 147 ms, after 131 ms (0.891x).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import msgpack

from kelpie_agent.agent import _codec
from kelpie_dst.scenario import load_scenario, run_scenario

Hook = Callable[[dict[Any, Any]], Any] | None


def _hook_before(data: dict[Any, Any]) -> Any:
    tag = data.get("_t")
    if tag is None:
        return data
    cls = _codec._CLASSES.get(tag)
    if cls is None:
        raise ValueError(f"unknown record type {tag!r}")
    known = _codec._FIELDS[tag]
    return cls(**{k: v for k, v in data.items() if k in known})


def _capture(scenario: str, seed: int) -> list[bytes]:
    captured: list[bytes] = []
    original = _codec.unpack

    def keeping(data: bytes) -> Any:
        captured.append(bytes(data))
        return original(data)

    bound = [m for m in list(sys.modules.values()) if getattr(m, "unpack", None) is original]
    for module in bound:
        module.unpack = keeping  # type: ignore[attr-defined]
    try:
        run_scenario(load_scenario(scenario, ()), seed)
    finally:
        for module in bound:
            module.unpack = original  # type: ignore[attr-defined]
    return captured


def _decode(payloads: list[bytes], hook: Hook) -> list[Any]:
    kw: dict[str, Any] = {"raw": False, "use_list": True, "strict_map_key": False}
    if hook is not None:
        kw["object_hook"] = hook
    return [msgpack.unpackb(data, **kw) for data in payloads]


def _cpu(payloads: list[bytes], hook: Hook) -> float:
    start = time.process_time()
    _decode(payloads, hook)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", default="agent_chaos")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    payloads = _capture(args.scenario, args.seed)
    print(f"{len(payloads)} payloads, {sum(map(len, payloads)) / 1e6:.1f} MB")
    for a, b in zip(_decode(payloads, _hook_before), _decode(payloads, _codec._hook), strict=True):
        if a != b or type(a) is not type(b):
            raise SystemExit(f"decoded differently: {a!r} != {b!r}")
    hooks: dict[str, Hook] = {"none": None, "before": _hook_before, "after": _codec._hook}
    best = {name: float("inf") for name in hooks}
    for _ in range(args.rounds):
        for name, hook in hooks.items():
            best[name] = min(best[name], _cpu(payloads, hook))
    ms = {name: 1000 * cpu for name, cpu in best.items()}
    print(f"msgpack alone {ms['none']:.0f} ms; hook before {ms['before']:.0f} ms, after ", end="")
    print(f"{ms['after']:.0f} ms ({best['after'] / best['before']:.3f}x)")


if __name__ == "__main__":
    main()
