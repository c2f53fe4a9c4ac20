"""Tool rules of every kind, sandbox tools whose files must follow the commits, timeouts,
tagged archival searches and heartbeat pauses (``agent_tool_rules``).

The agent workload gives agents only ``max_count_per_step`` rules, and its model calls the
tools the rules leave it, so a solver that offers the wrong tools after a child, parent or
conditional rule, or a prefill that loses to the model's arguments, ran nowhere (the session-10
blind test, rtE, planted four such bugs and none was caught). Here server nodes
(``topology.nodes``) share a database host; a client makes ``agents`` agents (with ``memgpt``,
every other one a ``memgpt_agent``, the others ``letta_v1_agent``) with six custom tools
(``rt_a`` ... ``rt_d``, ``rt_route``, ``rt_stop``, run in each node's simulated sandbox),
``run_code`` and the archival tools (and ``pause_heartbeats`` for memgpt agents) and, per
agent, rules drawn from the seed: ``run_first`` with prefilled ``args``,
``constrain_child_tools`` with ``child_arg_nodes``, ``parent_last_tool``, ``conditional`` (a
``child_output_mapping`` on ``rt_route``'s output, and a ``default_child``),
``max_count_per_step`` and ``exit_loop``. Then ``messages`` directives per agent, each sent
(with an otid, retried on failures) to a random live node.

The model (:class:`RulePolicy`) calls one of the offered tools, and now and then one the
rules keep back (a real model does), sometimes two in one step, with a ``mode`` argument of
its own that a prefill must override; ``run_code`` sleeps within or past the tool timeout;
archival inserts carry tags and searches filter by them (``any`` or ``all``); memgpt agents
ask for a heartbeat after most calls and sometimes pause heartbeats for a minute or two; it
answers in text after a few steps. Every request it gets is kept, and
:mod:`._tool_rule_model` judges them: the rules against a model written from their documented
contract (``tool_rules_obeyed``), the timeouts (``tool_timeouts_kept``), the tag filter
(``archival_searches_filter``) and the pauses (``heartbeat_pauses_kept``). At the end the
client reads each agent's history back: each custom tool appends a line to a file in the
sandbox and reports the line count, so the k-th stored result must report ``k``
(``sandbox_follows_commits``): the storage faults (two tries per transaction, as in
``agent_recovery_storms``) make commits give up after the tool ran.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any

import attrs
import trio

import kelpie_dst
from kelpie_agent.agent import (
    CreateAgent,
    InputMessage,
    LoopConfig,
    ToolReturnMessage,
    ToolRule,
    builtin_id,
)
from kelpie_agent.llm import LlmRequest
from kelpie_agent.sandbox import SandboxLimits
from kelpie_agent.service import open_agent_node

from ..scenario import WorkloadContext, invariant, workload
from ..shims import LlmTiming, SimLlmClient, open_kv, open_sandbox, sim_ports
from ..shims.llm._turns import Call, Reply
from ._agent_coherence import coherence_options
from ._agent_coherence import memory_matches_storage as memory_matches_storage
from ._agent_rules import prompt_max_counts
from ._agent_schedules import OPTIONS, SERVICE, Client
from ._tool_rule_model import (
    DIRECTIVE,
    RuleSet,
    judge_archival_searches,
    judge_pauses,
    judge_request,
    judge_sandbox_counts,
    judge_timeouts,
    result_message,
)

__all__ = [
    "RulePolicy",
    "agent_tool_rules",
    "archival_searches_filter",
    "heartbeat_pauses_kept",
    "sandbox_follows_commits",
    "tool_rules_obeyed",
    "tool_timeouts_kept",
]

NOTED = ("rt_a", "rt_b", "rt_c", "rt_d", "rt_route", "rt_stop")
"""The custom tools: each notes its call in the sandbox's ``calls.log``."""
BUILTIN = ("run_code", "archival_memory_insert", "archival_memory_search")
TOOLS = (*NOTED, *BUILTIN)
"""Every tool the agents have (``run_code`` runs ``sleep N`` past the timeout or not; the
archival tools insert tagged passages and search them by tags, ``any`` or ``all``)."""
TAGS = ("kelp", "reef", "tide")
MEMGPT_TOOLS = ("pause_heartbeats",)
"""What memgpt agents have besides (they are every other agent with ``memgpt``)."""
PAUSES = (1, 2)  # minutes a pause_heartbeats call asks for
EXITS = ("rt_stop",)
TOOL_TIMEOUT = 5.0
SLEEPS = (1, 2, 9, 12)  # seconds a run_code command sleeps: well within or past TOOL_TIMEOUT
ROUTES = ("left", "right", "elsewhere")
MODES = ("free", "fast")
_NOTE = """
def _note(tool, text, mode):
    try:
        with open("calls.log") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    lines.append(tool + " " + text)
    with open("calls.log", "w") as f:
        f.write("\\n".join(lines) + "\\n")
    return tool + " mode=" + mode + " n=" + str(len(lines)) + " text=" + text
"""


