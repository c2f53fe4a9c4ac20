"""The MCP catalog walked (svcU, session 24): servers, their tools, refusals and runs.

With the ``agent_mcp_servers`` workload's ``catalog`` param (off by default), the first node
also walks the catalog of managed MCP servers as a user of ``/v1/mcp-servers`` does, beside
the churned ``ticker``: two servers of its own (each a ``SimMcpServer`` of its own, reached
by its command, so ``mcp.*`` faults apply) and a plain custom tool. What the walk judges
(``mcp_catalog_consistent``), for every route of the catalog rather than one:

- **a server answers only for its own tools**: asking server X for a tool (retrieve or run)
  that X does not list (another server's, a plain tool) is a 404 and runs nothing;
- **a refused request changes nothing**: after a create or a rename refused with a 409 (the
  name is taken), the servers and every MCP tool (id, name, server, tags) are as before;
- **what a create or a refresh returns is in force**: once a create returned with no MCP fault
  fired meanwhile, or a refresh returned, the server's tools are the ones it lists;
- **a success carries the server's answer**: a run of a server's tool that answers success
  ran on the server exactly once and returns what the server answered for it (a call cut by a
  crash or a timeout is an error, never an empty success); with ``catalog_errors`` (svcW,
  session 26) the tools refuse every third ``n`` with an error result (``isError``), and such
  a run must answer an error: **the status is the server's**;
- **no tool outlives or mislabels its server**: after a rename the tools name the new name and
  none the old one; after a delete none names the deleted server;
- **a request changes only its own server**: after each step, every server of the walk still
  has exactly the tools it lists (a create, refresh, rename or delete of another server, or a
  refused request, took none of them away and added none).

With ``catalog_changes`` (apiV, session 25) the servers' listings change while they run: after
the runs, cat-alpha drops ``a_two`` and offers ``a_three``, cat-beta adds ``b_two``, and each
is refreshed until a refresh returns; then both change back, and are refreshed again. From
then on what a server lists now is what the checks above hold its tools to: a refresh that
returned while the listing it asked for was cut (the server crashed, or never answered:
``mcp.list_timeout``) must not have taken the tools it knew before as the server's answer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import attrs

from kelpie_agent.errors import KelpieError
from kelpie_agent.mcp import McpServerConfig
from kelpie_agent.service import InvalidError, NotFoundError
from kelpie_agent.service import _mcp_catalog as catalog

from ..shims._mcp import SimMcpServer, parse_tools

__all__ = ["CatalogLog", "Routed", "catalog_servers", "walk_catalog"]

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
# server name -> (command, the tools it lists)
SERVERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "cat-alpha": ("alpha-mcp", ("a_one", "a_two")),
    "cat-beta": ("beta-mcp", ("b_one",)),
}
RENAMED = "cat-gamma"  # what cat-beta is renamed to
PLAIN = '''def cat_plain(n: int) -> str:
    """A plain tool, of no MCP server.

    Args:
        n: a number.
    """
    return str(n)
'''
RUNS = 8  # runs of the servers' tools through the catalog
MCP_FAULTS = ("mcp.server_crash", "mcp.tool_timeout", "mcp.slow_start", "mcp.list_timeout")
CHANGES: tuple[dict[str, tuple[tuple[str, ...], tuple[str, ...]]], ...] = (
    # per round, server name -> (tools it stops listing, tools it starts listing)
    {"cat-alpha": (("a_two",), ("a_three",)), "cat-beta": ((), ("b_two",))},
    {"cat-alpha": (("a_three",), ("a_two",)), "cat-beta": (("b_two",), ())},
)


@attrs.define
class CatalogLog:
    """What the walk saw: executions per (tool, n), and the problems it found."""

    executed: list[tuple[str, int]] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)
    refuse_every: int = 0  # catalog_errors: a tool refuses every n divisible by this (0: none)
    refused: list[tuple[str, int]] = attrs.Factory(list)  # (tool, n) the server answered isError
    runs: int = 0
    refusals: int = 0
    done: bool = False


def tool_spec(log: CatalogLog, tool: str) -> dict[str, Any]:
    """A walk server's tool: it answers ``"<tool> <n>"`` and logs the run; with
    ``catalog_errors`` it refuses every ``log.refuse_every``-th n (it ran, and answers an
    error result: ``isError``, as a real server does for a tool that raised)."""

    def run(args: dict[str, Any]) -> str:
        log.executed.append((tool, int(args["n"])))
        if log.refuse_every and int(args["n"]) % log.refuse_every == 0:
            log.refused.append((tool, int(args["n"])))
            raise ValueError(f"{tool} refuses {args['n']}")
        return f"{tool} {args['n']}"

    return {"name": tool, "description": f"{tool}.", "input_schema": SCHEMA, "response": run}


def catalog_servers(log: CatalogLog) -> dict[str, SimMcpServer]:
    """The walk's servers by command (see :func:`tool_spec`)."""
    return {
        command: SimMcpServer(
            name,
            [tool_spec(log, t) for t in tools],
            latency=(0.01, 0.1),
            start_latency=(0.01, 0.1),
        )
        for name, (command, tools) in SERVERS.items()
    }


