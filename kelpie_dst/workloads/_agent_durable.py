"""Durability, checked in the database itself, at every acknowledgement and every restart.

Reading the simulated database host's store directly (no faults, no node, no request) is what
a reviewer with a debugger would do: when a client has just been told "done", is it in the
database? An acknowledgement that runs ahead of its durable write is caught at the very
acknowledgement, even if no crash follows; recovery that loses or duplicates messages is
caught at the next restart, not only at the end of the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from kelpie_agent.agent import Keys, UserMessage
from kelpie_agent.agent._codec import unpack

from ..shims._storage import SimKVStore
from ._agent_checks import Ack

__all__ = ["check_durable"]


def check_durable(store: SimKVStore, agent_id: str, acks: Sequence[Ack], when: str) -> list[str]:
    """``acks``: the acknowledged sends of the agent whose server id is ``agent_id``, in the
    order they were acknowledged. Each input is stored exactly once, in that order, with every
    response message the client was given."""
    keys = Keys(agent_id)
    try:
        rows = store._scan(keys.messages, Keys.prefix_end(keys.messages), None, False)
    except Exception:  # a corrupted value: the final read-back reports what it cannot read
        return []
    records = []
    for _, value in rows:
        try:
            records.append(unpack(value))
        except Exception:
            continue
    problems = []
    where = f"{when}: {acks[0].agent}" if acks else when
    for message_id, n in Counter(r.id for r in records).items():
        if n > 1:
            problems.append(f"{where}: message {message_id} is stored {n} times")
    stored_ids = {r.id for r in records}
    last_seq, last_index = -1, 0
    for ack in acks:
        inputs = [r for r in records if isinstance(r, UserMessage) and r.otid == ack.otid]
        if len(inputs) != 1:
            problems.append(
                f"{where}: acknowledged message #{ack.index} ({ack.otid}) is stored "
                f"{len(inputs)} times in the database"
            )
            continue
        if inputs[0].seq <= last_seq:
            problems.append(
                f"{where}: acknowledged message #{ack.index} is stored before #{last_index}"
            )
        last_seq, last_index = inputs[0].seq, ack.index
        missing = [m for m in ack.message_ids if m not in stored_ids]
        if missing:
            problems.append(
                f"{where}: message #{ack.index}'s answer {', '.join(missing)} was acknowledged "
                "but is not in the database"
            )
    return problems
