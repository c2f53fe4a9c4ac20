"""Simulated stand-ins for kelpie_agent's ports: storage, LLM, sandbox, MCP, clock and ids.

Importing this package registers every shim fault domain (``storage.*``, ``llm.*``,
``sandbox.*``, ``mcp.*``) with the fault registry. The MCP shim needs the ``mcp`` SDK, whose
import is slow (~2 s), so :class:`SimMcpServer`, :class:`SimTool` and
:func:`sim_mcp_transport` load on first use.
"""

from typing import TYPE_CHECKING, Any

from . import _mcp_faults as _mcp_faults  # registers mcp.* faults
from ._ports import sim_ports as sim_ports
from ._sandbox import SimSandbox as SimSandbox
from ._sandbox import SimTimings as SimTimings
from ._sandbox_faults import FaultySandbox as FaultySandbox
from ._sandbox_faults import open_sandbox as open_sandbox
from ._storage import SimKV as SimKV
from ._storage import SimKVStore as SimKVStore
from ._storage_faults import FaultyKV as FaultyKV
from ._storage_faults import open_direct_kv as open_direct_kv
from ._storage_faults import open_kv as open_kv
from .llm import FAULTS as _LLM_FAULTS  # noqa: F401  (registers llm.* faults)
from .llm import AdversarialPolicy as AdversarialPolicy
from .llm import AnthropicApiHost as AnthropicApiHost
from .llm import HelpfulPolicy as HelpfulPolicy
from .llm import LlmTiming as LlmTiming
from .llm import ScriptedPolicy as ScriptedPolicy
from .llm import SimLlmClient as SimLlmClient
from .llm import StreamShape as StreamShape
from .llm import policy_from_dict as policy_from_dict
from .llm import start_anthropic_host as start_anthropic_host

if TYPE_CHECKING:
    from ._mcp import SimMcpServer as SimMcpServer
    from ._mcp import SimTool as SimTool
    from ._mcp import sim_mcp_transport as sim_mcp_transport

_LAZY = {"SimMcpServer", "SimTool", "sim_mcp_transport"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import _mcp

        return getattr(_mcp, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AdversarialPolicy",
    "AnthropicApiHost",
    "FaultyKV",
    "FaultySandbox",
    "HelpfulPolicy",
    "LlmTiming",
    "ScriptedPolicy",
    "SimKV",
    "SimKVStore",
    "SimLlmClient",
    "SimMcpServer",
    "SimSandbox",
    "SimTimings",
    "SimTool",
    "StreamShape",
    "open_direct_kv",
    "open_kv",
    "open_sandbox",
    "policy_from_dict",
    "sim_mcp_transport",
    "sim_ports",
    "start_anthropic_host",
]
