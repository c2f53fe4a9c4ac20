"""Agent files (Letta's ``.af``): ``GET /v1/agents/{agent_id}/export`` and
``POST /v1/agents/import`` (multipart: ``file`` and options as form fields)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse

from kelpie_agent.service import InvalidError
from kelpie_agent.service._portability import export_agent_file, import_agent_file_to

from ._context import current_service
from ._models_common import ResponseModel
from ._params import AgentId
from ._routing import ERROR_RESPONSES

__all__ = ["agent_files_router"]

MAX_FILE = 64 * 1024 * 1024


class ImportedAgents(ResponseModel):
    agent_ids: list[str]


def agent_files_router() -> APIRouter:
    router = APIRouter(tags=["agents"], responses=ERROR_RESPONSES)

    @router.get("/v1/agents/{agent_id}/export", response_model=None)
    async def export_file(agent_id: AgentId, scrub_messages: bool = False) -> JSONResponse:
        """The agent as an agent file (Letta's v2 format): its settings, blocks, tools, tool
        rules, folders with their files, and messages (none with ``scrub_messages``)."""
        document = await export_agent_file(
            current_service(), agent_id, scrub_messages=scrub_messages
        )
        return JSONResponse(document)

    @router.post("/v1/agents/import")
    async def import_file(
        request: Request,
        file: Annotated[UploadFile, File()],
        append_copy_suffix: Annotated[bool, Form()] = True,
        override_existing_tools: Annotated[bool, Form()] = True,
        strip_messages: Annotated[bool, Form()] = False,
        name: Annotated[str | None, Form()] = None,
        override_name: Annotated[str | None, Form()] = None,
        model: Annotated[str | None, Form()] = None,
        override_model_handle: Annotated[str | None, Form()] = None,
    ) -> ImportedAgents:
        """Create the agents of an agent file (new ids; names get ``_copy`` unless
        ``append_copy_suffix`` is false or ``name`` is given)."""
        if "x-override-embedding-model" in request.headers:
            raise InvalidError(
                "header.x-override-embedding-model",
                "not supported: Kelpie embeds with the node's embedder",
            )
        raw = await file.read(MAX_FILE + 1)
        options: dict[str, Any] = {
            "name": name or override_name,
            "append_copy_suffix": append_copy_suffix,
            "override_existing_tools": override_existing_tools,
            "strip_messages": strip_messages,
            "model": model or override_model_handle,
        }
        if len(raw) > MAX_FILE:
            raise InvalidError("file", f"larger than {MAX_FILE} bytes", status=400)
        ids = await import_agent_file_to(current_service(), raw, **options)
        return ImportedAgents(agent_ids=ids)

    return router