def tool_source(name: str) -> str:
    """A workload tool: it notes its call in the sandbox's ``calls.log`` and says how many
    lines the file has now (``rt_route`` answers its ``choice``, for a conditional rule)."""
    if name == "rt_route":
        return (
            _NOTE
            + '''
def rt_route(choice: str, text: str, mode: str = "free") -> str:
    """Pick the way on.

    Args:
        choice: Where to go next.
        text: A note.
        mode: How.
    """
    _note("rt_route", text, mode)
    return choice
'''
        )
    return (
        _NOTE
        + f'''
def {name}(text: str, mode: str = "free") -> str:
    """Tool {name}: note a text.

    Args:
        text: The note.
        mode: How.
    """
    return _note("{name}", text, mode)
'''
    )


def draw_rules(rng: random.Random, tools: tuple[str, ...] = TOOLS) -> RuleSet:
    """One agent's rules: each kind with some probability (``exit_loop`` on ``rt_stop``
    always)."""
    run_first: tuple[tuple[str, dict[str, str]], ...] = ()
    if rng.random() < 0.5:
        run_first = (("rt_a", {"mode": "init"}),)
    children: tuple[Any, ...] = ()
    if rng.random() < 0.7:
        children = (("rt_a", ("rt_b", "rt_route"), {"rt_b": {"mode": "child"}}),)
    parents: tuple[tuple[str, tuple[str, ...]], ...] = ()
    if rng.random() < 0.6:
        parents = (("rt_c", ("rt_d",)),)
    conditionals: tuple[Any, ...] = ()
    if rng.random() < 0.8:
        default = "rt_d" if rng.random() < 0.7 else None
        conditionals = (("rt_route", {"left": "rt_b", "right": "rt_c"}, default),)
    max_counts: tuple[tuple[str, int], ...] = ()
    if rng.random() < 0.5:
        max_counts = ((rng.choice(("rt_b", "rt_c", "rt_d")), rng.randint(1, 2)),)
    return RuleSet(
        tools=tools,
        run_first=run_first,
        children=children,
        parents=parents,
        conditionals=conditionals,
        max_counts=max_counts,
        exits=EXITS,
    )


def tool_rules(rules: RuleSet) -> tuple[ToolRule, ...]:
    out: list[ToolRule] = []
    for tool, args in rules.run_first:
        out.append(ToolRule(tool, "run_first", args=dict(args)))
    for tool, kids, nodes in rules.children:
        out.append(
            ToolRule(
                tool,
                "constrain_child_tools",
                children=kids,
                child_arg_nodes=[{"name": k, "args": dict(a)} for k, a in nodes.items()],
            )
        )
    for tool, kids in rules.parents:
        out.append(ToolRule(tool, "parent_last_tool", children=kids))
    for tool, mapping, default in rules.conditionals:
        out.append(
            ToolRule(tool, "conditional", child_output_mapping=dict(mapping), default_child=default)
        )
    for tool, limit in rules.max_counts:
        out.append(ToolRule(tool, "max_count_per_step", max_count_limit=limit))
    for tool in rules.exits:
        out.append(ToolRule(tool, "exit_loop"))
    return tuple(out)


