"""MCP servers recover: once the faults have healed, a node's MCP tools work again.

A static MCP server's process can die (``mcp.server_crash``); the client's connection is then
broken, and the agent's executor reconnects (which starts the server again) and retries. A
user sees the server's tools back as soon as the server is: after the simulation heals every
fault (no more crashes, timeouts or lost answers), a node whose MCP calls all keep failing
serves tools that stay broken although nothing is wrong any more (the session-10 blind test,
rtE: a reconnect that keeps the last failure's cause).

:func:`check_mcp_recovers` judges the calls each node's client made (``Journal.mcp_calls``):
a node that made MCP calls that started after the heal (plus ``settle`` seconds, for calls in
flight when it came) must have had at least one answered.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["check_mcp_recovers"]


def check_mcp_recovers(calls: Iterable[Any], healed_at: float, settle: float = 15.0) -> list[str]:
    """Nodes whose MCP calls all failed after the faults healed (empty: all is well)."""
    after: dict[str, list[Any]] = {}
    for call in calls:
        if call.started >= healed_at + settle:
            after.setdefault(call.node, []).append(call)
    problems = []
    for node, made in sorted(after.items()):
        if made and all(c.error is not None for c in made):
            errors = sorted({c.error for c in made})
            problems.append(
                f"{node}: all {len(made)} MCP call(s) made after the faults healed (at "
                f"{healed_at:g}s) failed ({', '.join(errors)}): its MCP tools never recovered"
            )
    return problems
