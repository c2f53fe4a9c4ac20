"""What the REST-surface clients share: one request at a time through the real letta_client SDK,
each retried until it is answered on the node in turn, and phases whose refused requests are
logged rather than raised (``agent_api_surface``'s :class:`SurfaceWalker`, ``agent_catalog``'s
:class:`CatalogWalker`, ``agent_directory``'s :class:`DirectoryWalker`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import letta_client

__all__ = ["SdkWalker", "sdk_method"]


def sdk_method(sdk: Any, path: str) -> Any:
    """``sdk.agents.blocks.list`` for the path ``"agents.blocks.list"``."""
    method = sdk
    for name in path.split("."):
        method = getattr(method, name)
    return method


class SdkWalker:
    """A client that drives one area of the API; ``PREFIX`` names its requests in the log."""

    PREFIX = "walker"

    def __init__(self, clients: Any, rng: Any) -> None:
        self.clients = clients
        self.rng = rng
        self.state = {"node": rng.choice(clients.world.node_names)}
        self.requests = 0
        self.problems: list[str] = []  # set by subclasses to their log's list
        # the last _create was answered on its first attempt: the server acknowledged one create
        # and no other was sent, so exactly one thing must exist (retries may race in a second)
        self.created_once = False

    async def _call(self, what: str, attempt: Callable[[Any, int], Awaitable[Any]]) -> Any:
        """One request until it is answered, on the SDK of the node in turn
        (``attempt(sdk, number)``; number 1 is the first attempt)."""
        self.requests += 1
        key = f"{self.PREFIX} #{self.requests} {what}"

        async def on(node: str, number: int) -> Any:
            return await attempt(self.clients.link.sdk(node), number)

        return await self.clients._call(key, "", on, self.rng, self.state)

    async def _sdk(self, path: str, *args: Any, **kwargs: Any) -> Any:
        """``sdk.<path>(*args, **kwargs)`` until it is answered (for calls safe to repeat)."""

        async def attempt(sdk: Any, _: int) -> Any:
            return await sdk_method(sdk, path)(*args, **kwargs)

        return await self._call(path, attempt)

    async def _create(self, what: str, find: Callable[[Any], Awaitable[Any]], make: Any) -> Any:
        """Made once: a retry first looks the thing up (the first attempt may have landed),
        and again if its create collides with the name (a first attempt still in flight
        landed between the look-up and the create)."""

        tries = [0]

        async def attempt(sdk: Any, number: int) -> Any:
            tries[0] = number
            if number > 1:
                found = await find(sdk)
                if found is not None:
                    return found
            try:
                return await make(sdk)
            except (letta_client.BadRequestError, letta_client.ConflictError):
                found = await find(sdk) if number > 1 else None
                if found is None:
                    raise
                return found

        made = await self._call(what, attempt)
        self.created_once = tries[0] == 1
        return made

    async def _phases(
        self,
        phases: Sequence[Callable[[], Awaitable[None]]],
        ready: Callable[[Callable[[], Awaitable[None]]], bool],
    ) -> None:
        """Run each phase that is ``ready``; a request the client must not retry ends its phase
        and is recorded in ``problems``."""
        for phase in phases:
            if not ready(phase):
                continue
            try:
                await phase()
            except Exception as error:
                name = phase.__name__.strip("_")
                self.problems.append(f"{self.PREFIX} {name}: {type(error).__name__}: {error}")
