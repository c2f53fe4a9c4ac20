"""Managed MCP servers under churn, as a scenario workload (see ``_agent_mcp_servers``)."""

from ._agent_mcp_servers import agent_mcp_servers as agent_mcp_servers
from ._agent_mcp_servers import mcp_calls_exactly_once as mcp_calls_exactly_once
from ._agent_mcp_servers import mcp_calls_time_out_on_time as mcp_calls_time_out_on_time
from ._agent_mcp_servers import mcp_catalog_consistent as mcp_catalog_consistent

__all__ = [
    "agent_mcp_servers",
    "mcp_calls_exactly_once",
    "mcp_calls_time_out_on_time",
    "mcp_catalog_consistent",
]
