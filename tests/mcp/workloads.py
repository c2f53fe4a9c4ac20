"""Module-level MCP workloads for the fault tests (importable by name, for fresh processes).

Each runs McpClient against a SimMcpServer offering the conformance tools, checks what the
client observes as it goes (raising AssertionError on a violation), and returns counters that
the tests compare with the faults fired.
"""

from __future__ import annotations

from typing import Any

import trio

import kelpie_dst
from kelpie_agent.mcp import (
    McpCallLostError,
    McpClient,
    McpConnectionError,
    McpServerConfig,
    McpStartupTimeoutError,
    McpTimeoutError,
)
from kelpie_agent.mcp.testing import CONFORMANCE_TOOLS
from kelpie_dst.shims._mcp import SimMcpServer, sim_mcp_transport

NAME = "tools"
STARTUP_TIMEOUT = 5.0
CALL_TIMEOUT = 2.0
ALL_FAULTS = ["mcp.server_crash=0.1", "mcp.slow_start=0.3", "mcp.tool_timeout=0.2"]


def make() -> tuple[SimMcpServer, McpClient]:
    server = SimMcpServer(NAME, CONFORMANCE_TOOLS)
    config = McpServerConfig(
        NAME, "sim-server", startup_timeout=STARTUP_TIMEOUT, call_timeout=CALL_TIMEOUT
    )
    return server, McpClient([config], transport=sim_mcp_transport(server))


async def reconnect_until_up(client: McpClient) -> int:
    """Reconnect until the server starts; the number of failed starts."""
    failures = 0
    while True:
        try:
            await client.reconnect(NAME)
            return failures
        except McpConnectionError:
            failures += 1


async def crashes(sim: kelpie_dst.Simulation) -> dict[str, int]:
    """Batches of three concurrent calls; after a connection error, later calls must fail too
    until the client reconnects."""
    server, client = make()
    ok = failed = 0
    async with client:
        for batch in range(10):
            results: dict[int, str | McpConnectionError] = {}

            async def one(i: int, batch: int = batch, results: dict[int, Any] = results) -> None:
                try:
                    text = f"{batch}/{i}"
                    results[i] = (await client.call_tool(NAME, "echo", {"text": text})).text
                except McpConnectionError as error:
                    results[i] = error

            async with trio.open_nursery() as nursery:
                for i in range(3):
                    nursery.start_soon(one, i)
            for i, outcome in sorted(results.items()):
                if isinstance(outcome, str):
                    assert outcome == f"{batch}/{i}", (outcome, batch, i)
                    ok += 1
                else:
                    assert "closed the connection" in str(outcome), outcome
                    failed += 1
            if client.status(NAME) == "broken":
                try:
                    await client.call_tool(NAME, "echo", {"text": "later"})
                except McpConnectionError:
                    pass
                else:
                    raise AssertionError("a call succeeded on a crashed server's connection")
                await reconnect_until_up(client)
    return {"ok": ok, "failed": failed, "crashes": server.crashes, "starts": server.starts}


async def slow_starts(sim: kelpie_dst.Simulation) -> dict[str, int]:
    """Connect until a start beats the start-up timeout; each timeout takes exactly that long
    and leaves the connection broken."""
    server, client = make()
    timeouts = 0
    async with client:
        while True:
            start = trio.current_time()
            try:
                await client.reconnect(NAME)
                break
            except McpStartupTimeoutError:
                assert abs(trio.current_time() - start - STARTUP_TIMEOUT) < 1e-9
                assert client.status(NAME) == "broken"
                try:
                    await client.call_tool(NAME, "echo", {"text": "x"})
                except McpConnectionError as error:
                    assert "did not start within 5s" in str(error), error
                else:
                    raise AssertionError("a call succeeded before the server started")
                timeouts += 1
        answer = await client.call_tool(NAME, "echo", {"text": "up"})
        assert answer.text == "up"
    return {"timeouts": timeouts, "starts": server.starts}


async def tool_timeouts(sim: kelpie_dst.Simulation) -> dict[str, int]:
    """Twenty calls; each answers correctly or times out after exactly the call timeout, and
    the connection stays usable. Hung requests are cancelled on the server."""
    server, client = make()
    timeouts = 0
    async with client:
        await client.connect(NAME)
        for i in range(20):
            start = trio.current_time()
            try:
                result = await client.call_tool(NAME, "add", {"a": i, "b": 1})
                assert result.text == str(i + 1), result
            except McpTimeoutError as error:
                assert abs(trio.current_time() - start - CALL_TIMEOUT) < 1e-9
                assert "did not answer within 2s" in str(error)
                timeouts += 1
            assert client.status(NAME) == "connected"
        await trio.sleep(0.1)  # let the last cancellation notice arrive
        in_flight = server.in_flight
    return {"timeouts": timeouts, "starts": server.starts, "in_flight": in_flight}