@attrs.frozen
class Routed:
    """An MCP transport: the walk's servers by command, anything else to ``fallback``."""

    fallback: Callable[[McpServerConfig], Any]
    servers: dict[str, SimMcpServer]

    def __call__(self, config: McpServerConfig) -> Any:
        server = self.servers.get(config.command or "")
        return self.fallback(config) if server is None else server.connect(config)


def _ours(name: str | None) -> bool:
    return name in SERVERS or name == RENAMED


async def _snapshot(service: Any) -> tuple[Any, ...]:
    """The walk's servers and every MCP tool naming one of them (or naming a server that
    the ticker's churn does not use)."""
    servers = sorted(
        (r.id, r.server_name, r.command)
        for r in await catalog.list_servers(service)
        if r.server_name != "ticker"
    )
    tools = sorted(
        (t.id, t.name, t.mcp_server, tuple(t.tags))
        for t in await service.list_tools(tool_types=["external_mcp"], limit=1000)
        if t.mcp_server != "ticker"
    )
    return tuple(servers), tuple(tools)


def _diff(before: tuple[Any, ...], after: tuple[Any, ...]) -> str:
    gone = [x for part, now in zip(before, after, strict=True) for x in part if x not in now]
    new = [x for part, was in zip(after, before, strict=True) for x in part if x not in was]
    return f"gone {gone[:3]}, new {new[:3]}"


