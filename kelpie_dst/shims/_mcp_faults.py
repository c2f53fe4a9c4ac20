"""The MCP fault domain: what can go wrong with a simulated MCP server process.

The specs are registered when this module is imported (it imports nothing heavy, so
``kelpie_dst`` can import it eagerly). :class:`McpFaults` makes the decisions for
``SimMcpServer``, one ``sim.faults.fires`` call per decision point:

=================== =========================== ==============================================
``mcp.server_crash`` each tools/call or tools/list the process dies: this request, every other
                     the process receives         in-flight one and every later one on that
                                                  connection fail until the client reconnects
``mcp.slow_start``   each process start           ``initialize`` is answered ``delay`` virtual
                     (its initialize request)     seconds late, so a start-up timeout may fire
``mcp.tool_timeout`` each tools/call              the call is never answered (until the client
                                                  cancels it), so the client's timeout fires
``mcp.reply_lost``   each tools/call that ran     the tool ran (its effect happened), but the
                                                  answer is lost: the client's timeout fires
``mcp.effect_crash`` each tools/call that ran     the tool ran (its effect happened), then the
                                                  process dies before answering: the call fails
                                                  like a ``mcp.server_crash``, its effect stays
``mcp.list_timeout`` each tools/list              the listing is never answered, so the client's
                                                  timeout fires
=================== =========================== ==============================================

``mcp.effect_crash`` and ``mcp.list_timeout`` are outside swarm (their range is 0 to 0) and
outside the ``mcp`` storm, so adding them moved no shipped seed; scenarios turn them on by name
(docs/faults.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._faults import FaultSpec, register_fault
from .._storms import StormSpec, register_storm

if TYPE_CHECKING:
    from .._sim import Simulation

__all__ = [
    "EFFECT_CRASH",
    "LIST_TIMEOUT",
    "REPLY_LOST",
    "SERVER_CRASH",
    "SLOW_START",
    "TOOL_TIMEOUT",
    "McpFaults",
]

SERVER_CRASH = register_fault(
    FaultSpec(
        "mcp.server_crash",
        "the MCP server process dies while it holds a request",
        swarm_range=(0.0, 0.05),
        observed=(
            "in-flight and later calls on that connection raise McpConnectionError until "
            "McpClient.reconnect starts a fresh process"
        ),
    )
)
SLOW_START = register_fault(
    FaultSpec(
        "mcp.slow_start",
        "the MCP server process takes long to start",
        params={"delay": 60.0},
        swarm_range=(0.0, 0.2),
        observed=(
            "initialize is answered `delay` virtual seconds late; McpClient raises "
            "McpStartupTimeoutError when that exceeds the server's startup_timeout"
        ),
    )
)
TOOL_TIMEOUT = register_fault(
    FaultSpec(
        "mcp.tool_timeout",
        "a tool call is never answered",
        swarm_range=(0.0, 0.1),
        observed=(
            "McpClient.call_tool raises McpTimeoutError after the call timeout; the "
            "connection stays usable"
        ),
    )
)
REPLY_LOST = register_fault(
    FaultSpec(
        "mcp.reply_lost",
        "a tool call runs, but its answer is lost",
        swarm_range=(0.0, 0.1),
        observed=(
            "the tool's effect happened, but McpClient.call_tool raises McpTimeoutError after "
            "the call timeout; the connection stays usable"
        ),
    )
)
EFFECT_CRASH = register_fault(
    FaultSpec(
        "mcp.effect_crash",
        "the MCP server process dies after a tool call ran, before it answers",
        swarm_range=(0.0, 0.0),
        observed=(
            "the tool's effect happened, but McpClient.call_tool raises McpCallLostError (an "
            "McpConnectionError) at once, until McpClient.reconnect starts a fresh process"
        ),
    )
)
LIST_TIMEOUT = register_fault(
    FaultSpec(
        "mcp.list_timeout",
        "a tools/list is never answered",
        # never switched on by swarm mode: a seed's profile (and every swarm scenario's
        # trace) stays as it was before this type existed; a scenario names it
        swarm_range=(0.0, 0.0),
        observed=(
            "McpClient.list_tools (or a start-up's listing) raises McpTimeoutError "
            "(McpStartupTimeoutError) after the timeout; the connection stays usable"
        ),
    )
)
STORM = register_storm(
    StormSpec(
        "mcp",
        "MCP servers crash, hang on tool calls and start slowly",
        (
            ("mcp.server_crash", 0.5, ()),
            ("mcp.tool_timeout", 0.5, ()),
            ("mcp.slow_start", 0.5, (("delay", 8.0),)),
            ("mcp.reply_lost", 0.3, ()),
        ),
        length=(2.0, 6.0),
    )
)


class McpFaults:
    """Fault decisions for one simulated MCP server (``sim`` is None outside a simulation)."""

    def __init__(self, sim: Simulation | None, server: str) -> None:
        self.sim = sim
        self.server = server

    def _node(self) -> str | None:
        if self.sim is None:
            return None
        node = self.sim.current_node()
        return node.name if node is not None else None

    def start_delay(self) -> float:
        """Extra seconds before ``initialize`` is answered (``mcp.slow_start``)."""
        if self.sim is None:
            return 0.0
        fault = self.sim.faults.fires(SLOW_START.name, node=self._node(), server=self.server)
        return fault.param("delay") if fault is not None else 0.0

    def crashes(self, method: str, tool: str | None) -> bool:
        """Does the process die on receiving this request (``mcp.server_crash``)?"""
        if self.sim is None:
            return False
        fields: dict[str, Any] = {"server": self.server, "method": method}
        if tool is not None:
            fields["tool"] = tool
        return self.sim.faults.fires(SERVER_CRASH.name, node=self._node(), **fields) is not None

    def hangs(self, tool: str) -> bool:
        """Is this tool call never answered (``mcp.tool_timeout``)?"""
        if self.sim is None:
            return False
        fault = self.sim.faults.fires(
            TOOL_TIMEOUT.name, node=self._node(), server=self.server, tool=tool
        )
        return fault is not None

    def dies_after(self, tool: str) -> bool:
        """Does the process die after running this tool call, before answering
        (``mcp.effect_crash``)?"""
        if self.sim is None:
            return False
        fault = self.sim.faults.fires(
            EFFECT_CRASH.name, node=self._node(), server=self.server, tool=tool
        )
        return fault is not None

    def list_hangs(self) -> bool:
        """Is this tools/list never answered (``mcp.list_timeout``)?"""
        if self.sim is None:
            return False
        fault = self.sim.faults.fires(LIST_TIMEOUT.name, node=self._node(), server=self.server)
        return fault is not None

    def loses_reply(self, tool: str) -> bool:
        """Is the answer of this tool call, which ran, lost (``mcp.reply_lost``)?"""
        if self.sim is None:
            return False
        fault = self.sim.faults.fires(
            REPLY_LOST.name, node=self._node(), server=self.server, tool=tool
        )
        return fault is not None