@attrs.define
class RulePolicy:
    """The simulated model: calls offered tools (sometimes one the rules keep back, sometimes
    two at once) and answers in text after a few steps. Keeps every request it gets."""

    requests: list[LlmRequest] = attrs.Factory(list)
    p_forbidden: float = 0.2
    p_two: float = 0.2

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        self.requests.append(request)
        tag, steps = None, 0
        for message in reversed(request.messages):
            if message.role == "assistant":
                steps += 1
            elif message.role == "user":
                m = DIRECTIVE.match(message.text.strip())
                if m is not None:
                    tag = m.group(1)
                    break
        offered = [t.name for t in request.tools]
        if tag is None or not offered or steps >= 6 or rng.random() < 0.12:
            return (f"Done after {steps} step(s).",)
        memgpt = any(
            "request_heartbeat" in t.input_schema.get("properties", {}) for t in request.tools
        )
        attached = TOOLS + (MEMGPT_TOOLS if memgpt else ())
        reply: list[str | Call] = []
        first: str | None = None
        # the tools the prompt's rules block limits per response, as a real model reads them:
        # now and then it calls one twice in a step, past what its rule has left
        limited = sorted(t for t in prompt_max_counts(request.system) if t in offered)
        pushing = bool(limited) and rng.random() < 0.25
        for k in range(2 if pushing or rng.random() < self.p_two else 1):
            held_back = [t for t in attached if t not in offered]
            if pushing and first is None:
                name = rng.choice(limited)
            elif first is not None and first not in EXITS and (pushing or rng.random() < 0.5):
                name = first  # the same tool twice in one step
            elif held_back and rng.random() < self.p_forbidden:
                name = rng.choice(held_back)
            else:
                name = rng.choice(offered)
                if name == "rt_stop" and rng.random() < 0.6:
                    name = rng.choice(offered)
            args: dict[str, Any] = {"text": f"{tag} s{steps} c{k}", "mode": rng.choice(MODES)}
            if name == "pause_heartbeats":
                args = {"minutes": rng.choice(PAUSES)}
            elif name == "rt_route":
                args["choice"] = rng.choice(ROUTES)
            elif name == "run_code":
                sleep = rng.choice(SLEEPS)
                args = {"code": f"sleep {sleep}; echo {args['text']}", "language": "shell"}
            elif name == "archival_memory_insert":
                tags = rng.sample(TAGS, rng.randint(1, 2))
                args = {"content": f"{args['text']} note", "tags": tags}
            elif name == "archival_memory_search":
                tags = rng.sample(TAGS, rng.randint(1, 2))
                mode = rng.choice(("any", "all"))
                args = {"query": "note", "tags": tags, "tag_match_mode": mode, "top_k": 50}
            if memgpt and name not in EXITS:  # memgpt tools take request_heartbeat
                args["request_heartbeat"] = rng.random() < 0.85
            reply.append(Call(name, args))
            first = name
        return tuple(reply)


@attrs.define
class RulesLog:
    policy: RulePolicy = attrs.Factory(RulePolicy)
    rules: dict[int, RuleSet] = attrs.Factory(dict)
    agents: dict[int, str] = attrs.Factory(dict)
    stored: dict[int, list[tuple[str, str]]] = attrs.Factory(dict)  # successful tool results
    stops: dict[str, int] = attrs.Factory(dict)


def start_servers(
    ctx: WorkloadContext,
    policy: Any,
    *,
    sandbox: str,
    tool_timeout: float = TOOL_TIMEOUT,
    limits: SandboxLimits | None = None,
) -> tuple[dict[str, Any], kelpie_dst.Node]:
    """The database host and the scenario's server nodes, each an ``AgentService`` over the
    simulated model ``policy`` and sandboxes named ``sandbox``; the services by node (filled
    in as the nodes start) and the database node. Shared with ``sandbox_files``."""
    topology = ctx.topology
    db = ctx.sim.add_node(topology.database or "db")
    services: dict[str, Any] = {}
    attempts = int(ctx.params["storage_attempts"])

    async def server(node: kelpie_dst.Node) -> None:
        async with contextlib.AsyncExitStack() as stack:
            service = await stack.enter_async_context(
                open_agent_node(
                    open_kv(node, host=db),
                    sim_ports(node),
                    node_id=node.name,
                    llm=SimLlmClient(policy, timing=LlmTiming()),
                    sandbox_factory=lambda r: open_sandbox(
                        node, name=sandbox, network=r.network, limits=limits
                    ),
                    loop_config=LoopConfig(storage_attempts=attempts, tool_timeout=tool_timeout),
                    dispatcher_options=OPTIONS,
                    options=SERVICE,
                    observer=kelpie_dst.log,
                    **coherence_options(ctx, db),
                )
            )
            services[node.name] = service
            await trio.sleep_forever()

    for name in topology.nodes or ("server-1", "server-2", "server-3"):
        ctx.sim.add_node(name, server)
    return services, db


async def _converse(client: Client, log: RulesLog, number: int, messages: int) -> None:
    agent_id = log.agents[number]
    for k in range(messages):
        text = f"rr-a{number}-m{k} follow your tool rules"
        inputs = (InputMessage("user", text, otid=f"rr-{number}-{k}"),)
        result = await client.until_done(
            lambda s, i=inputs: s.send_message(agent_id, i, max_steps=8)  # type: ignore[misc]
        )
        log.stops[result.stop_reason] = log.stops.get(result.stop_reason, 0) + 1
        await trio.sleep(client.rng.uniform(0.5, 3))


async def _read_back(client: Client, log: RulesLog) -> None:
    for number, agent_id in log.agents.items():
        history = await client.until_done(
            lambda s, a=agent_id: s.list_messages(a, limit=1000, order="asc")  # type: ignore[misc]
        )
        log.stored[number] = [
            (m.name or "", result_message(m.tool_return))
            for m in history
            if isinstance(m, ToolReturnMessage) and m.status == "success" and m.name in NOTED
        ]


