"""The model of the uploads workload: ``grep KTOK0007Z`` calls ``grep_files`` for the token,
``search KTOK0007Z`` calls ``semantic_search_files``; after a tool's result it answers in plain
text, which ends the turn.

``on_result`` (if given) sees each tool result as the model is shown it: the first moment the
workload can look at what a file tool answered, right after the tool ran (the tool's result
is committed in between), long before the turn is acknowledged."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from kelpie_agent.llm import LlmRequest

from ..shims.llm import Call, Reply
from ..shims.llm._turns import latest_turn

__all__ = ["FilesPolicy"]

_ASK = re.compile(r"\b(grep|search) (KTOK\d{4}Z)")


class FilesPolicy:
    def __init__(self, on_result: Callable[[str], None] | None = None) -> None:
        self.on_result = on_result

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        turn = latest_turn(request)
        if turn.kind == "tool_result":
            if self.on_result is not None:
                self.on_result(turn.text)
            return ("Those are the files I found.",)
        ask = _ASK.search(turn.text)
        if ask is None:
            return ("I only search files.",)
        verb, token = ask.groups()
        if verb == "grep" and request.tool("grep_files") is not None:
            return (Call("grep_files", {"pattern": token}),)
        if verb == "search" and request.tool("semantic_search_files") is not None:
            return (Call("semantic_search_files", {"query": token, "limit": 10}),)
        return ("I have no file tools.",)
