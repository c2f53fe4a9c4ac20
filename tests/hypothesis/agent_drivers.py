"""How the agent server machine talks to the server: one interface, two drivers.

A :class:`Driver` sends one request to one server node and reports what a client learns: a
:class:`Reply` with an :class:`~kelpie_dst.hypothesis.Outcome`. It never retries and never
judges; the machine compares replies with its model.

* :class:`ServiceDriver` calls the node's ``AgentService`` directly (a client in the same
  process, as the HTTP layer is). It trusts the service's own account of an error:
  ``UnavailableError.outcome_unknown`` says whether the request may have been applied; every
  other error, or a node that is down, means it was not. The machine checks that claim.
* :class:`~tests.hypothesis.agent_http.HttpDriver` uses the real ``letta_client`` SDK over the
  simulated network.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, Generic, Protocol, TypeVar

import attrs

import kelpie_dst
from kelpie_agent.agent import BlockCreate, CreateAgent, InputMessage, UserMessage
from kelpie_agent.service import AgentService, ServiceError, UnavailableError
from kelpie_dst.hypothesis import Outcome

from .agent_world import running_service

T = TypeVar("T")
AGENT_TYPE: Final = "letta_v1_agent"
BLOCKS = {"persona": "I am Otto.", "human": ""}  # every agent starts with these
PAGE = 1000  # enough for any example: one page
# The errors a correct server may answer the machine's (valid) requests with: the agent is gone,
# the request took too long to arrive, or the server could not serve it. Anything else fails.
EXPECTED = (404, 408, 503)


@attrs.frozen
class Reply(Generic[T]):
    """What a client learned from one request. ``status``: the error's HTTP status (0: no
    answer, or the node refused the connection)."""

    outcome: Outcome
    value: T | None = None
    status: int = 0
    detail: str = ""

    def get(self) -> T:
        assert self.outcome is Outcome.OK and self.value is not None, self
        return self.value


@attrs.frozen
class Listed:
    """An agent as a listing shows it: its id, its name and its blocks' values by label."""

    agent_id: str
    name: str
    blocks: tuple[tuple[str, str], ...]


@attrs.frozen
class Sent:
    """An acknowledged message: its run, the assistant's reply and the stop reason."""

    run_id: str
    reply: str
    stop_reason: str


class Driver(Protocol):
    """One request to server node ``node`` per call (all run on ``main``, in a step)."""

    name: str

    async def start(self) -> None: ...

    async def create_agent(self, node: str, name: str) -> Reply[str]: ...

    async def delete_agent(self, node: str, agent_id: str) -> Reply[None]: ...

    async def send_message(
        self, node: str, agent_id: str, text: str, otid: str, stream: bool
    ) -> Reply[Sent]: ...

    async def update_block(
        self, node: str, agent_id: str, label: str, value: str
    ) -> Reply[str]: ...

    async def insert_passage(self, node: str, agent_id: str, text: str) -> Reply[None]: ...

    async def search_passages(self, node: str, agent_id: str, query: str) -> Reply[list[str]]: ...

    async def list_agents(self, node: str) -> Reply[list[Listed]]: ...

    async def user_otids(self, node: str, agent_id: str) -> Reply[list[str]]: ...

    async def passages(self, node: str, agent_id: str) -> Reply[list[str]]: ...


class ServiceDriver:
    """Calls ``AgentService`` on the node, as a client in the same process would."""

    name = "service"

    async def start(self) -> None:
        pass

    async def _call(self, node: str, op: Callable[[AgentService], Awaitable[T]]) -> Reply[T]:
        sim = kelpie_dst.current_simulation()
        assert sim is not None
        service = running_service(sim, node)
        if service is None:
            return Reply(Outcome.REJECTED, detail=f"{node} is down")
        try:
            return Reply(Outcome.OK, await op(service))
        except UnavailableError as error:
            outcome = Outcome.UNKNOWN if error.outcome_unknown else Outcome.REJECTED
            return Reply(outcome, status=error.status, detail=error.detail)
        except ServiceError as error:
            assert error.status in EXPECTED, f"{node} answered {error.status}: {error.detail}"
            return Reply(Outcome.REJECTED, status=error.status, detail=error.detail)

    async def create_agent(self, node: str, name: str) -> Reply[str]:
        blocks = tuple(BlockCreate(label, value) for label, value in BLOCKS.items())
        request = CreateAgent(name=name, agent_type=AGENT_TYPE, memory_blocks=blocks)

        async def op(service: AgentService) -> str:
            return (await service.create_agent(request)).agent.id

        return await self._call(node, op)

    async def delete_agent(self, node: str, agent_id: str) -> Reply[None]:
        return await self._call(node, lambda s: s.delete_agent(agent_id))

    async def send_message(
        self, node: str, agent_id: str, text: str, otid: str, stream: bool
    ) -> Reply[Sent]:
        messages = (InputMessage("user", text, otid=otid),)

        async def op(service: AgentService) -> Sent:
            if stream:
                async with service.stream_message(agent_id, messages) as events:
                    async for _ in events:
                        pass
                result = events.result
                assert result is not None
            else:
                result = await service.send_message(agent_id, messages)
            return Sent(result.run_id, result.reply, result.stop_reason)

        return await self._call(node, op)

    async def update_block(self, node: str, agent_id: str, label: str, value: str) -> Reply[str]:
        async def op(service: AgentService) -> str:
            return (await service.update_agent_block(agent_id, label, value=value)).value

        return await self._call(node, op)

    async def insert_passage(self, node: str, agent_id: str, text: str) -> Reply[None]:
        async def op(service: AgentService) -> None:
            await service.insert_passage(agent_id, text)

        return await self._call(node, op)

    async def search_passages(self, node: str, agent_id: str, query: str) -> Reply[list[str]]:
        async def op(service: AgentService) -> list[str]:
            return [hit.passage.text for hit in await service.search_passages(agent_id, query)]

        return await self._call(node, op)

    async def list_agents(self, node: str) -> Reply[list[Listed]]:
        async def op(service: AgentService) -> list[Listed]:
            found: list[Listed] = []
            page = await service.list_agents(limit=5)
            while page:  # Letta's cursors: after=<last id>
                for view in page:
                    blocks = tuple((b.label, b.value) for b in view.blocks)
                    found.append(Listed(view.agent.id, view.agent.name, blocks))
                page = await service.list_agents(limit=5, after=page[-1].agent.id)
            return found

        return await self._call(node, op)

    async def user_otids(self, node: str, agent_id: str) -> Reply[list[str]]:
        async def op(service: AgentService) -> list[str]:
            history = await service.list_messages(agent_id, limit=PAGE, order="asc")
            assert len(history) < PAGE
            return [str(m.otid) for m in history if isinstance(m, UserMessage)]

        return await self._call(node, op)

    async def passages(self, node: str, agent_id: str) -> Reply[list[str]]:
        async def op(service: AgentService) -> list[str]:
            found = await service.list_passages(agent_id, limit=PAGE)
            assert len(found) < PAGE
            return [p.text for p in found]

        return await self._call(node, op)