@workload(
    params={"agents": 4, "messages": 4, "storage_attempts": 2, "memgpt": False},
    sizes=("agents", "messages"),
    bounds={"agents": (1, 50), "messages": (1, 100), "storage_attempts": (1, 8)},
)
async def agent_tool_rules(ctx: WorkloadContext) -> None:
    """Tool rules of every kind and sandbox tools under faults; see the module docstring."""
    log = RulesLog()
    ctx.state["log"] = log
    services, _ = start_servers(ctx, log.policy, sandbox="rule-tools")
    client = Client(ctx, services, "tool-rules")
    draw = ctx.rng("tool-rules-draw")
    await trio.sleep(0.5)
    specs = {name: builtin_id(name) for name in (*BUILTIN, *MEMGPT_TOOLS)}
    for name in NOTED:
        source = tool_source(name)
        spec = await client.until_done(lambda s, src=source: s.upsert_tool(src))  # type: ignore[misc]
        specs[name] = spec.id
    for number in range(int(ctx.params["agents"])):
        memgpt = bool(ctx.params["memgpt"]) and number % 2 == 1
        tools = TOOLS + (MEMGPT_TOOLS if memgpt else ())
        rules = draw_rules(draw, tools)
        log.rules[number] = rules
        request = CreateAgent(
            name=f"rules-{number}",
            agent_type="memgpt_agent" if memgpt else "letta_v1_agent",
            tool_ids=tuple(specs[name] for name in tools),
            tool_rules=tool_rules(rules),
        )
        view = await client.until_done(
            lambda s, r=request: s.create_agent(r, include_base_tools=False)  # type: ignore[misc]
        )
        log.agents[number] = view.agent.id
    messages = int(ctx.params["messages"])
    async with trio.open_nursery() as nursery:
        for number in log.agents:
            nursery.start_soon(_converse, client, log, number, messages)
    await _read_back(client, log)
    ctx.metric("tool_rules.requests", len(log.policy.requests))
    for reason, count in sorted(log.stops.items()):
        ctx.metric(f"tool_rules.stop.{reason}", count)


def _shown(problems: list[str]) -> str:
    return "; ".join(problems[:3]) + (f"; ... ({len(problems)} in all)" if problems[3:] else "")


@invariant
def tool_rules_obeyed(ctx: WorkloadContext) -> None:
    """Every request to the model offers exactly the tools the agent's rules allow after the
    run's calls so far; every call was refused exactly when the rules forbade it and ran with
    the arguments they prefill; no request follows an ``exit_loop`` tool in its run."""
    log: RulesLog = ctx.state["log"]
    problems: list[str] = []
    for index, request in enumerate(log.policy.requests):
        problems += judge_request(request, log.rules, f"request {index}")
    assert not problems, _shown(problems)


@invariant
def heartbeat_pauses_kept(ctx: WorkloadContext) -> None:
    """A memgpt run whose step ends within a ``pause_heartbeats`` pause ends there (unless a
    rule forces the loop on), whatever heartbeats it asked for."""
    log: RulesLog = ctx.state["log"]
    problems: list[str] = []
    for index, request in enumerate(log.policy.requests):
        problems += judge_pauses(request, log.rules, f"request {index}")
    assert not problems, _shown(problems)


@invariant
def tool_timeouts_kept(ctx: WorkloadContext) -> None:
    """A ``run_code`` command that sleeps past the agent's ``tool_timeout`` never succeeds,
    and one that sleeps well within it is never reported as timed out."""
    log: RulesLog = ctx.state["log"]
    problems = judge_timeouts(log.policy.requests, TOOL_TIMEOUT)
    assert not problems, _shown(problems)


@invariant
def archival_searches_filter(ctx: WorkloadContext) -> None:
    """Every passage an ``archival_memory_search`` with tags returns has the tags its
    ``tag_match_mode`` asks for: all of them, or at least one."""
    log: RulesLog = ctx.state["log"]
    problems = judge_archival_searches(log.policy.requests)
    assert not problems, _shown(problems)


@invariant
def sandbox_follows_commits(ctx: WorkloadContext) -> None:
    """The k-th stored result of an agent's sandbox tools found k lines in the file each call
    appends to: the sandbox holds exactly the committed calls' files."""
    log: RulesLog = ctx.state["log"]
    problems: list[str] = []
    for number, returns in sorted(log.stored.items()):
        problems += judge_sandbox_counts(f"a{number}", returns)
    assert not problems, _shown(problems)