@attrs.define
class _Walk:
    service: Any
    log: CatalogLog
    rng: Any
    faults: Any
    n: int = 1_000_000
    unsettled: set[str] = attrs.Factory(set)  # servers no refresh could reach
    servers: Callable[[], dict[str, SimMcpServer]] | None = None  # by command (changes)
    lists: dict[str, tuple[str, ...]] = attrs.Factory(
        lambda: {name: tools for name, (_, tools) in SERVERS.items()}
    )  # what each server (by its first name) lists now

    def problem(self, text: str) -> None:
        self.log.problems.append(text)

    def fired(self) -> int:
        return sum(int(self.faults.fired[f]) for f in MCP_FAULTS)

    async def listed(self, server_id: str) -> list[str]:
        return sorted(t.name for t in await catalog.server_tool_list(self.service, server_id))

    async def create(self, name: str) -> Any:
        command, tools = SERVERS[name][0], self.lists[name]
        before = self.fired()
        record = await catalog.create_server(
            self.service, name, "stdio", {"command": command, "args": [], "env": {}}
        )
        if self.fired() == before and await self.listed(record.id) != sorted(tools):
            self.problem(
                f"create of {name} returned (no MCP fault), yet its tools are "
                f"{await self.listed(record.id)}, not the {sorted(tools)} it lists"
            )
        await self.refreshed(record.id, name, tools)
        return record

    async def refreshed(self, server_id: str, name: str, tools: tuple[str, ...]) -> None:
        """Refresh until one returns; then its tools must be the ones it lists."""
        self.unsettled.add(server_id)
        for _ in range(4):
            if await self.listed(server_id) == sorted(tools):
                self.unsettled.discard(server_id)
                return
            try:
                await catalog.refresh_server(self.service, server_id)
            except KelpieError:  # crashed, or slow to start: a 503
                await self.reconnect(name)
                continue
            got = await self.listed(server_id)
            if got != sorted(tools):
                self.problem(f"a refresh of {name} returned, yet its tools are {got}")
            self.unsettled.discard(server_id)
            return

    async def change(self, ids: dict[str, str]) -> None:
        """The servers' listings change (:data:`CHANGES`); each is refreshed until a refresh
        returns, which must then have registered what it lists now."""
        assert self.servers is not None
        for number, changes in enumerate(CHANGES, 1):
            running = self.servers()
            for name, (gone, new) in changes.items():
                server = running[SERVERS[name][0]]
                for tool in gone:
                    del server.tools[tool]
                specs = [tool_spec(self.log, t) for t in new]
                where = f"sim mcp server {name!r}"
                server.tools.update(parse_tools(specs, where, server.latency))
                self.lists[name] = tuple(sorted(server.tools))
            for name, server_id in ids.items():
                await self.refreshed(server_id, name, self.lists[name])
            await self.listings_kept(f"after the servers' listings changed ({number})", ids)

    async def reconnect(self, name: str) -> None:
        with contextlib.suppress(KelpieError):
            await self.service.mcp_servers.reconnect(name)

    async def refused(self, what: str, request: Callable[[], Any]) -> None:
        """``request`` must be refused with a 409 and change nothing."""
        before = await _snapshot(self.service)
        try:
            await request()
        except InvalidError as error:
            if error.status != 409:
                self.problem(f"{what}: refused with {error.status}, not 409")
        else:
            self.problem(f"{what}: accepted, though the name is taken")
        after = await _snapshot(self.service)
        self.log.refusals += 1
        if after != before:
            self.problem(f"{what} was refused, yet changed the catalog: {_diff(before, after)}")

    async def owned_only(self, records: list[Any], tools: list[Any]) -> None:
        """Each server answers for its own tools, and is a 404 for every other tool."""
        for record in records:
            for tool in tools:
                owned = tool.mcp_server == record.server_name
                try:
                    got = await catalog.server_tool(self.service, record.id, tool.id)
                except NotFoundError:
                    if owned:
                        self.problem(f"{record.server_name} has no tool {tool.name}, its own")
                    continue
                if not owned or got.id != tool.id:
                    self.problem(
                        f"{record.server_name} answered for tool {tool.name} "
                        f"({tool.tool_type}, of {tool.mcp_server!r})"
                    )
                if owned:
                    continue
                ran = len(self.log.executed)
                with contextlib.suppress(NotFoundError):
                    await self.run(record, tool)
                    self.problem(f"{record.server_name} ran {tool.name}, not its tool")
                if len(self.log.executed) != ran:
                    self.problem(f"running {tool.name} through {record.server_name} ran it")

    async def run(self, record: Any, tool: Any) -> None:
        """Run ``tool`` through ``record``'s server: a success is the server's answer to
        this call, which ran once."""
        self.n += 1
        n = self.n
        result = await catalog.run_server_tool(self.service, record.id, tool.id, {"n": n})
        self.log.runs += 1
        ran = [t for t, m in self.log.executed if m == n]
        if result.status == "success" and (tool.name, n) in self.log.refused:
            self.problem(
                f"run {n} of {tool.name} through {record.server_name} answered success "
                f"{result.func_return!r}, though the server answered an error (isError)"
            )
        elif result.status == "success":
            want = f"{tool.name} {n}"
            if result.func_return != want or ran != [tool.name]:
                self.problem(
                    f"run {n} of {tool.name} through {record.server_name} answered success "
                    f"{result.func_return!r} (the server's answer: {want!r}), ran {ran}"
                )
        elif "Connection" in result.func_return:
            await self.reconnect(record.server_name)

    async def tools_named(self, server: str) -> list[str]:
        return sorted(
            t.name
            for t in await self.service.list_tools(tool_types=["external_mcp"], limit=1000)
            if t.mcp_server == server
        )

    async def listings_kept(self, when: str, servers: dict[str, str]) -> None:
        """Every server of ``servers`` (name -> id, as named now) has the tools it lists."""
        for name, server_id in servers.items():
            if server_id in self.unsettled:
                continue  # never reached: its tools are whatever the faults left
            original = name if name in SERVERS else "cat-beta"
            want = sorted(self.lists[original])
            got = await self.listed(server_id)
            if got != want or await self.tools_named(name) != want:
                self.problem(
                    f"{when}: {name} has tools {got} ({await self.tools_named(name)} by its "
                    f"name), not the {want} it lists"
                )

    async def walk(self) -> None:
        service = self.service
        plain = await service.create_tool(PLAIN)
        alpha = await self.create("cat-alpha")
        beta = await self.create("cat-beta")
        await self.listings_kept("after the creates", {"cat-alpha": alpha.id, "cat-beta": beta.id})
        await self.refused(
            "creating a second server named cat-alpha",
            lambda: catalog.create_server(
                service, "cat-alpha", "stdio", {"command": "beta-mcp", "args": [], "env": {}}
            ),
        )
        await self.refused(
            "renaming cat-beta to cat-alpha",
            lambda: catalog.update_server(service, beta.id, "cat-alpha", {}),
        )
        await self.listings_kept("after the refusals", {"cat-alpha": alpha.id, "cat-beta": beta.id})
        tools = [
            *await catalog.server_tool_list(service, alpha.id),
            *await catalog.server_tool_list(service, beta.id),
            plain,
        ]
        await self.owned_only([alpha, beta], tools)
        for _ in range(RUNS):
            record = self.rng.choice([alpha, beta])
            mine = await catalog.server_tool_list(service, record.id)
            if mine:
                await self.run(record, self.rng.choice(mine))
        had = sorted(self.lists["cat-beta"])  # what the rename moves
        if self.servers is not None:
            await self.change({"cat-alpha": alpha.id, "cat-beta": beta.id})
            had = sorted(self.lists["cat-beta"])
            if beta.id in self.unsettled:  # no refresh returned: its tools are what it had
                had = await self.tools_named("cat-beta")
        beta = await catalog.update_server(service, beta.id, RENAMED, {})
        moved = await self.tools_named(RENAMED)
        if moved != had or await self.tools_named("cat-beta"):
            self.problem(
                f"after renaming cat-beta to {RENAMED}, {RENAMED} has {moved} and cat-beta "
                f"{await self.tools_named('cat-beta')}"
            )
        await self.listings_kept("after the rename", {"cat-alpha": alpha.id, RENAMED: beta.id})
        await catalog.delete_server(service, alpha.id)
        left = await self.tools_named("cat-alpha")
        if left:
            self.problem(f"after deleting cat-alpha, tools still name it: {left}")
        await self.listings_kept("after deleting cat-alpha", {RENAMED: beta.id})
        await self.owned_only([beta], [plain, *[t for t in tools if t.mcp_server == "cat-alpha"]])
        servers = {r.server_name for r in await catalog.list_servers(service)}
        for tool in await service.list_tools(tool_types=["external_mcp"], limit=1000):
            if _ours(tool.mcp_server) and tool.mcp_server not in servers:
                self.problem(f"tool {tool.name} names {tool.mcp_server!r}, which is no server")


async def walk_catalog(
    service: Any,
    log: CatalogLog,
    rng: Any,
    faults: Any,
    servers: Callable[[], dict[str, SimMcpServer]] | None = None,
) -> None:
    """Walk the catalog once (see the module docstring); problems go to ``log``. ``servers``
    (``catalog_changes``): the node's walk servers by command, whose listings then change."""
    await _Walk(service, log, rng, faults, servers=servers).walk()
    log.done = True


def check_catalog(log: CatalogLog) -> list[str]:
    """The walk's findings, and any (tool, n) the servers ran more than once."""
    problems = list(log.problems)
    if not log.done:
        problems.append("the catalog walk did not finish")
    seen: set[tuple[str, int]] = set()
    for run in log.executed:
        if run in seen:
            problems.append(f"{run[0]} ran twice for n={run[1]}")
        seen.add(run)
    return problems
