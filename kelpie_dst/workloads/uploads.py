"""Uploads to folders under crashes, as a scenario workload (see ``_agent_uploads``)."""

from ._agent_uploads import agent_uploads as agent_uploads
from ._agent_uploads import uploads_never_half_indexed as uploads_never_half_indexed

__all__ = ["agent_uploads", "uploads_never_half_indexed"]
