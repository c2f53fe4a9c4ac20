"""Bodies of the MCP server routes (Letta's ``mcp_servers``): the three server kinds (stdio,
SSE, Streamable HTTP) as created, updated and shown. Secrets (env values, ``auth_token``,
custom header values) are shown masked; a masked value sent back keeps the stored one."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import StringConstraints, WithJsonSchema

from kelpie_agent.service._mcp_servers import MASK, McpServerRecord

from ._models_common import NonBlank, RequestModel, ResponseModel

__all__ = [
    "McpServer",
    "McpServerCreate",
    "McpServerUpdate",
    "SseServer",
    "StdioServer",
    "StreamableHttpServer",
    "server_out",
]

ServerName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
Url = Annotated[str, StringConstraints(pattern=r"^https?://[^\s]+$")]
_HEADER = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"
HeaderName = Annotated[str, StringConstraints(pattern=_HEADER)]
# Header names to values. Stated whole in the schema: with only ``patternProperties`` a key
# that does not match would be allowed any value, where the server refuses the key.
Headers = Annotated[
    dict[HeaderName, str],
    WithJsonSchema(
        {
            "type": "object",
            "patternProperties": {_HEADER: {"type": "string"}},
            "additionalProperties": False,
        }
    ),
]


class StdioConfig(RequestModel):
    command: NonBlank
    args: list[str]
    env: dict[str, str] | None = None
    mcp_server_type: Literal["stdio"] = "stdio"


class SseConfig(RequestModel):
    server_url: Url
    auth_header: HeaderName | None = None
    auth_token: str | None = None
    custom_headers: Headers | None = None
    mcp_server_type: Literal["sse"]


class HttpConfig(RequestModel):
    server_url: Url
    auth_header: HeaderName | None = None
    auth_token: str | None = None
    custom_headers: Headers | None = None
    mcp_server_type: Literal["streamable_http"] = "streamable_http"


class McpServerCreate(RequestModel):
    server_name: ServerName
    config: StdioConfig | SseConfig | HttpConfig


class UpdateConfig(RequestModel):
    """Any kind's fields, all optional: those given replace the stored ones (they must belong
    to the server's kind)."""

    command: NonBlank | None = None
    args: list[str] | None = None
    env: dict[str, str] | None = None
    server_url: Url | None = None
    auth_header: HeaderName | None = None
    auth_token: str | None = None
    custom_headers: Headers | None = None
    mcp_server_type: Literal["stdio", "sse", "streamable_http"] | None = None

    def changes(self) -> dict[str, Any]:
        return {
            k: v for k, v in self.model_dump(exclude_unset=True).items() if k != "mcp_server_type"
        }


class McpServerUpdate(RequestModel):
    config: UpdateConfig
    server_name: ServerName | None = None


class StdioServer(ResponseModel):
    id: str
    server_name: str
    command: str
    args: list[str]
    env: dict[str, str] | None = None
    mcp_server_type: Literal["stdio"] = "stdio"


class _UrlServer(ResponseModel):
    id: str
    server_name: str
    server_url: str
    auth_header: str | None = None
    auth_token: str | None = None
    custom_headers: dict[str, str] | None = None


class SseServer(_UrlServer):
    mcp_server_type: Literal["sse"] = "sse"


class StreamableHttpServer(_UrlServer):
    mcp_server_type: Literal["streamable_http"] = "streamable_http"


McpServer = StdioServer | SseServer | StreamableHttpServer


def _masked(values: Any) -> dict[str, str] | None:
    return None if values is None else dict.fromkeys(values, MASK)


def server_out(record: McpServerRecord) -> McpServer:
    if record.mcp_server_type == "stdio":
        return StdioServer(
            id=record.id,
            server_name=record.server_name,
            command=record.command or "",
            args=list(record.args),
            env=_masked(record.env),
        )
    cls = SseServer if record.mcp_server_type == "sse" else StreamableHttpServer
    return cls(
        id=record.id,
        server_name=record.server_name,
        server_url=record.server_url or "",
        auth_header=record.auth_header,
        auth_token=MASK if record.auth_token else record.auth_token,
        custom_headers=_masked(record.custom_headers),
    )
