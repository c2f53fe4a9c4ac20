"""MCP: tools from statically configured MCP servers, through the official ``mcp`` SDK.

``McpClient`` starts each configured server on first use, lists its tools and calls them with
timeouts. Production servers are subprocesses speaking JSON-RPC over stdio; in a simulation
``kelpie_dst.shims.SimMcpServer`` provides the transport, and the client code is the same.
See docs/mcp.md.
"""

from ._client import McpClient as McpClient
from ._client import McpTransport as McpTransport
from ._client import stdio_transport as stdio_transport
from ._config import McpServerConfig as McpServerConfig
from ._config import load_mcp_config as load_mcp_config
from ._config import parse_mcp_config as parse_mcp_config
from ._errors import McpArgumentError as McpArgumentError
from ._errors import McpCallLostError as McpCallLostError
from ._errors import McpConfigError as McpConfigError
from ._errors import McpConnectionError as McpConnectionError
from ._errors import McpError as McpError
from ._errors import McpStartupTimeoutError as McpStartupTimeoutError
from ._errors import McpTimeoutError as McpTimeoutError
from ._errors import McpToolError as McpToolError
from ._tools import McpTool as McpTool
from ._tools import McpToolResult as McpToolResult

__all__ = [
    "McpArgumentError",
    "McpCallLostError",
    "McpClient",
    "McpConfigError",
    "McpConnectionError",
    "McpError",
    "McpServerConfig",
    "McpStartupTimeoutError",
    "McpTimeoutError",
    "McpTool",
    "McpToolError",
    "McpToolResult",
    "McpTransport",
    "load_mcp_config",
    "parse_mcp_config",
    "stdio_transport",
]
