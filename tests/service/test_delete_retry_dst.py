"""A delete whose outcome was unknown, retried by the service, is answered as done when its
retry finds the thing gone: the client's one request deleted it, so a 404 would tell the
client something false (found by agent_deletes, session 17: a node paused for 10 s while it
handled ``DELETE /v1/conversations/{id}``, its lease lapsed after the delete had committed, and
the service's retry answered 404 for the conversation it had deleted)."""

from __future__ import annotations

from typing import Any

import pytest

import kelpie_dst
from kelpie_agent.actors import LeaseLostError
from kelpie_agent.agent import DeleteConversation, DetachFolder
from kelpie_agent.service import NotFoundError
from kelpie_agent.service import _folders as folders

from .harness import otto, service_node


def lapse_after(service: Any, kind: type, lost: list[Any]) -> None:
    """The next request of ``kind`` commits, then its lease lapses: the service sees a
    ``LeaseLostError`` (an unknown outcome) for a request that did land. Each lapse is noted
    in ``lost`` (the request); clear it to arm the next one."""
    dispatcher = service.dispatcher
    real = dispatcher.request

    async def request(actor: Any, message: object) -> Any:
        answer = await real(actor, message)
        if isinstance(message, kind) and not lost:
            lost.append(message)
            raise LeaseLostError(f"actor {actor}: lost its lease while handling the request")
        return answer

    dispatcher.request = request


@pytest.mark.dst(seeds=2, guards="strict")
async def test_a_conversation_delete_whose_lease_lapsed_after_its_commit_is_not_a_404() -> None:
    async with service_node(sandbox=False) as service:
        agent = (await service.create_agent(otto())).agent.id
        kept, gone = [
            (await service.create_conversation(agent, summary=f"thread {n}")).id for n in range(2)
        ]
        lost: list[Any] = []
        lapse_after(service, DeleteConversation, lost)
        await service.delete_conversation(gone)  # no NotFoundError: it did delete it
        assert [m.conversation_id for m in lost] == [gone]
        with pytest.raises(NotFoundError):
            await service.get_conversation(gone)
        assert (await service.get_conversation(kept)).id == kept
        with pytest.raises(NotFoundError):  # a delete of what is not there is still a 404
            await service.delete_conversation(gone)
    kelpie_dst.log("test.done", lost=[m.conversation_id for m in lost])


@pytest.mark.dst(seeds=2, guards="strict")
async def test_a_folder_detach_whose_lease_lapsed_after_its_commit_is_not_a_404() -> None:
    """The same for ``agents.folders.detach`` (and so for a folder's delete, which detaches
    it from its agents first): the retry found the folder no longer attached."""
    async with service_node(sandbox=False) as service:
        agent = (await service.create_agent(otto())).agent.id
        folder = await folders.create_folder(service, "docs")
        await folders.attach_folder(service, agent, folder.id)
        lost: list[Any] = []
        lapse_after(service, DetachFolder, lost)
        view = await folders.detach_folder(service, agent, folder.id)
        assert [m.folder_id for m in lost] == [folder.id] and view.agent.folder_ids == ()
        await folders.attach_folder(service, agent, folder.id)
        lost.clear()
        await folders.delete_folder(service, folder.id)
        assert [m.folder_id for m in lost] == [folder.id]
        with pytest.raises(NotFoundError):
            await folders.get_folder(service, folder.id)
