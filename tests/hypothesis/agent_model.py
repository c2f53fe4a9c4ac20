"""The agent server machine's model: what the server may hold, given what its clients saw.

Each agent has a :class:`~kelpie_dst.hypothesis.Register` per memory block, and
:class:`~kelpie_dst.hypothesis.ExactlyOnce` sets of its user messages (by otid) and archival
passages (by text, unique per insert). Agents themselves are created with unique names, so an
agent whose create got no answer is recognised when a listing shows it (``maybe_created``), and
deleted with an unknown outcome (``deleting``: it may vanish at any time).

The honest part: a request with an unknown outcome may land now, later or never, so the model
never assumes it did not happen; observing the server narrows it down. A rejected request
must have changed nothing: that is the server's claim, checked here too.
"""

from __future__ import annotations

from typing import Any

import attrs

from kelpie_dst.hypothesis import ExactlyOnce, Outcome, Register

from .agent_drivers import BLOCKS, Listed, Reply, Sent


@attrs.define
class AgentModel:
    agent_id: str
    name: str
    blocks: dict[str, Register[str]] = attrs.field(
        factory=lambda: {label: Register.of(value) for label, value in BLOCKS.items()}
    )
    messages: ExactlyOnce[str] = attrs.field(factory=ExactlyOnce)  # otids
    texts: dict[str, str] = attrs.field(factory=dict)  # otid -> the text sent with it
    runs: dict[str, str] = attrs.field(factory=dict)  # otid -> its run, once acknowledged
    passages: ExactlyOnce[str] = attrs.field(factory=ExactlyOnce)  # texts
    deleting: bool = False  # a delete got no answer: it may vanish at any time
    gone: bool = False  # deleted for sure: every request on it is a 404

    @property
    def live(self) -> bool:
        return not (self.gone or self.deleting)


@attrs.define
class Model:
    agents: dict[str, AgentModel] = attrs.field(factory=dict)  # by id, in creation order
    maybe_created: set[str] = attrs.field(factory=set)  # names of creates with no answer
    counter: int = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # -- what requests did ---------------------------------------------------------------------
    def created(self, name: str, reply: Reply[str]) -> None:
        if reply.outcome is Outcome.OK:
            agent_id = reply.get()
            assert agent_id not in self.agents, f"create {name} returned existing {agent_id}"
            self.agents[agent_id] = AgentModel(agent_id, name)
        elif reply.outcome is Outcome.UNKNOWN:
            self.maybe_created.add(name)

    def answered(self, agent: AgentModel, reply: Reply[Any], what: str) -> bool:
        """Check a reply about ``agent`` for what deletion implies; True if it was applied."""
        if reply.status == 404:
            assert not agent.live, f"{what}: acknowledged agent {agent.agent_id} not found"
            agent.gone, agent.deleting = True, False
            return False
        assert not (agent.gone and reply.outcome is Outcome.OK), (
            f"{what}: deleted agent {agent.agent_id} answered {reply.value!r}"
        )
        return reply.outcome is Outcome.OK

    def deleted(self, agent: AgentModel, reply: Reply[None]) -> None:
        if self.answered(agent, reply, "delete"):
            agent.gone, agent.deleting = True, False
        elif reply.outcome is Outcome.UNKNOWN and not agent.gone:
            agent.deleting = True

    def sent(self, agent: AgentModel, otid: str, reply: Reply[Sent]) -> None:
        if self.answered(agent, reply, f"send {otid}"):
            sent = reply.get()
            expected = f"echo: {agent.texts[otid]}"
            assert sent.reply == expected, f"{otid}: reply {sent.reply!r}, expected {expected!r}"
            assert sent.stop_reason == "end_turn", f"{otid}: stop reason {sent.stop_reason}"
            run = agent.runs.setdefault(otid, sent.run_id)
            assert sent.run_id == run, f"{otid}: answered by run {sent.run_id}, before by {run}"
        if not agent.gone:
            agent.messages.add(otid, reply.outcome)

    def edited(self, agent: AgentModel, label: str, edits: list[tuple[str, Reply[str]]]) -> None:
        """Edits of one block (several if they were sent at the same time)."""
        for value, reply in edits:
            if self.answered(agent, reply, f"edit {label}"):
                assert reply.get() == value, f"edit {label}={value!r} answered {reply.value!r}"
        if not agent.gone:
            agent.blocks[label].write_concurrently((v, r.outcome) for v, r in edits)

    def inserted(self, agent: AgentModel, text: str, reply: Reply[None]) -> None:
        self.answered(agent, reply, f"insert {text!r}")
        if not agent.gone:
            agent.passages.add(text, reply.outcome)

    def searched(self, agent: AgentModel, query: str, reply: Reply[list[str]]) -> None:
        if self.answered(agent, reply, f"search {query!r}"):
            hits = reply.get()
            agent.passages.observe_some(hits, f"{agent.agent_id}: search {query!r}")
            if query in agent.passages.acked:
                assert query in hits, f"{agent.agent_id}: search {query!r} found {hits}"

    # -- what the server holds -------------------------------------------------------------------
    def listed(self, listing: list[Listed]) -> list[AgentModel]:
        """Check a complete listing of the agents and their blocks; returns the agents to check
        in detail."""
        ids = [entry.agent_id for entry in listing]
        assert len(ids) == len(set(ids)), f"agents listed twice: {ids}"
        for entry in listing:
            agent = self.agents.get(entry.agent_id)
            if agent is None:
                assert entry.name in self.maybe_created, f"unexpected agent {entry}"
                self.maybe_created.discard(entry.name)  # its create did land: adopt it
                agent = self.agents[entry.agent_id] = AgentModel(entry.agent_id, entry.name)
            assert not agent.gone, f"deleted agent {entry.agent_id} is listed"
            assert agent.name == entry.name, f"{entry.agent_id} is named {entry.name}"
            blocks = dict(entry.blocks)
            assert sorted(blocks) == sorted(BLOCKS), f"{entry.agent_id} has blocks {blocks}"
            for label, register in sorted(agent.blocks.items()):
                register.observe(blocks[label], f"{entry.agent_id} block {label}")
        for agent in self.agents.values():
            if agent.deleting and agent.agent_id not in ids:
                agent.gone, agent.deleting = True, False  # the delete landed
            assert agent.gone or agent.agent_id in ids, f"agent {agent.agent_id} not listed"
        return [agent for agent in self.agents.values() if not agent.gone]
