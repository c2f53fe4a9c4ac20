"""The LLM port: one model call, whole or streamed.

kelpie_agent talks to language models only through :class:`LlmClient`. Production uses
:class:`~kelpie_agent.llm.AnthropicLlm`; simulation uses ``kelpie_dst.shims.llm.SimLlmClient``
(or the real adapter against a simulated API host). See docs/llm.md.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from types import TracebackType
from typing import Protocol

from ._types import (
    AssistantBlock,
    LlmRequest,
    LlmResponse,
    StreamChunk,
    StreamEnd,
    TextBlock,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
)

__all__ = ["ChunkStream", "LlmClient", "StreamAccumulator"]


class StreamAccumulator:
    """Builds the :class:`LlmResponse` that a sequence of chunks describes.

    Raises ``ValueError`` for chunks that break the stream's grammar: a delta for a block
    that was never opened or is of the other kind, a block index going backwards, or
    anything after the :class:`StreamEnd`.
    """

    def __init__(self) -> None:
        self._blocks: dict[int, list[str]] = {}  # index -> [kind, id, name, text...]
        self._order: list[int] = []
        self.end: StreamEnd | None = None

    def add(self, chunk: StreamChunk) -> None:
        if self.end is not None:
            raise ValueError(f"chunk after the end of the stream: {chunk!r}")
        if isinstance(chunk, StreamEnd):
            self.end = chunk
            return
        index = chunk.index
        block = self._blocks.get(index)
        if isinstance(chunk, TextDelta):
            if block is None:
                block = self._open(index, ["text", "", ""])
            elif block[0] != "text":
                raise ValueError(f"text delta for tool call block {index}")
            block.append(chunk.text)
        elif isinstance(chunk, ToolCallStart):
            if block is not None:
                raise ValueError(f"tool call started on block {index}, which is already open")
            self._open(index, ["tool", chunk.id, chunk.name])
        elif isinstance(chunk, ToolCallDelta):
            if block is None or block[0] != "tool":
                raise ValueError(f"tool call delta for block {index}, which is no tool call")
            block.append(chunk.partial_json)
        else:
            raise ValueError(f"not a stream chunk: {chunk!r}")

    def _open(self, index: int, block: list[str]) -> list[str]:
        if self._order and index <= self._order[-1]:
            raise ValueError(f"block {index} opened after block {self._order[-1]}")
        self._order.append(index)
        self._blocks[index] = block
        return block

    def content(self) -> tuple[AssistantBlock, ...]:
        """The blocks received so far (complete or not)."""
        out: list[AssistantBlock] = []
        for index in self._order:
            kind, call_id, name, *parts = self._blocks[index]
            text = "".join(parts)
            out.append(TextBlock(text) if kind == "text" else ToolCall(call_id, name, text or "{}"))
        return tuple(out)

    def response(self) -> LlmResponse:
        """The whole response; ``ValueError`` before the :class:`StreamEnd` arrived."""
        if self.end is None:
            raise ValueError("the stream has not ended")
        end = self.end
        return LlmResponse(end.id, end.model, self.content(), end.stop_reason, end.usage)


class ChunkStream:
    """The chunks of one streamed call: an async iterator that is also an async context
    manager (``async with client.stream(req) as chunks: async for chunk in chunks: ...``).

    It closes itself when it ends or fails; leave the ``async with`` (or call :meth:`aclose`)
    to stop early. :attr:`response` is the whole answer once the stream has ended.
    """

    def __init__(self, chunks: AsyncGenerator[StreamChunk, None]) -> None:
        self._chunks = chunks
        self._acc = StreamAccumulator()

    def __aiter__(self) -> ChunkStream:
        return self

    async def __anext__(self) -> StreamChunk:
        chunk = await self._chunks.__anext__()
        self._acc.add(chunk)
        return chunk

    async def aclose(self) -> None:
        await self._chunks.aclose()

    async def __aenter__(self) -> ChunkStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def received(self) -> tuple[AssistantBlock, ...]:
        """The content received so far (the last block may be incomplete)."""
        return self._acc.content()

    @property
    def response(self) -> LlmResponse:
        """The whole response; ``ValueError`` before the stream has ended."""
        return self._acc.response()

    async def collect(self) -> LlmResponse:
        """Read the rest of the stream and return the whole response."""
        async with self:
            async for _ in self:
                pass
        return self.response


class LlmClient(Protocol):
    """A language model behind an API."""

    async def complete(self, request: LlmRequest) -> LlmResponse:
        """Send ``request``; return the whole answer. Raises :class:`LlmError` subclasses."""
        ...

    def stream(self, request: LlmRequest) -> ChunkStream:
        """Send ``request`` and stream the answer as it is generated: text deltas, tool call
        starts and argument deltas, then one :class:`StreamEnd`.

        Nothing is sent before the first ``__anext__``. Errors before the first chunk are
        raised from it; a stream that breaks off later raises
        :class:`LlmStreamCutError` (or another :class:`LlmError`) from ``__anext__``.
        """
        ...
