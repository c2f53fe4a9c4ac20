"""AgentService: the typed API over the agent runtime, one instance per server node.

``open_agent_node(kv, ports, node_id=..., llm=...)`` assembles a node (the agent environment,
a :class:`~kelpie_agent.actors.Dispatcher` with :class:`ServiceAgentActor` as the ``agent``
kind, and the service) and runs it. The service's methods map one to one onto Letta's REST
routes; they return the agent core's values (``AgentView``, ``Block``, ``TurnResult``, ...,
rendered to Letta's JSON by ``letta_json``/``render_messages`` and the HTTP layer) and fail
with a :class:`ServiceError` that carries the HTTP status, a one-line detail and whether
retrying helps. Agents are listed from an index kept in the agents' own transactions, and a
message retried with the same ``otid`` runs exactly once. See docs/service.md.
"""

from ._actor import ServiceAgentActor as ServiceAgentActor
from ._directory import ModelInfo as ModelInfo
from ._directory import ToolHit as ToolHit
from ._errors import ConflictError as ConflictError
from ._errors import InvalidError as InvalidError
from ._errors import NotFoundError as NotFoundError
from ._errors import ServiceError as ServiceError
from ._errors import UnavailableError as UnavailableError
from ._errors import translate as translate
from ._index import RepairReport as RepairReport
from ._messaging import MessageStream as MessageStream
from ._node import open_agent_node as open_agent_node
from ._service import AgentService as AgentService
from ._types import ServiceOptions as ServiceOptions

__all__ = [
    "AgentService",
    "ConflictError",
    "InvalidError",
    "MessageStream",
    "ModelInfo",
    "NotFoundError",
    "RepairReport",
    "ServiceAgentActor",
    "ServiceError",
    "ServiceOptions",
    "ToolHit",
    "UnavailableError",
    "open_agent_node",
    "translate",
]
