"""Scheduled messages across crashes, handoffs and storage faults (``_agent_schedules``)."""

from ._agent_schedules import agent_schedules, scheduled_exactly_once

__all__ = ["agent_schedules", "scheduled_exactly_once"]
