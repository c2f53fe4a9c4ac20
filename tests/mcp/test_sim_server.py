"""SimMcpServer: the conformance suite over 100 seeds, the tool definition format, virtual
time, pagination, and its process dying with its node."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import kelpie_dst
from kelpie_agent.mcp import McpClient, McpConnectionError, McpServerConfig, McpToolError
from kelpie_agent.mcp.testing import CONFORMANCE_TOOLS, check_mcp_conformance
from kelpie_dst import UsageError
from kelpie_dst.shims._mcp import SimMcpServer, sim_mcp_transport


def client_for(*servers: SimMcpServer, **fields: Any) -> McpClient:
    configs = [McpServerConfig(s.name, "sim", **fields) for s in servers]
    return McpClient(configs, transport=sim_mcp_transport(*servers))


@pytest.mark.dst(seeds=100, guards="strict")
async def test_conformance_in_simulation(dst: kelpie_dst.Simulation) -> None:
    server = SimMcpServer("conformance", CONFORMANCE_TOOLS)
    async with client_for(server, startup_timeout=5, call_timeout=5) as client:
        await check_mcp_conformance(client, "conformance")
    assert server.starts == 2  # the suite ends by reconnecting
    assert server.in_flight == 0


@pytest.mark.trio
async def test_conformance_outside_a_simulation() -> None:
    server = SimMcpServer("conformance", CONFORMANCE_TOOLS, latency=0, start_latency=0)
    async with client_for(server) as client:
        await check_mcp_conformance(client, "conformance")


def run(main: Any, **options: Any) -> Any:
    result = kelpie_dst.run(main, seed=options.pop("seed", 1), **options)
    assert result.failure is None, result.failure.describe()
    return result.value


async def _double(args: dict[str, Any]) -> int:
    await trio.sleep(1)
    return args["n"] * 2


TOOLS: list[dict[str, Any]] = [
    {"name": "motd", "description": "Message of the day.", "response": {"text": "hello"}},
    {"name": "say", "response": {"echo": "words"}},
    {"name": "broken", "response": {"error": "disk on fire"}},
    {"name": "upper", "response": lambda args: args["s"].upper()},
    {"name": "double", "response": _double, "latency": [2, 4]},
    {"name": "json", "response": lambda args: {"b": 2, "a": [1]}},
]


def test_the_tool_definition_format() -> None:
    async def main(sim: kelpie_dst.Simulation) -> list[tuple[str, bool]]:
        server = SimMcpServer("defs", TOOLS, latency=0.5)
        async with client_for(server) as client:
            tools = {t.name: t for t in await client.list_tools("defs")}
            assert tools["motd"].description == "Message of the day."
            assert tools["say"].input_schema == {
                "type": "object",
                "properties": {"words": {"type": "string"}},
                "required": ["words"],
            }
            assert tools["motd"].input_schema == {"type": "object", "properties": {}}
            calls = [
                ("motd", {}),
                ("say", {"words": "hi there"}),
                ("broken", {}),
                ("upper", {"s": "abc"}),
                ("upper", {}),
                ("double", {"n": 21}),
                ("json", {}),
            ]
            out = []
            for tool, args in calls:
                result = await client.call_tool("defs", tool, args)
                out.append((result.text, result.is_error))
            assert server.calls == calls
            return out

    assert run(main) == [
        ("hello", False),
        ("hi there", False),
        ("disk on fire", True),
        ("ABC", False),
        ("Error executing tool upper: 's'", True),  # the callable raised KeyError
        ("42", False),
        ('{"a": [1], "b": 2}', False),
    ]


def test_a_tuple_is_several_text_blocks() -> None:
    async def main(sim: kelpie_dst.Simulation) -> tuple[str, tuple[Any, ...]]:
        tools = [{"name": "blocks", "response": lambda args: ("one", "two", {"n": 3})}]
        server = SimMcpServer("blocks", tools)
        async with client_for(server) as client:
            result = await client.call_tool("blocks", "blocks", {})
            return result.text, tuple(b["text"] for b in result.content)

    assert run(main) == ('one\ntwo\n{"n": 3}', ("one", "two", '{"n": 3}'))


def test_calls_take_virtual_time() -> None:
    async def main(sim: kelpie_dst.Simulation) -> tuple[float, list[float]]:
        server = SimMcpServer("slow", TOOLS, latency=[0.5, 1.5], start_latency=3)
        async with client_for(server) as client:
            start = sim.now()
            await client.connect("slow")
            startup = sim.now() - start
            took = []
            for tool, args in [("motd", {}), ("motd", {}), ("double", {"n": 1})]:
                start = sim.now()
                await client.call_tool("slow", tool, args)
                took.append(sim.now() - start)
            return startup, took

    startup, (first, second, double) = run(main, seed=7)
    assert startup == pytest.approx(3.0)
    assert 0.5 <= first <= 1.5 and 0.5 <= second <= 1.5 and first != second
    assert 2 + 1 <= double <= 4 + 1  # its own latency, then the callable's sleep
    assert run(main, seed=7) == (startup, [first, second, double])  # same seed, same times


def test_tool_lists_are_paged() -> None:
    async def main(sim: kelpie_dst.Simulation) -> list[str]:
        server = SimMcpServer("paged", TOOLS, page_size=4)
        async with client_for(server) as client:
            return [t.name for t in await client.list_tools("paged")]

    assert run(main) == [t["name"] for t in TOOLS]


def test_from_a_scenario_table() -> None:
    server = SimMcpServer.from_dict(
        {
            "name": "calc",
            "latency": [0.1, 0.2],
            "tools": [{"name": "pi", "response": {"text": "3.14159"}, "latency": 1}],
        }
    )
    assert server.latency == (0.1, 0.2) and server.tools["pi"].latency == (1.0, 1.0)
    assert server.tools["pi"].kind == "text"


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ("nope", "'tools' must be a list of tool tables"),
        ([{"response": {"text": "x"}}], "tool #1: 'name' must be a non-empty string"),
        ([{"name": "t"}], "tool #1 ('t'): 'response' must be {text = ...}, {echo = ARGUMENT}"),
        ([{"name": "t", "response": {"json": "x"}}], "'response' must be {text = ...}"),
        ([{"name": "t", "response": {"text": 1}}], "'response' must be"),
        (
            [{"name": "t", "response": {"text": "x"}, "input_schema": {"type": "array"}}],
            "type 'object'",
        ),
        ([{"name": "t", "response": {"text": "x"}, "latency": [2, 1]}], "0 <= low <= high"),
        ([{"name": "t", "response": {"text": "x"}, "latency": "1s"}], "'latency' must be seconds"),
        ([{"name": "t", "response": {"text": "x"}, "colour": "red"}], "unknown field 'colour'"),
        ([{"name": "t", "response": {"text": "x"}}] * 2, "tool #2: the name 't' is used twice"),
        ([{"name": "t", "description": 5, "response": {"text": "x"}}], "'description' must be"),
    ],
)
def test_bad_definitions_are_one_line_usage_errors(tools: Any, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        SimMcpServer("bad", tools)
    assert message in str(caught.value) and str(caught.value).startswith("sim mcp server 'bad'")
    assert "\n" not in str(caught.value)


def test_bad_server_options_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="'start_latency' must satisfy 0 <= low <= high, got -1"):
        SimMcpServer("s", [], start_latency=-1)
    with pytest.raises(UsageError, match="'page_size' must be a positive integer"):
        SimMcpServer("s", [], page_size=0)
    with pytest.raises(UsageError, match="unknown field 'tool'"):
        SimMcpServer.from_dict({"name": "s", "tool": []})
    with pytest.raises(UsageError, match="two sim mcp servers are named 's'"):
        sim_mcp_transport(SimMcpServer("s", []), SimMcpServer("s", []))


def test_an_unknown_server_fails_to_start_and_a_stale_tool_is_rejected_by_the_server() -> None:
    async def main(sim: kelpie_dst.Simulation) -> list[str]:
        server = SimMcpServer("real", TOOLS)
        configs = [McpServerConfig("real", "sim"), McpServerConfig("ghost", "sim")]
        errors = []
        async with McpClient(configs, transport=sim_mcp_transport(server)) as client:
            try:
                await client.connect("ghost")
            except McpConnectionError as error:
                errors.append(str(error))
            await client.connect("real")
            del server.tools["motd"]  # the client's listing is now stale
            try:
                await client.call_tool("real", "motd")
            except McpToolError as error:
                errors.append(str(error))
            assert (await client.call_tool("real", "say", {"words": "ok"})).text == "ok"
        return errors

    assert run(main) == [
        "mcp server 'ghost': failed to start: FileNotFoundError: "
        "no simulated MCP server named 'ghost'",
        "mcp server 'real' rejected tool 'motd': Unknown tool: motd (code -32602)",
    ]


def test_the_server_process_dies_with_its_node() -> None:
    server = SimMcpServer("local", TOOLS)
    answers: list[tuple[int, str]] = []

    async def agent(node: kelpie_dst.Node) -> None:
        async with client_for(server) as client:
            while True:
                result = await client.call_tool("local", "say", {"words": "tick"})
                answers.append((node.incarnation, result.text))
                await trio.sleep(0.5)

    async def main(sim: kelpie_dst.Simulation) -> None:
        node = sim.add_node("agent", agent)
        await trio.sleep(2)
        sim.crash(node)
        sim.restart(node, after=1)
        await trio.sleep(3)
        sim.cancel_all()

    run(main)
    assert {incarnation for incarnation, _ in answers} == {1, 2}
    assert server.starts == 2 and server.in_flight == 0
