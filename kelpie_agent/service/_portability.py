"""Agent files through the service: export an agent as Letta's ``.af`` document, and import
one (``agents.export_file`` / ``agents.import_file``).

Both are functions of an :class:`AgentService` rather than methods, so the service class stays
the one place for agent requests. Export reads the agent's records with the service's retrying
reader (a read never activates the agent). Import creates the file's tools (by name), blocks
and folders with their files, then each agent through ``create_agent`` (its history rides in
the create request and is committed with the agent) and attaches its folders and open files
through the agent's actor. Its files are uploads like any other: stored ``pending`` with
their text (``open_files`` and ``grep_files`` work at once) and processed in the background
on this node (``semantic_search_files`` finds them once embedded; a crash leaves the job to
the next node that starts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kelpie_agent.agent import AgentView, CreateAgent, FolderStore, InvalidRequestError
from kelpie_agent.agent._af_export import export_agent
from kelpie_agent.agent._af_import import import_agent_file
from kelpie_agent.agent._agent_file import parse_agent_file

from ._errors import InvalidError, translate
from ._folders import process_until_done

if TYPE_CHECKING:
    from ._service import AgentService

__all__ = ["export_agent_file", "import_agent_file_to"]


async def export_agent_file(
    service: AgentService, agent_id: str, *, scrub_messages: bool = False
) -> dict[str, Any]:
    """The agent file of ``agent_id`` (a JSON-ready dict)."""
    await service._agent(agent_id)  # NotFoundError / InvalidError for a bad id
    try:
        return await export_agent(
            service.kv,
            service.read,
            agent_id,
            now=service.ports.clock.now(),
            scrub_messages=scrub_messages,
        )
    except Exception as error:
        mapped = translate(error)
        if mapped is None:
            raise
        raise mapped from error


async def import_agent_file_to(
    service: AgentService,
    raw: bytes,
    *,
    name: str | None = None,
    append_copy_suffix: bool = True,
    override_existing_tools: bool = True,
    strip_messages: bool = False,
    model: str | None = None,
) -> list[str]:
    """Import every agent of the agent file ``raw``; returns the new agent ids."""
    service._check_running()
    try:
        plan = parse_agent_file(raw)
    except InvalidRequestError as error:
        raise InvalidError("file", str(error), status=400) from None

    async def create(request: CreateAgent) -> AgentView:
        return await service.create_agent(request, include_base_tools=False)

    async def request(agent_id: str, message: object) -> Any:
        return await service._request(agent_id, message)

    def uploaded(file_id: str) -> None:
        service._spawn(f"processing file {file_id}", lambda: process_until_done(service, file_id))

    try:
        return await import_agent_file(
            plan,
            tools=service.tool_store,
            blocks=service.block_store,
            folders=FolderStore(service.kv, service.ports),
            create=create,
            request=request,
            name=name,
            append_copy_suffix=append_copy_suffix,
            override_existing_tools=override_existing_tools,
            strip_messages=strip_messages,
            model=model,
            uploaded=uploaded,
        )
    except Exception as error:
        mapped = translate(error)
        if mapped is None:
            raise
        raise mapped from error
