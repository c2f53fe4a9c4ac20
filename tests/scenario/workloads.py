"""Small workloads for the scenario tests (importable as tests.scenario.workloads:NAME)."""

from __future__ import annotations

import trio

from kelpie_dst.scenario import WorkloadContext, invariant, workload


@workload(params={"sleep": 10.0, "steps": 3}, sizes=("steps",), bounds={"steps": (1, 10_000)})
async def sleepy(ctx: WorkloadContext) -> None:
    """Sleeps ``steps`` times for ``sleep / steps`` seconds, noting whether faults had healed."""
    ctx.sim.add_node("idler")  # something for process faults to hit
    seen = []
    for _ in range(ctx.params["steps"]):
        await trio.sleep(ctx.params["sleep"] / ctx.params["steps"])
        seen.append((trio.current_time(), ctx.healed, ctx.sim.faults.healed))
    ctx.state["seen"] = seen
    ctx.metric("steps", len(seen))
    ctx.metric("healed_steps", sum(healed for _, healed, _ in seen))


@workload(params={"message": "boom"})
async def crashes(ctx: WorkloadContext) -> None:
    await trio.sleep(1)
    raise KeyError(ctx.params["message"])


@workload(params={"value": 3})
async def stores(ctx: WorkloadContext) -> None:
    ctx.state["value"] = ctx.params["value"]
    h = ctx.history.invoke(1, "write", "x", value="a", time=0.0)
    ctx.history.ok(h, time=1.0)
    h = ctx.history.invoke(2, "read", "x", time=2.0)
    ctx.history.ok(h, "b" if ctx.params["value"] == 13 else "a", time=3.0)


@invariant
def value_is_small(ctx: WorkloadContext) -> None:
    assert ctx.state["value"] < 10, f"value [bold]{ctx.state['value']}[/] is too big"


@invariant(name="always_true")
async def async_invariant(ctx: WorkloadContext) -> None:
    await trio.sleep(0)
