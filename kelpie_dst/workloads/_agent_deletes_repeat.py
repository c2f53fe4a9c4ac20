"""Detaches and deletes many times over, for lost answers to find (``deletes_repeat``, svcW).

With ``deletes_repeat = N`` (the delete walker's option, off by default), before its one delete
of each kind the walker runs N rounds, each on an agent of its own: it attaches every tool and
block it made, replaces the agent's tools with the first one (``agents.update(tool_ids=...)``:
the server detaches the others one by one), detaches that last tool and every block on their
own routes, reads the agent's tools and blocks back after each step, and deletes the agent.

Every one of these requests names something the client knows is there, and the client sends
it once: **a first attempt that answers 404 (or any error) is a problem** (the walker's rule,
``_agent_deletes``), and what was detached is gone from the agent's views while what was not
is still shown (``deletes_are_total``, each round's views judged as kinds of their own). Under
``service.answer_lost`` (``agent_lost_answers_settled``) the server loses the answer of about
one request in four after applying it and repeats it: a repeat that finds its work already
done must answer as the first attempt would have (Dlead25-2's rule for retries the *service*
makes). One delete of each kind is the single chance a lost answer has there; N rounds give it
N chances per route.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._agent_readback import _items

if TYPE_CHECKING:
    from ._agent_deletes import DeleteWalker

__all__ = ["repeat_rounds"]


async def repeat_rounds(walker: DeleteWalker, rounds: int) -> None:
    """``rounds`` rounds of attach, replace, detach, delete (see the module docstring)."""
    tools = list(walker.log.made.get("tool", []))
    blocks = list(walker.log.made.get("block", []))
    for r in range(rounds):
        agent = await _agent(walker, r)
        for tool in tools:
            await walker._sdk("agents.tools.attach", tool, agent_id=agent)
        for block in blocks:
            await walker._sdk("agents.blocks.attach", block, agent_id=agent)
        where = f"repeat {r}"
        # tool_ids replaced: the server detaches every other tool (one request each)
        await walker._sdk("agents.update", agent, tool_ids=tools[:1])
        kept, dropped = f"{where} tools after update", tools[1:]
        walker.log.deleted.setdefault(kept, []).extend(dropped)
        await _views(walker, agent, f"{where}: after agents.update(tool_ids)", kept, None)
        after = f"{where} tools after detaches"
        walker.log.deleted.setdefault(after, []).extend(dropped)
        for tool in tools[:1]:
            await walker._delete(after, tool, "agents.tools.detach", agent_id=agent)
        for block in blocks:
            await walker._delete(f"{where} blocks", block, "agents.blocks.detach", agent_id=agent)
        await _views(walker, agent, f"{where}: after the detaches", after, f"{where} blocks")
        await walker._delete("agent", agent, "agents.delete")


async def _agent(walker: DeleteWalker, r: int) -> str:
    name = f"deletes-repeat-{r}"

    async def find(sdk: Any) -> Any:
        page = await sdk.agents.list(name=name, limit=1, order="asc")
        return page.items[0] if page.items else None

    async def make(sdk: Any) -> Any:
        return await sdk.agents.create(name=name, include_base_tools=False)

    made = await walker._create(f"agent {name}", find, make)
    return walker._made("agent", made.id)


async def _views(
    walker: DeleteWalker, agent: str, when: str, tool_kind: str, block_kind: str | None
) -> None:
    """The agent's tools (its list and its state) judged as ``tool_kind``, its blocks as
    ``block_kind`` (if given): what was detached gone, the rest shown."""
    tools, blocks = walker.log.made.get("tool", []), walker.log.made.get("block", [])
    listed = [str(t.id) for t in _items(await walker._sdk("agents.tools.list", agent, limit=100))]
    walker._listed(f"{when}: agents.tools.list({agent})", tool_kind, listed, tools)
    state = await walker._sdk("agents.retrieve", agent)
    shown = [str(t.id) for t in state.tools]
    walker._listed(f"{when}: agents.retrieve({agent}).tools", tool_kind, shown, tools)
    if block_kind is not None:
        mine = [str(b.id) for b in state.memory.blocks]
        walker._listed(f"{when}: agents.retrieve({agent}).memory.blocks", block_kind, mine, blocks)