def _recording() -> tuple[list[str], SimMcpServer, McpClient]:
    """A server whose ``record`` tool appends its ``text`` to the returned list (its effect)."""
    effects: list[str] = []

    def record(args: dict[str, Any]) -> str:
        effects.append(str(args.get("text")))
        return "recorded"

    server = SimMcpServer(NAME, [{"name": "record", "response": record}])
    config = McpServerConfig(NAME, "sim-server", call_timeout=CALL_TIMEOUT)
    return effects, server, McpClient([config], transport=sim_mcp_transport(server))


async def lost_replies(sim: kelpie_dst.Simulation) -> dict[str, int]:
    """Twenty calls of a tool with an effect; each answers, or times out after exactly the call
    timeout although its effect happened (mcp.reply_lost)."""
    effects, server, client = _recording()
    timeouts = 0
    async with client:
        await client.connect(NAME)
        for i in range(20):
            start = trio.current_time()
            try:
                result = await client.call_tool(NAME, "record", {"text": str(i)})
                assert result.text == "recorded", result
            except McpTimeoutError:
                assert abs(trio.current_time() - start - CALL_TIMEOUT) < 1e-9
                timeouts += 1
            assert effects[-1] == str(i)  # it ran, answered or not
            assert client.status(NAME) == "connected"
        await trio.sleep(0.1)  # let the last cancellation notice arrive
        in_flight = server.in_flight
    return {
        "timeouts": timeouts,
        "effects": len(effects),
        "starts": server.starts,
        "in_flight": in_flight,
    }


async def effect_crashes(sim: kelpie_dst.Simulation) -> dict[str, int]:
    """Twenty calls of a tool with an effect, reconnecting before a call when the server is
    down; a call whose server died after running it (mcp.effect_crash) raises
    McpCallLostError at once, marked as possibly run."""
    effects, server, client = _recording()
    lost = ran = 0
    async with client:
        for i in range(20):
            if client.status(NAME) == "broken":
                await client.reconnect(NAME)
            before, start = len(effects), trio.current_time()
            try:
                result = await client.call_tool(NAME, "record", {"text": str(i)})
                assert result.text == "recorded", result
            except McpCallLostError as error:
                assert error.outcome_unknown and isinstance(error, McpConnectionError)
                assert "whether it ran is unknown" in str(error), error
                assert trio.current_time() - start < CALL_TIMEOUT  # at once, not a timeout
                assert client.status(NAME) == "broken"
                lost += 1
                ran += len(effects) - before
            else:
                assert effects[-1] == str(i) and len(effects) == before + 1
        if client.status(NAME) == "broken":
            await client.reconnect(NAME)
    return {"lost": lost, "lost_ran": ran, "effects": len(effects), "starts": server.starts}


async def chaos(sim: kelpie_dst.Simulation) -> dict[str, int]:
    """Every fault at once; a caller that reconnects and retries still finishes every call,
    each with the right answer."""
    server, client = make()
    retries = failed_starts = 0
    async with client:
        failed_starts += await reconnect_until_up(client)
        for i in range(15):
            while True:
                try:
                    result = await client.call_tool(NAME, "add", {"a": i, "b": i})
                    assert result.text == str(2 * i), result
                    break
                except McpTimeoutError:
                    retries += 1
                except McpConnectionError:
                    retries += 1
                    failed_starts += await reconnect_until_up(client)
    sim.log("mcp chaos done", retries=retries, starts=server.starts)
    return {"retries": retries, "starts": server.starts, "failed_starts": failed_starts}


async def list_timeouts(sim: kelpie_dst.Simulation) -> dict[str, int]:
    """Twenty listings; each is the server's tools, or times out after exactly the call timeout
    (mcp.list_timeout: never the tools known from before), and the connection stays usable. A
    start whose own listing hung is a start-up timeout; the client reconnects until one lists."""
    server, client = make()
    timeouts = 0
    async with client:
        fired = sim.faults.fired["mcp.list_timeout"]
        try:
            await client.connect(NAME)
        except McpConnectionError:
            await reconnect_until_up(client)
        start_hangs = sim.faults.fired["mcp.list_timeout"] - fired
        for _ in range(20):
            start = trio.current_time()
            try:
                tools = await client.list_tools(NAME)
                assert sorted(t.name for t in tools) == sorted(server.tools), tools
            except McpTimeoutError as error:
                assert abs(trio.current_time() - start - CALL_TIMEOUT) < 1e-9
                assert "tools/list did not answer within 2s" in str(error)
                timeouts += 1
            assert client.status(NAME) == "connected"
        await trio.sleep(0.1)  # let the last cancellation notice arrive
        in_flight = server.in_flight
    listed = sim.faults.fired["mcp.list_timeout"] - fired - start_hangs
    return {"timeouts": timeouts, "hangs": listed, "in_flight": in_flight}
