"""Tool approvals across crashes, as a scenario workload (see ``_agent_approvals``)."""

from ._agent_approvals import agent_approvals as agent_approvals
from ._agent_approvals import approvals_exactly_as_answered as approvals_exactly_as_answered

__all__ = ["agent_approvals", "approvals_exactly_as_answered"]
