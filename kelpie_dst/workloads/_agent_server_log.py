"""What the agent servers' HTTP layer reported as a problem (the ``server_raised_nothing``
invariant of the agent workload).

kelpie_agent's HTTP server hands problems to a logger: an exception that escaped the API app
(the client got a 500 nobody meant to send), a response the app never finished, a connection
handler that failed. The stdlib :mod:`logging` stamps records with the wall clock, which the
strict guards refuse, so such a bug used to surface as "nondeterminism". The workload's servers
log here instead: each error or warning is kept, with the node, the request and the exception,
and the invariant names them. Debug and info records (an app that raised after its client went
away) are not problems and are dropped.
"""

from __future__ import annotations

import traceback
from typing import Any

__all__ = ["ServerLog"]

_MAX = 20


def _where(exc: BaseException) -> str:
    """The innermost frame of kelpie_agent's own code the exception passed through."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "kelpie_agent" in f.filename]
    if not frames:
        return ""
    last = frames[-1]
    short = last.filename[last.filename.rfind("kelpie_agent") :]
    return f" at {short}:{last.lineno} in {last.name}"


class NodeLog:
    """A :class:`kelpie_agent.http.ServerLogger` for one node."""

    def __init__(self, node: str, problems: list[str]) -> None:
        self.node, self.problems = node, problems

    def _keep(self, level: str, msg: object, args: tuple[object, ...], exc_info: Any) -> None:
        if len(self.problems) >= _MAX:
            return
        text = str(msg) % args if args else str(msg)
        if isinstance(exc_info, BaseException):
            text += f": {type(exc_info).__name__}: {exc_info}{_where(exc_info)}"
        self.problems.append(f"{self.node} ({level}): {text}")

    def error(self, msg: object, *args: object, exc_info: Any = None) -> None:
        self._keep("error", msg, args, exc_info)

    def warning(self, msg: object, *args: object, exc_info: Any = None) -> None:
        self._keep("warning", msg, args, exc_info)

    def info(self, msg: object, *args: object, exc_info: Any = None) -> None:
        pass

    def debug(self, msg: object, *args: object, exc_info: Any = None) -> None:
        pass


class ServerLog:
    """The problems every node's HTTP server reported, in the order they were reported."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def node(self, name: str) -> NodeLog:
        return NodeLog(name, self.problems)
