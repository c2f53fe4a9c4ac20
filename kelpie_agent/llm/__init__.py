"""The LLM port: one model call with tools, whole (``complete``) or streamed (``stream``).

kelpie_agent reaches language models only through :class:`LlmClient`. Production uses
:class:`AnthropicLlm` (the official ``anthropic`` SDK); simulation uses
``kelpie_dst.shims.llm`` (a direct ``SimLlmClient``, or a simulated Anthropic API host that
``AnthropicLlm`` itself talks to). See docs/llm.md.
"""

from typing import TYPE_CHECKING

from ._errors import LlmBadRequestError as LlmBadRequestError
from ._errors import LlmConnectionError as LlmConnectionError
from ._errors import LlmError as LlmError
from ._errors import LlmOverloadedError as LlmOverloadedError
from ._errors import LlmRateLimitedError as LlmRateLimitedError
from ._errors import LlmServerError as LlmServerError
from ._errors import LlmStreamCutError as LlmStreamCutError
from ._errors import LlmTimeoutError as LlmTimeoutError
from ._port import ChunkStream as ChunkStream
from ._port import LlmClient as LlmClient
from ._port import StreamAccumulator as StreamAccumulator
from ._types import STOP_REASONS as STOP_REASONS
from ._types import SUMMARIZER_SYSTEM as SUMMARIZER_SYSTEM
from ._types import AssistantBlock as AssistantBlock
from ._types import ContentBlock as ContentBlock
from ._types import LlmRequest as LlmRequest
from ._types import LlmResponse as LlmResponse
from ._types import Message as Message
from ._types import StopReason as StopReason
from ._types import StreamChunk as StreamChunk
from ._types import StreamEnd as StreamEnd
from ._types import TextBlock as TextBlock
from ._types import TextDelta as TextDelta
from ._types import Tool as Tool
from ._types import ToolCall as ToolCall
from ._types import ToolCallDelta as ToolCallDelta
from ._types import ToolCallStart as ToolCallStart
from ._types import ToolResult as ToolResult
from ._types import Usage as Usage

if TYPE_CHECKING:
    from ._anthropic import AnthropicLlm as AnthropicLlm

__all__ = [
    "STOP_REASONS",
    "AnthropicLlm",
    "AssistantBlock",
    "ChunkStream",
    "ContentBlock",
    "LlmBadRequestError",
    "LlmClient",
    "LlmConnectionError",
    "LlmError",
    "LlmOverloadedError",
    "LlmRateLimitedError",
    "LlmRequest",
    "LlmResponse",
    "LlmServerError",
    "LlmStreamCutError",
    "LlmTimeoutError",
    "Message",
    "StopReason",
    "StreamAccumulator",
    "StreamChunk",
    "StreamEnd",
    "TextBlock",
    "TextDelta",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallStart",
    "ToolResult",
    "Usage",
]


def __getattr__(name: str) -> object:
    # The anthropic SDK takes about a second to import: only pay for it when it is used.
    if name == "AnthropicLlm":
        from ._anthropic import AnthropicLlm

        return AnthropicLlm
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
