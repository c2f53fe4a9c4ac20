"""The reusable agent workload: N agents, M messages each, a mix of tools, on K server nodes
sharing one database host, with checkers for the invariants that matter.

The world (``_agent_world``): every node in ``topology.nodes`` serves agents over the database
host ``topology.database``, with a :class:`~kelpie_dst.shims.SimLlmClient` whose policy comes
from ``topology.llm`` (``helpful``, the default, follows the workload's tool directives;
``scripted`` and ``adversarial`` are the scenario's own), a sandbox per active agent when
``topology.sandbox.enabled``, and the MCP servers of ``topology.mcp`` (each listed tool echoes
its ``text`` argument). A custom tool (``tally``, run in the sandbox) is registered at start.
With ``via = "http"`` (what the shipped scenarios use) each node runs the production stack
unmodified, ``AgentService`` + the Letta-compatible app + Kelpie's HTTP server, and the clients
speak to it with the real ``letta_client`` SDK over the simulated network; with ``"direct"``
(the default, about three times faster) each node runs a bare ``Dispatcher`` of
``AgentActor`` s that the clients call in-process.

The clients (``_agent_client``) run on ``main``: each creates its agents on some node and sends
their messages round-robin, some streamed; any retryable failure (a crashed, paused or
partitioned node, a lost lease, storage giving up, a 503, a cut connection, a timeout) is
retried on another node with the same ``otid``. After the last acknowledgement every agent's
history, blocks and passages are read back through the agents. The scenario's liveness phase
bounds all of it after faults heal.

Invariants (each also a plain function in ``_agent_checks``, for tests):
``no_acknowledged_message_lost``, ``single_activation``, ``no_mixing_across_agents``,
``every_request_completed``, ``memory_blocks_within_limits``, ``streams_match_results``,
``tool_effects_exactly_once``.
"""

from __future__ import annotations

import re

import attrs
import trio

from kelpie_agent.agent import BUILTINS, builtin_id, default_tool_names

from .._errors import UsageError
from ..scenario import WorkloadContext, invariant, workload
from ..shims import sim_ports
from . import _agent_contract_checks as contract_checks
from ._agent_advice import AdviceWalker, check_advice
from ._agent_catalog import CatalogWalker
from ._agent_catalog_checks import check_catalog
from ._agent_checks import (
    Ack,
    BlockPlan,
    BlockState,
    Commit,
    Execution,
    Fence,
    Msg,
    Observed,
    Owner,
    RequestRecord,
    StreamRecord,
    check_acknowledged,
    check_blocks,
    check_completed,
    check_exactly_once,
    check_initial,
    check_no_mixing,
    check_read_only,
    check_single_activation,
    check_step_budgets,
    check_streams,
    check_turns,
    made_twice,
)
from ._agent_client import AgentPlan, Clients, Planned, RunRecord
from ._agent_coherence import CoherenceAudit, memory_matches_storage
from ._agent_cold import ColdWalker, check_cold, check_views
from ._agent_compaction import check_summaries
from ._agent_contract import CONTRACT_KEY, CONTRACT_PING, CONTRACT_SERVER, ContractWalker
from ._agent_creates import CREATE_KINDS, Creates
from ._agent_deletes import DeleteWalker
from ._agent_deletes_checks import check_deletes
from ._agent_direct import DirectLink
from ._agent_directory import DirectoryWalker
from ._agent_directory_checks import check_directory
from ._agent_drain import Drains, check_drains
from ._agent_fields import FieldsWalker
from ._agent_fields_checks import check_fields
from ._agent_filters import FilterWalker, plan_tags
from ._agent_fresh import FreshPrompts, holder
from ._agent_handover import HandoverWalker
from ._agent_handover_checks import check_handover
from ._agent_http import open_http_link
from ._agent_imports import ImportsWalker, check_imports
from ._agent_limits import LimitsWalker, check_limits
from ._agent_lists import ListWalker
from ._agent_oracles import check_effects, check_model_said, check_resends
from ._agent_policy import CUSTOM_TOOL, KINDS, directive_text, tool_kind
from ._agent_polls import Poller, check_polled_order
from ._agent_readback import ReadbackWalker
from ._agent_readback_checks import check_readback
from ._agent_recovery import check_clean_ends, check_recovery, check_run_statuses
from ._agent_resources import ResourceWalker
from ._agent_rules import draw_max_counts, ruled_candidates
from ._agent_runs import BackgroundRuns, check_followed
from ._agent_settings import SettingsWalker
from ._agent_settings_checks import check_settings
from ._agent_steps import check_run_steps, read_steps
from ._agent_stops import (
    check_invalid_stops,
    check_reply_ends_run,
    check_results_once,
    check_told_stop_reasons,
)
from ._agent_surface import SurfaceWalker
from ._agent_surface_checks import check_surface
from ._agent_threads import Threads
from ._agent_wire import WIRE_SERVER, WireWalker
from ._agent_wire_checks import check_message_views, check_wire
from ._agent_world import OPTIONS, World
from ._contract_probes_checks import (
    ProbeLog,
    check_cancels,
    check_file_deletes,
    check_internal_errors,
    check_ranks,
)
from ._lease_checks import handoffs_requested, lease_records_consistent
from ._mcp_checks import check_mcp_recovers
from ._prompt_history import ShownCalls

__all__ = [
    "Ack",
    "BlockState",
    "Commit",
    "Execution",
    "Fence",
    "Msg",
    "Observed",
    "Owner",
    "RequestRecord",
    "StreamRecord",
    "acknowledged_is_durable",
    "agents",
    "api_surface_contract",
    "cancels_reach_only_their_runs",
    "catalog_contract",
    "check_acknowledged",
    "check_blocks",
    "check_completed",
    "check_exactly_once",
    "check_initial",
    "check_no_mixing",
    "check_single_activation",
    "check_streams",
    "context_complete",
    "created_once",
    "deletes_are_total",
    "every_request_completed",
    "file_deletes_at_once",
    "graceful_stops_bounded",
    "handoffs_requested",
    "handover_contract",
    "http_refusals_documented",
    "imports_contract",
    "interrupted_runs_finished",
    "lease_records_consistent",
    "limits_accepted",
    "lists_directory_exactly",
    "lists_filter_exactly",
    "lists_page_exactly",
    "llm_port_faithful",
    "llm_sees_one_agent",
    "memory_blocks_within_limits",
    "memory_matches_storage",
    "message_fields_kept",
    "message_views_agree",
    "no_acknowledged_message_lost",
    "no_internal_errors",
    "no_mixing_across_agents",
    "polls_consistent",
    "prompts_show_stored_memory",
    "readback_consistent",
    "resources_consistent",
    "retry_advice_honest",
    "runs_end_cleanly",
    "searches_read_whole_texts",
    "server_raised_nothing",
    "settings_contract",
    "single_activation",
    "steps_recorded",
    "streams_match_results",
    "tool_effects_exactly_once",
    "tool_outcomes_correct",
    "turns_complete",
]

AGENT_TYPES = ("memgpt_agent", "letta_v1_agent", "react_agent")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
RESERVED = frozenset([*(b.name for b in BUILTINS), CUSTOM_TOOL])
PARAMS: dict[str, int | float | str | bool] = {
    "agents": 6,
    "messages": 4,
    "clients": 3,
    "tools": ",".join(KINDS),
    "agent_types": "memgpt_agent,letta_v1_agent",
    "stream_fraction": 0.3,
    "background_fraction": 0.0,  # non-streamed sends made as background runs (via http)
    "follow_breaks": 0.0,  # the share of background follows the client drops after 1-4 frames
    # and resumes from its last seq_id (_agent_runs), once or twice
    "max_tool_steps": 3,
    "max_steps": 8,
    "hop": 0.3,
    "attempt_timeout": 60.0,
    "block_limit": 400,
    "otids": True,
    "via": "direct",
    "tool_rules": 0.0,  # the fraction of agents with max_count_per_step rules (_agent_rules)
    "history_window": 0,  # messages an agent keeps in memory (0: LoopConfig's default); small
    # windows make the agents compact their context often (scenarios/agent_compaction.toml)
    "conversations": 0,  # per agent, each driven by its own client (via http; _agent_threads)
    "conversation_messages": 3,
    "fork_orphans": False,
    "conversation_recompiles": False,  # each conversation's client recompiles its system
    # prompt at the end, a dry run then for real (via http; _agent_threads._recompile)
    "poll_interval": 0.0,  # seconds between clients' agents.retrieve polls mid-run (via http;
    # _agent_polls); 0: none (scenarios/agent_storage_outage.toml)
    "stream_escapes": False,  # replies carry every kind of JSON escape and non-ASCII text, the
    # model ASCII-escapes its tool-call JSON and cuts its streams at any character (a new
    # random stream, llm/chunks); off: nothing changes (scenarios/agent_interrupted.toml)
    "list_walks": 0.0,  # the fraction of agents one of whose lists is paged every way at the
    # end (via http; _agent_lists), and then the agents list; 0: none
    "create_burst": 0,  # with list_walks: agents created at one instant through one node
    # before the agents list is walked (_agent_burst); 0: none
    "ambiguous_creates": 0,  # per agent: conversations, passages, blocks and tools created
    # (looked up by name before a retry) while the run goes on (via http; _agent_creates)
    "create_kinds": "conversation,passage,block,tool",  # with ambiguous_creates: the kinds
    # created in turn (also "archive", a shared archive by name)
    "list_filters": False,  # agents get tags, and filtered agent lists are read at the end
    # against the model (via http; _agent_filters)
    "step_shapes": False,  # the model also makes a real model's step shapes: the same tool
    # twice in a step, a reply with an edit, junk mixed with good calls, repeated identical
    # calls, core_memory_replace at the boundaries (_agent_shapes; off: nothing changes;
    # scenarios/agent_step_shapes.toml)
    "directory": False,  # after the clients, the cross-agent API areas (standalone blocks,
    # tags, tool catalog and search, messages across agents and their search, identities)
    # are driven and read back against the model (via http; _agent_directory)
    "fresh_prompts": False,  # every step's prompt shows the memory the database holds
    # (_agent_fresh: a pure check, moves no seed)
    "storage_attempts": 0,  # tries of each storage operation in the agent runtime before it
    # gives up (0: LoopConfig's default, 8); few make the give-up paths common under storage
    # faults: resumes that fail, runtimes gone stale (scenarios/agent_recovery_storms.toml)
    "bare_sdk_nodes": 0,  # with topology.llm.transport = "anthropic_api": the first N server
    # nodes run the adapter with the SDK's own retries off (_agent_llm.SDK_RETRIES)
    "gateway_errors": 0.0,  # with transport "anthropic_api": the share of the host's failure
    # answers (429, 5xx, 529) given as a gateway gives them, a plain-text body instead of
    # Anthropic's error JSON (shims/llm/_api_host; scenarios/agent_anthropic_gateway.toml)
    "surface": False,  # after the clients, the REST surface no other scenario drives (block
    # updates and deletes, steps' feedback and filters, folders' files in pages, streams with
    # include_return_message_types, agent files, the error contract) is driven and judged
    # against the model and the documented contract (via http; _agent_surface)
    "wire": False,  # the HTTP server runs with small limits (_agent_wire.WIRE_SERVER), and
    # after the clients raw requests at and over each limit, and a memgpt agent's message
    # views (use_assistant_message, types, conversations, runs, orders), are judged against
    # the documented contract (via http; _agent_wire)
    "wire_threads": False,  # with wire: no raw probes; the message views add a background
    # send to each of the wire agent's threads and follow each thread's latest run (its
    # /stream without run_id); each must show that thread's run (_wire_threads)
    "wire_cut_bodies": False,  # with wire: the raw probes also send a declared and a chunked
    # body and close the connection halfway; the abandoned request must change nothing
    # (_agent_wire._abandoned; scenarios/agent_http_cut_bodies.toml)
    "message_fields": False,  # after the clients, a memgpt agent's inputs (name, otid,
    # non-ASCII text), both renderings, its steps, approvals answered by the client over HTTP
    # and its history in pages are judged against the documented contract (via http;
    # _agent_fields)
    "catalog": False,  # after the clients, the shared catalog (archives, a folder's and a
    # block's agents, scheduled messages, the tool search), an agent file the client writes and
    # full-text message search are driven and judged against the model and the documented
    # contract (via http; _agent_catalog)
    "input_roles": False,  # with message_fields: two sends lead with an input of Letta's other
    # roles (system, assistant), judged stored once under their own message type
    "default_conversation": False,  # with message_fields: one send to the agent's own
    # history, and one read of it, through Letta's conversation "default" (agent-direct mode)
    "catalog_defaults": False,  # with catalog: also Letta's documented defaults (a message
    # search with no limit over more matches than a short page holds; schedule pages of 10)
    "handover": False,  # after the clients, one more client sends each request to another
    # node than the last (its agent's lease moves): detaches and deletes of what is not there,
    # tool runs through the API, sends retried with their otid after other runs, a background
    # run read at once, an agent file's steps and statuses, sandbox files across nodes, judged
    # against the documented contract (via http; _agent_handover)
    "coherence": False,  # after each request to an agent, an idle activation's memory is
    # compared with the database (a pure check: _agent_coherence; via http only, since the
    # audit sits in the agent service: with via = "direct" it is off and says so)
    "contract": False,  # the servers run with an API key, a short ping interval and an 8 KiB
    # head limit; after the clients, the documented contract nobody else reads (the key on
    # every route, list defaults and limits, streams with and without pings, the exact head
    # limit) is driven and judged (via http; _agent_contract)
    "contract_creates": False,  # with contract: creates whose content must be refused (two
    # blocks of one label, a block one character over its limit), and nothing they asked made
    "contract_edges": False,  # with contract: the lists below an agent and both searches read
    # at limit 0, 1000 and 1001, and lists filtered to one agent judged to hold only its items,
    # after passages stored in it and in another agent (_contract_edges)
    "contract_uploads": False,  # with contract: four files of about 8, 64, 128 and 270 KiB
    # uploaded to a folder and read back: stored whole (_contract_uploads)
    "contract_probes": False,  # with contract: a conversation cancelled while the agent's own
    # history runs, a long passage searched for its last word, files read right after their
    # delete (_contract_probes)
    "settings": False,  # after the clients, agents made with random settings in each of
    # Letta's shapes, PATCHed with random subsets of their fields, exported and imported
    # twice, judged against the model (via http; _agent_settings)
    "timezones": False,  # each agent gets a timezone of its own (ZONES, from the rng
    # "timezones"), which every prompt's current time must be shown in (_agent_fresh)
    "cold_restart": False,  # at the very end, a sample of everything the API shows is read
    # until two rounds agree, every server node is crashed and restarted at once, and the same
    # paths must read the same (via http; _agent_cold)
    "readback": False,  # after the clients, one more client makes passages, archives,
    # identities, tags, schedules, sends and a conversation, changes some, and reads each back
    # through every route that shows it and every list every documented way, judged against its
    # model and the lists themselves (via http; _agent_readback)
    "deletes": False,  # after the clients, one more client makes things of every kind the API
    # deletes, attaches them to an agent, deletes one of each, and reads everything back at once
    # and five virtual seconds later: gone where deleted, kept elsewhere (via http;
    # _agent_deletes)
    "lease_duration": 0.0,  # the nodes' leases (seconds; 0: _agent_world.OPTIONS, 6 s) ...
    "renew_every": 0.0,  # ... renewed this often (0: 1.5 s); longer renewals let a deposed
    # activation live longer before it notices (agent_split_brain)
    "exempt_deposed": False,  # steps of a deposed activation (another node holds the agent's
    # lease when it calls the model: the timing assumption broken) are not judged by the
    # prompt oracles; it may run, but must never commit or answer (_agent_oracles, Dlead19-2)
    "detaches": False,  # with deletes: the delete walker also detaches a block and a tool
    # from its agent, gone from the agent's views only (_agent_deletes)
    "deletes_at_once": False,  # with deletes: each thing is also retrieved right after its
    # delete is acknowledged: gone at once (_agent_deletes)
    "deletes_repeat": 0,  # with deletes: rounds in which the delete walker attaches its tools
    # and blocks to an agent of the round, replaces its tools, detaches the rest and deletes
    # the agent, each request sent once (_agent_deletes_repeat)
    "resources": False,  # after the clients, one more client sets tool rules of every type,
    # approvals, conversations (hidden, archived, PATCHed with null and ""), a searched send,
    # MCP servers with secrets and nesting at the documented limit, and reads each back
    # (via http; _agent_resources)
    "imports": False,  # after the clients, one more client imports an agent file with each
    # documented option (override_existing_tools, strip_messages, model, the copy suffix) and
    # attaches memory tools to a react agent, judged against the documented contract (via
    # http; _agent_imports)
    "retry_advice": False,  # alongside the clients, one more client sends messages without an
    # otid and inserts passages, each once, retrying only when the answer says
    # x-should-retry: true; each must be stored at most once (via http; _agent_advice)
    "graceful_stops": 0,  # server nodes stopped gracefully while the clients run, as
    # `kelpie serve` does on SIGTERM (drain within a grace, then release the leases), each
    # starting again at once; judged by graceful_stops_bounded (via http; _agent_drain)
    "shared_otids": False,  # every agent's n-th message carries the same otid (a client that
    # sends one message to several agents): the same otid in two threads is two requests
    "finish_edits": False,  # every agent also has memory_finish_edits, a built-in whose
    # arguments are all optional: a junk call with broken JSON may name it, and must still be
    # refused, not run with no arguments (rtN, session 18)
    "limits": False,  # after the clients, values at the documented limits through the
    # production server's default options: a block of 20,000 characters under a 100-character
    # label, created, attached and read back (via http; _agent_limits)
}

# Options of a walker: each needs its walker's param on (a one-line UsageError otherwise).
_OPTION_OF = {
    "detaches": "deletes",
    "deletes_at_once": "deletes",
    "deletes_repeat": "deletes",
    "wire_cut_bodies": "wire",
    "wire_threads": "wire",
    "input_roles": "message_fields",
    "default_conversation": "message_fields",
    "catalog_defaults": "catalog",
    "contract_creates": "contract",
    "contract_edges": "contract",
    "contract_uploads": "contract",
    "contract_probes": "contract",
}
VIAS = ("direct", "http")
STOP_WINDOW = 30.0
"""``graceful_stops`` come at times drawn over this many seconds from the clients' start."""
ZONES = ("UTC", "America/New_York", "Asia/Kolkata", "Pacific/Chatham", "Europe/Berlin")
"""The timezones agents get with ``timezones``: whole, half and quarter hours (Chatham is
+12:45 or +13:45), both sides of UTC, and two with summer time."""
SCRATCH = "kelp tide kelp 海海\nreef foam reef"
"""The scratch block's first value: words twice on one line and across lines, non-ASCII, so
that boundary ``memory_replace`` calls (``_agent_edits``) have ambiguous strings to refuse."""
BOUNDS: dict[str, tuple[float, float]] = {
    "agents": (1, 200),
    "messages": (1, 1000),
    "clients": (1, 100),
    "stream_fraction": (0, 1),
    "tool_rules": (0, 1),
    "max_tool_steps": (0, 50),
    "max_steps": (0, 100),  # 0: sends give none (Letta's default, 50, applies; via http)
    "hop": (0, 60),
    "attempt_timeout": (0.001, 3600),
    "lease_duration": (0, 600),
    "renew_every": (0, 600),
    "block_limit": (1, 100_000),
    "history_window": (0, 10_000),
    "conversations": (0, 20),
    "conversation_messages": (1, 100),
    "poll_interval": (0, 3600),
    "list_walks": (0, 1),
    "ambiguous_creates": (0, 50),
    "create_burst": (0, 50),
    "storage_attempts": (0, 100),
    "bare_sdk_nodes": (0, 100),
    "gateway_errors": (0, 1),
    "follow_breaks": (0, 1),
    "graceful_stops": (0, 100),
    "deletes_repeat": (0, 50),
}


def _names(ctx: WorkloadContext, param: str, allowed: tuple[str, ...]) -> list[str]:
    names = [n.strip() for n in str(ctx.params[param]).split(",") if n.strip()]
    for name in names:
        if name not in allowed:
            raise UsageError(
                f"workload.params.{param}: unknown {name!r} (allowed: {', '.join(allowed)})"
            )
    if not names:
        raise UsageError(f"workload.params.{param}: list at least one of {', '.join(allowed)}")
    return names


@workload(
    params=PARAMS,
    sizes=("agents", "messages", "clients"),
    bounds=BOUNDS,
    backends=("sim", "sqlite"),
)
async def agents(ctx: WorkloadContext) -> None:
    """Create the agents, send every message until acknowledged, read back the final state."""
    kinds = _names(ctx, "tools", KINDS)
    types = _names(ctx, "agent_types", AGENT_TYPES)
    via = str(ctx.params["via"])
    if via not in VIAS:
        raise UsageError(f"workload.params.via: unknown {via!r} (allowed: {', '.join(VIAS)})")
    if int(ctx.params["conversations"]) and via != "http":
        raise UsageError("workload.params.conversations: needs via = 'http'")
    if float(ctx.params["poll_interval"]) and via != "http":
        raise UsageError("workload.params.poll_interval: needs via = 'http'")
    for name in (
        "list_walks",
        "ambiguous_creates",
        "list_filters",
        "directory",
        "surface",
        "wire",
        "catalog",
        "handover",
        "message_fields",
        "contract",
        "settings",
        "readback",
        "deletes",
        "resources",
        "imports",
        "retry_advice",
        "graceful_stops",
        "limits",
    ):
        if float(ctx.params[name]) and via != "http":
            raise UsageError(f"workload.params.{name}: needs via = 'http'")
    for name, walker in _OPTION_OF.items():
        if ctx.params[name] and not ctx.params[walker]:
            raise UsageError(f"workload.params.{name}: needs {walker} = true (its walker)")
    alongside = ctx.params["handover"] or float(ctx.params["poll_interval"])
    if ctx.params["retry_advice"] and alongside:
        raise UsageError("workload.params.retry_advice: runs alongside the clients, alone")
    if ctx.params["handover"] and float(ctx.params["poll_interval"]):
        raise UsageError("workload.params.handover: runs alongside the clients, not with polls")
    if ctx.params["contract"] and ctx.params["cold_restart"]:
        raise UsageError("workload.params.cold_restart: not with contract (its reads carry no key)")
    if ctx.params["contract"] and ctx.params["wire"]:
        raise UsageError("workload.params.contract: not with wire (each sets the server's limits)")
    if ctx.params["shared_otids"] and float(ctx.params["background_fraction"]):
        raise UsageError(
            "workload.params.shared_otids: not with background_fraction (its "
            "follows are keyed by otid)"
        )
    if not int(ctx.params["max_steps"]) and via != "http":
        raise UsageError("workload.params.max_steps: 0 (none sent) needs via = 'http'")
    if int(ctx.params["create_burst"]) and not float(ctx.params["list_walks"]):
        raise UsageError("workload.params.create_burst: needs list_walks (the walk checks it)")
    topology = ctx.topology
    sandbox = topology.sandbox
    mcp_names = [t for s in topology.mcp for t in s.tools]
    for name in mcp_names:
        if mcp_names.count(name) > 1 or not TOOL_NAME.match(name) or name in RESERVED:
            raise UsageError(
                f"topology.mcp: tool {name!r} must be unique across servers, 1-64 letters, "
                f"digits, '_' or '-', and not a built-in or custom tool's name"
            )
    kinds = [
        k
        for k in kinds
        if (k not in ("python", "shell", "custom") or sandbox)
        and (k != "mcp" or any(s.tools for s in topology.mcp))
    ] or ["chat"]
    world = World(
        ctx.sim,
        nodes=topology.nodes or ("node-1", "node-2", "node-3"),
        database=topology.database or "db",
        llm_policy=topology.llm.policy,
        sandbox=sandbox,
        mcp=[(s.name, s.tools) for s in topology.mcp],
        tools=kinds,
        via=via,
        history_window=int(ctx.params["history_window"]),
        storage_attempts=int(ctx.params["storage_attempts"]),
        llm_transport=topology.llm.transport,
        escapes=bool(ctx.params["stream_escapes"]),
        bare_sdk_nodes=int(ctx.params["bare_sdk_nodes"]),
        gateway_errors=float(ctx.params["gateway_errors"]),
        shapes=bool(ctx.params["step_shapes"]),
        **({"server": WIRE_SERVER} if bool(ctx.params["wire"]) else {}),
        **({"server": CONTRACT_SERVER} if bool(ctx.params["contract"]) else {}),
        api_key=CONTRACT_KEY if bool(ctx.params["contract"]) else None,
        ping_interval=CONTRACT_PING if bool(ctx.params["contract"]) else 15.0,
    )
    await world.setup()
    plans = _plan(ctx, world, kinds, types)
    record = RunRecord(plans)
    ctx.state.update(world=world, record=record)
    if bool(ctx.params["coherence"]) and via == "http":
        world.coherence = ctx.state["coherence"] = CoherenceAudit(world.store)
    elif bool(ctx.params["coherence"]):  # via direct: no service to audit (the core alone)
        ctx.state["coherence_skipped"] = "via = 'direct' runs no agent service"
    if bool(ctx.params["cold_restart"]) and via != "http":  # no API to read (the core alone)
        ctx.state["cold_skipped"] = "via = 'direct' serves no API"
    stops = int(ctx.params["graceful_stops"])
    if stops:
        world.drains = ctx.state["drains"] = Drains(ctx.sim, stops, ctx.rng("graceful_stops"))
    if float(ctx.params["lease_duration"]) or float(ctx.params["renew_every"]):
        try:
            world.dispatcher = attrs.evolve(
                OPTIONS,
                lease_duration=float(ctx.params["lease_duration"]) or OPTIONS.lease_duration,
                renew_every=float(ctx.params["renew_every"]) or OPTIONS.renew_every,
            )
        except ValueError as error:
            raise UsageError(f"workload.params.lease_duration/renew_every: {error}") from None
    world.start()
    if bool(ctx.params["exempt_deposed"]):
        store = world.store

        def deposed(number: int, node: str | None) -> bool:
            server_id = _server_id(ctx, plans, number)
            return server_id is not None and node is not None and holder(store(), server_id) != node

        world.auditor.deposed = deposed
    if bool(ctx.params["fresh_prompts"]):
        fresh = FreshPrompts(
            world.store, lambda n: _server_id(ctx, plans, n), lambda: _node_clock(ctx)
        )
        world.auditor.step_hooks.append(fresh.step)
        ctx.state["fresh"] = fresh
        shown = ctx.state["shown_calls"] = ShownCalls(world.auditor.call_args)
        world.auditor.step_hooks.append(shown.step)
    if via == "http":
        background = BackgroundRuns(
            float(ctx.params["background_fraction"]), float(ctx.params["follow_breaks"])
        )
        ctx.state["background"] = background
        key = CONTRACT_KEY if bool(ctx.params["contract"]) else None
        async with open_http_link(float(ctx.params["attempt_timeout"]), background, key) as link:
            ctx.state["link"] = link
            drains = world.drains
            if drains is not None:  # alongside the clients; a stop under way finishes
                async with trio.open_nursery() as stopper:
                    stopper.start_soon(drains.run, world.node_names, STOP_WINDOW)
                    await _drive(ctx, Clients(ctx, world, record, link), plans)
                    stopper.cancel_scope.cancel()
                ctx.metric("graceful.stops", len(drains.stops))
                ctx.metric("graceful.expired", drains.expired)
            else:
                await _drive(ctx, Clients(ctx, world, record, link), plans)
        ctx.metric("background.runs", len(background.followed))
        ctx.metric("background.resumed", sum(f.resumed for f in background.followed.values()))
        if background.breaks:
            ctx.metric("background.breaks", sum(f.breaks for f in background.followed.values()))
    else:
        direct = ctx.state["direct"] = DirectLink(world)
        await _drive(ctx, Clients(ctx, world, record, direct), plans)
    _metrics(ctx, world, record)


async def _drive(ctx: WorkloadContext, clients: Clients, plans: list[AgentPlan]) -> None:
    count = max(1, min(int(ctx.params["clients"]), len(plans)))
    threads = Threads(
        clients,
        int(ctx.params["conversations"]),
        int(ctx.params["conversation_messages"]),
        float(ctx.params["stream_fraction"]),
        orphans=bool(ctx.params["fork_orphans"]),
        recompiles=bool(ctx.params["conversation_recompiles"]),
    )
    creates = Creates(
        clients, int(ctx.params["ambiguous_creates"]), _names(ctx, "create_kinds", CREATE_KINDS)
    )
    interval = float(ctx.params["poll_interval"])
    handover = HandoverWalker(clients, ctx.rng("handover")) if ctx.params["handover"] else None
    if handover is not None:  # alongside the clients, while the faults go on
        ctx.state["handover"] = handover
        async with trio.open_nursery() as outer:
            outer.start_soon(handover.run)
            await _clients(clients, plans, count, threads, creates)
    elif interval:
        poller = Poller(clients, plans, interval)
        ctx.state["poller"] = poller
        async with trio.open_nursery() as outer:
            outer.start_soon(poller.run)
            await _clients(clients, plans, count, threads, creates)
            poller.stop()
        ctx.metric("polls", poller.polls)
    elif ctx.params["retry_advice"]:  # alongside the clients, while the faults go on
        advice = AdviceWalker(clients, ctx.rng("retry_advice"))
        ctx.state["retry_advice"] = advice
        async with trio.open_nursery() as outer:
            outer.start_soon(advice.run)
            await _clients(clients, plans, count, threads, creates)
    else:
        await _clients(clients, plans, count, threads, creates)
    rng = ctx.rng("read")
    steps: list[str] = []
    ctx.state["steps"], steps_rng = steps, ctx.rng("steps")
    for plan in plans:
        created = clients.record.requests.get(f"a{plan.number} create")
        if created is not None and created.outcome == "acked":
            await clients.read_back(plan, rng)
            steps += await read_steps(clients, plan, steps_rng)
    if threads.count:
        await threads.read_back(plans, ctx.rng("threads/read"))
        ctx.state["threads"] = threads
        ctx.metric("conversations.acked", len(threads.acks))
        if threads.recompiles:
            ctx.metric("conversations.recompiled", threads.recompiled)
    walks = float(ctx.params["list_walks"])
    if walks:
        burst = int(ctx.params["create_burst"])
        walker = ListWalker(clients, walks, threads if threads.count else None, burst)
        ctx.state["lists"] = walker
        await walker.run(plans, ctx.rng("lists"))
        ctx.metric("lists.walks", walker.walks)
        ctx.metric("lists.pages", walker.pages)
        if burst:
            ctx.metric("burst.acked", walker.burst_acked)
            ctx.metric("agents.listed", walker.agents_listed)
    if creates.per_agent:
        ctx.state["creates"] = creates
        await creates.check(ctx.rng("creates/count"))
        ctx.metric("creates.acked", sum(r.acked for r in creates.records))
        ctx.metric("creates.blind", sum(r.blind for r in creates.records))
    if bool(ctx.params["list_filters"]):
        filtered = FilterWalker(clients, clients.blind)
        ctx.state["filters"] = filtered
        await filtered.run(plans, ctx.rng("filters"))
        ctx.metric("filters.reads", filtered.reads)
    if bool(ctx.params["directory"]):
        directory = DirectoryWalker(clients, ctx.rng("directory"))
        ctx.state["directory"] = directory
        await directory.run()
        ctx.metric("directory.requests", directory.requests)
        ctx.metric("directory.listed", sum(len(w.got) for w in directory.log.walks))
        ctx.metric("directory.hits", len(directory.log.hits))
        ctx.metric("directory.problems", len(directory.log.problems))
    if bool(ctx.params["surface"]):
        surface = SurfaceWalker(clients, ctx.rng("surface"))
        ctx.state["surface"] = surface
        await surface.run()
        ctx.metric("surface.requests", surface.requests)
        ctx.metric("surface.problems", len(check_surface(surface.log)))
    if bool(ctx.params["wire"]):
        cut = bool(ctx.params["wire_cut_bodies"])
        follows = bool(ctx.params["wire_threads"])
        wire = WireWalker(clients, ctx.rng("wire"), cut_bodies=cut, threads=follows)
        ctx.state["wire"] = wire
        await wire.run()
        ctx.metric("wire.requests", wire.requests)
        ctx.metric("wire.probes", len(wire.log.probes))
        if follows:
            ctx.metric("wire.follows", len(wire.log.follows))
    if bool(ctx.params["message_fields"]):
        fields = FieldsWalker(
            clients,
            ctx.rng("message_fields"),
            bool(ctx.params["input_roles"]),
            bool(ctx.params["default_conversation"]),
        )
        ctx.state["fields"] = fields
        await fields.run()
        ctx.metric("fields.requests", fields.requests)
        ctx.metric("fields.decisions", len(fields.fields.decisions))
    if bool(ctx.params["catalog"]):
        defaults = bool(ctx.params["catalog_defaults"])
        catalog = CatalogWalker(clients, ctx.rng("catalog"), defaults)
        ctx.state["catalog"] = catalog
        await catalog.run()
        ctx.metric("catalog.requests", catalog.requests)
        ctx.metric("catalog.walks", len(catalog.log.walks))
        ctx.metric("catalog.round_trips", len(catalog.log.round_trips))
        ctx.metric("catalog.searches", len(catalog.log.searches))
        ctx.metric("catalog.schedules", len(catalog.log.schedules_made))
        ctx.metric("catalog.problems", len(check_catalog(catalog.log)))
    if bool(ctx.params["contract"]):
        contract = ContractWalker(
            clients,
            ctx.rng("contract"),
            bool(ctx.params["contract_creates"]),
            bool(ctx.params["contract_edges"]),
            bool(ctx.params["contract_uploads"]),
            bool(ctx.params["contract_probes"]),
        )
        ctx.state["contract"] = contract
        await contract.run()
        ctx.metric("contract.requests", contract.requests)
        ctx.metric("contract.quiet_streams", contract.quiet)
        if contract.probes:
            ctx.metric("probes.cancels", len(contract.probe_log.cancels))
            ctx.metric("probes.ranks", len(contract.probe_log.ranks))
            ctx.metric("probes.deletes", len(contract.probe_log.deletes))
        ctx.metric("contract.auth_probes", len(contract.log.auth))
        ctx.metric("contract.list_reads", len(contract.log.lists))
        ctx.metric(
            "contract.streams_judged", sum(s.stored is not None for s in contract.log.streams)
        )
        if contract.uploads:
            ctx.metric("contract.uploads_judged", len(contract.log.uploads))
        ctx.metric("contract.refusals", len(contract.log.refusals))
        ctx.metric("contract.head_probes", len(contract.log.limits))
    if bool(ctx.params["settings"]):
        settings = SettingsWalker(clients, ctx.rng("settings"))
        ctx.state["settings"] = settings
        await settings.run()
        ctx.metric("settings.requests", settings.requests)
        ctx.metric("settings.reads", len(settings.log.reads))
        ctx.metric("settings.problems", len(check_settings(settings.log)))
    if bool(ctx.params["readback"]):
        readback = ReadbackWalker(clients, ctx.rng("readback"))
        ctx.state["readback"] = readback
        await readback.run()
        ctx.metric("readback.requests", readback.requests)
        ctx.metric("readback.shown", len(readback.log.shown))
        ctx.metric("readback.walks", len(readback.log.walks))
        ctx.metric("readback.filtered", len(readback.log.filtered))
        ctx.metric("readback.unsettled", len(readback.log.unsettled))
        ctx.metric("readback.problems", len(check_readback(readback.log)))
    if bool(ctx.params["deletes"]):
        deletes = DeleteWalker(
            clients,
            ctx.rng("deletes"),
            detaches=bool(ctx.params["detaches"]),
            at_once=bool(ctx.params["deletes_at_once"]),
            repeats=int(ctx.params["deletes_repeat"]),
        )
        ctx.state["deletes"] = deletes
        await deletes.run()
        ctx.metric("deletes.requests", deletes.requests)
        ctx.metric("deletes.deleted", sum(len(v) for v in deletes.log.deleted.values()))
        ctx.metric("deletes.retrieved", len(deletes.log.retrieved))
        ctx.metric("deletes.listed", len(deletes.log.listed))
        ctx.metric("deletes.again", len(deletes.log.again))
        ctx.metric("deletes.regone", len(deletes.log.regone))
        ctx.metric("deletes.problems", len(check_deletes(deletes.log)))
    if bool(ctx.params["limits"]):
        limits = LimitsWalker(clients, ctx.rng("limits"))
        ctx.state["limits"] = limits
        await limits.run()
        ctx.metric("limits.requests", limits.requests)
        ctx.metric("limits.shown", len(limits.log.shown))
        ctx.metric("limits.problems", len(check_limits(limits.log)))
    if bool(ctx.params["resources"]):
        resources = ResourceWalker(clients, ctx.rng("resources"))
        ctx.state["resources"] = resources
        await resources.run()
        ctx.metric("resources.requests", resources.requests)
        ctx.metric("resources.shown", len(resources.log.shown))
        ctx.metric("resources.refusals", len(resources.refusals))
        ctx.metric("resources.problems", len(_resource_problems(resources)))
    adviced = ctx.state.get("retry_advice")
    if isinstance(adviced, AdviceWalker):
        ctx.metric("advice.requests", adviced.requests)
        ctx.metric("advice.acked", sum(s.acked for s in adviced.log.sent))
        ctx.metric("advice.retried", sum(len(s.answers) > 1 for s in adviced.log.sent))
        ctx.metric(
            "advice.unanswered",
            sum(any(a.startswith("no answer") for a in s.answers) for s in adviced.log.sent),
        )
        ctx.metric(
            "advice.errors", sum(any(a != "ok" for a in s.answers) for s in adviced.log.sent)
        )
        ctx.metric("advice.problems", len(check_advice(adviced.log)))
    if bool(ctx.params["imports"]):
        imports = ImportsWalker(clients, ctx.rng("imports"))
        ctx.state["imports"] = imports
        await imports.run()
        ctx.metric("imports.requests", imports.requests)
        ctx.metric("imports.copies", sum(bool(c.seen) for c in imports.log.copies))
        ctx.metric("imports.problems", len(check_imports(imports.log)))
    if handover is not None:
        ctx.metric("handover.requests", handover.requests)
        ctx.metric("handover.missing", len(handover.log.missing))
        ctx.metric("handover.tag_runs", len(handover.log.tag_runs))
        ctx.metric("handover.tag_resent", sum(r.sent - 1 for r in handover.log.tag_runs))
        ctx.metric("handover.sandbox_reads", sum(k == "read" for k, _, _ in handover.log.sandbox))
        ctx.metric("handover.problems", len(_handover_problems(ctx, handover)))
    if bool(ctx.params["cold_restart"]) and "cold_skipped" not in ctx.state:
        cold = ColdWalker(clients, ctx.rng("cold/sample"))
        ctx.state["cold"] = cold
        await cold.run()
        ctx.metric("cold.requests", cold.requests)
        ctx.metric("cold.paths", len(cold.log.before))
        ctx.metric("cold.restarted", int(cold.log.restarted))
        ctx.metric("cold.settled", int(cold.log.settled))
    by_number = {p.agent_id: p for p in plans}
    steps += check_run_steps(
        clients.world.store(), clients.record.acks, lambda a: clients.link.server_id(by_number[a])
    )


async def _clients(
    clients: Clients, plans: list[AgentPlan], count: int, threads: Threads, creates: Creates
) -> None:
    async with trio.open_nursery() as nursery:
        for number in range(count):
            nursery.start_soon(clients.client, number, plans[number::count])
        for plan in plans if threads.count else ():
            for k in range(threads.count):
                nursery.start_soon(threads.client, plan, k)
        for plan in plans if creates.per_agent else ():
            nursery.start_soon(creates.client, plan)


def _plan(
    ctx: WorkloadContext, world: World, kinds: list[str], types: list[str]
) -> list[AgentPlan]:
    rng = ctx.rng("plan")
    main = ctx.sim.current_node()
    assert main is not None
    ids = sim_ports(main).ids
    steps, fraction = int(ctx.params["max_tool_steps"]), float(ctx.params["stream_fraction"])
    block_limit = int(ctx.params["block_limit"])
    rules_rng, rules = ctx.rng("rules"), float(ctx.params["tool_rules"])
    tagged = bool(ctx.params["list_filters"])
    zones = ctx.rng("timezones") if bool(ctx.params["timezones"]) else None
    shared = bool(ctx.params["shared_otids"])  # one otid per message index, for every agent
    finish_edits = bool(ctx.params["finish_edits"])
    plans = []
    for number in range(1, int(ctx.params["agents"]) + 1):
        agent_type = types[(number - 1) % len(types)]
        names = list(default_tool_names(agent_type))
        if {"python", "shell", "parallel"} & set(kinds):
            names.append("run_code")
        if finish_edits:  # a tool without a required argument (a junk call may pick it)
            names.append("memory_finish_edits")
        tool_ids = [builtin_id(n) for n in names]
        tool_ids += list(world.tool_ids.values())  # the custom tool and the MCP tools
        candidates = ruled_candidates([*names, *world.tool_ids], world.mcp_tools)
        max_counts = draw_max_counts(rules_rng, rules, candidates)
        messages = []
        for index in range(1, int(ctx.params["messages"]) + 1):
            kind = rng.choice(kinds)
            mcp = kind in ("mcp", "parallel") and world.mcp_tools
            tool = rng.choice(world.mcp_tools) if mcp else None
            n = 0 if kind in ("chat", "recall") else rng.randint(1, max(1, steps))
            text = directive_text(number, index, kind, n, rng, tool)
            stream = rng.random() < fraction
            # Now and then a step budget at the boundary: the directive needs n + 1 calls.
            budget = max(1, n + rng.choice((0, 1, 2))) if rng.random() < 0.2 else None
            otid = f"otid-m{index}" if shared else f"otid-a{number}-m{index}"
            messages.append(Planned(index, text, otid, stream, budget))
        marker = f"mark-a{number}-" + "".join(
            rng.choice("abcdefghjkmnpqrstuvwxyz") for _ in range(6)
        )
        blocks = (
            BlockPlan("persona", f"I am agent {number}. My marker is {marker}.", block_limit),
            BlockPlan("human", "", block_limit),
            BlockPlan("rules", f"mark-a{number} rules: answer every directive.", 200, True),
            BlockPlan("scratch", SCRATCH, rng.randint(48, 160)),
        )
        plan = AgentPlan(
            number,
            ids.new("agent"),
            agent_type,
            tuple(tool_ids),
            tuple(messages),
            blocks,
            marker,
            max_counts,
            plan_tags(number) if tagged else (),
            zones.choice(ZONES) if zones is not None else None,
        )
        plans.append(plan)
        world.auditor.max_counts[number] = dict(max_counts)
        world.auditor.markers[number] = marker
        world.auditor.types[number] = agent_type
        world.auditor.read_only[number] = {b.label: b.value for b in blocks if b.read_only}
    return plans


def _metrics(ctx: WorkloadContext, world: World, record: RunRecord) -> None:
    ctx.metric("messages.acked", len(record.acks))
    ctx.metric("messages.planned", sum(len(p.messages) for p in record.plans))
    ctx.metric("streams", len(record.streams))
    if world.model.host is not None:  # the LLM port through the real SDK: what it gave
        calls = world.model.calls
        ctx.metric("llm.port_answers", sum(c.response is not None for c in calls))
        ctx.metric("llm.port_errors", sum(c.error is not None for c in calls))
        for code, n in sorted(world.model.host.statuses.items()):
            ctx.metric(f"llm.http.{code}", n)
    for reason, n in sorted(record.stop_reasons.items()):
        ctx.metric(f"stop.{reason}", n)
    for history in record.histories.values():
        for m in history:
            if m.type == "tool_call_message":
                ctx.count(f"tools.{tool_kind(m.tool, world.mcp_tools)}")
            elif m.type == "tool_return_message" and m.status == "error":
                ctx.count("tools.failed")
    for status, n in sorted(world.http_statuses.items()):
        ctx.metric(f"http.{status}", n)
    for kind in ("actor.acquired", "actor.handoff", "actor.lease_lost"):
        ctx.metric(kind, world.journal.counts.get(kind, 0))
    ctx.metric("oracle.prompts", world.auditor.requests)
    if bool(ctx.params["exempt_deposed"]):
        ctx.metric("oracle.deposed_steps", world.auditor.deposed_steps)
    for name, value in world.auditor.context.metrics().items():
        ctx.metric(name, value)
    ctx.metric("oracle.outcomes", world.auditor.checked_outcomes)
    ctx.metric("oracle.rule_checks", world.auditor.rule_checks)
    ctx.metric("oracle.effects", len(world.ledger.applied))
    ctx.metric("oracle.durable_checks", record.durable_checks)
    ctx.metric("oracle.steps", world.journal.steps.steps)
    fresh = ctx.state.get("fresh")
    if isinstance(fresh, FreshPrompts):
        ctx.metric("oracle.fresh_prompts", fresh.checked)
        ctx.metric("oracle.prompt_metadata", fresh.metadata)
        ctx.metric("oracle.block_fields", fresh.fields)
    shown_calls = ctx.state.get("shown_calls")
    if isinstance(shown_calls, ShownCalls):
        ctx.metric("oracle.shown_calls", shown_calls.judged)


def _server_id(ctx: WorkloadContext, plans: list[AgentPlan], number: int) -> str | None:
    """The server's id of agent ``number`` (None until it is created)."""
    link = ctx.state.get("link", ctx.state.get("direct"))
    if not 1 <= number <= len(plans):  # not a planned agent: the surface walk's own (a900)?
        surface = ctx.state.get("surface")
        if isinstance(surface, SurfaceWalker) and number == 900:
            return surface.agent
        wire = ctx.state.get("wire")  # ... or the wire walk's (a901)
        if isinstance(wire, WireWalker) and number == 901:
            return wire.agent
        contract = ctx.state.get("contract")  # ... or the contract walk's (a905)
        if isinstance(contract, ContractWalker) and number == 905:
            return contract.agent
        fields = ctx.state.get("fields")  # ... or the fields walk's (a903)
        if isinstance(fields, FieldsWalker) and number in (903, 904):
            return fields.agent if number == 903 else fields.big_agent
        handover = ctx.state.get("handover")  # ... or the handover walk's (a902)
        return handover.agent if isinstance(handover, HandoverWalker) and number == 902 else None
    return None if link is None else link.server_id(plans[number - 1])


def _node_clock(ctx: WorkloadContext) -> float:
    """The clock of the node the calling task runs on (a server node, calling the model)."""
    node = ctx.sim.current_node()
    assert node is not None
    return sim_ports(node).clock.now()


def _world(ctx: WorkloadContext) -> World:
    world = ctx.state.get("world")
    assert isinstance(world, World), "the agents workload did not run"
    return world


def _record(ctx: WorkloadContext) -> RunRecord:
    record = ctx.state.get("record")
    assert isinstance(record, RunRecord), "the agents workload did not run"
    return record


def _holds(problems: list[str], what: str) -> None:
    shown = "; ".join(problems[:5]) + (
        f"; ... ({len(problems)} in all)" if len(problems) > 5 else ""
    )
    assert not problems, f"{what}: {shown}"


@invariant
def interrupted_runs_finished(ctx: WorkloadContext) -> None:
    """Every run left ``running`` by an activation that died (a crash, a lost lease, a
    handoff mid-run) is finished by the next activation of its agent before that activation
    serves anything, for the agent's own history and each conversation (_agent_recovery)."""
    journal = _world(ctx).journal
    _holds(
        check_recovery(journal.runs, journal.entries, journal.crashes),
        "an interrupted run was not finished on reactivation",
    )


@invariant
def runs_end_cleanly(ctx: WorkloadContext) -> None:
    """No run ends with stop reason ``error``, the agent loop's catch-all for an exception
    it did not expect: every fault the world injects has its own stop reason or is retried;
    and every run record's status is the one Letta gives its stop reason (_agent_recovery)."""
    runs = _world(ctx).journal.runs
    _holds(check_clean_ends(runs), "a run ended in an internal error")
    _holds(check_run_statuses(runs), "a run's status is not the one its stop reason means")


@invariant
def background_runs_followed(ctx: WorkloadContext) -> None:
    """Background runs as their clients followed them: ``seq_id`` 1, 2, 3, ... with no gap
    or repeat across resumes, and exactly the run's stored messages once it ended."""
    background = ctx.state.get("background")
    if isinstance(background, BackgroundRuns):
        _holds(check_followed(background), "background runs followed wrongly")


@invariant
def conversations_isolated(ctx: WorkloadContext) -> None:
    """Every acknowledged input of a conversation is in that conversation's history exactly
    once, in order, and in no other thread; a fork holds a copy of its source; each prompt
    shows one thread, and the model saw every acknowledged input; the conversations list
    pages each once (_agent_threads)."""
    threads = ctx.state.get("threads")
    if isinstance(threads, Threads):
        _holds(threads.check(), "conversations mixed or lost")


@invariant
def lists_page_exactly(ctx: WorkloadContext) -> None:
    """Every list walked (with ``list_walks``) reads the same items oldest first and newest
    first, following ``after`` or ``before`` cursors in pages smaller than the list: no gap,
    no repeat, in order, exactly what the workload made (_agent_lists)."""
    walker = ctx.state.get("lists")
    if isinstance(walker, ListWalker):
        _holds(walker.problems, "a list pages wrongly")


@invariant
def created_once(ctx: WorkloadContext) -> None:
    """Each conversation, passage, block and tool the client created (with
    ``ambiguous_creates``) exists exactly once, listed by the API and in the database: never
    twice (unless an attempt got no answer and may have landed late), and, once acknowledged,
    under the id the client was given (_agent_creates)."""
    creates = ctx.state.get("creates")
    if isinstance(creates, Creates):
        _holds(creates.problems, "a create did not happen exactly once")


@invariant
def lists_filter_exactly(ctx: WorkloadContext) -> None:
    """(With ``list_filters``.) The agents list shows each acknowledged agent once, with its
    planned tags; every filter (name, a part of the name, tags any or all), paged in ones and
    twos both ways, lists exactly the agents the model's filter keeps, in order
    (_agent_filters)."""
    walker = ctx.state.get("filters")
    if isinstance(walker, FilterWalker):
        _holds(walker.problems, "a filtered list is wrong")


@invariant
def lists_directory_exactly(ctx: WorkloadContext) -> None:
    """(With ``directory``.) The cross-agent lists and searches against the model: each
    filter of blocks, tags, tools, messages and agents (by identity), paged in small pages
    both ways, is the unfiltered reference filtered by the documented predicate; made blocks
    and tools are listed as made (an update keeps what it omits); a block's agents are those
    holding it; tool searches by tags and message searches answer only matches, each hit
    attributed to its agent (_agent_directory_checks)."""
    directory = ctx.state.get("directory")
    if isinstance(directory, DirectoryWalker):
        _holds(check_directory(directory.log), "a cross-agent list or search is wrong")


@invariant
def api_surface_contract(ctx: WorkloadContext) -> None:
    """(With ``surface``.) The REST surface against the model and the documented contract:
    an update changes exactly the fields it gives (falsy ones too), a delete leaves nothing
    listing the block, lists are in their documented order and paged without loss (steps by
    feedback and tags, a folder's and an agent's files), a finished stream ends with its stop
    reason and usage whatever types were asked, export then import is an equivalent agent with
    fresh ids, and every error answers its documented status with x-should-retry
    (_agent_surface_checks)."""
    surface = ctx.state.get("surface")
    if isinstance(surface, SurfaceWalker):
        _holds(check_surface(surface.log), "the REST surface broke its contract")


@invariant
def catalog_contract(ctx: WorkloadContext) -> None:
    """(With ``catalog``.) The shared catalog, agent files and message search against the
    model and the documented contract: a block made without a limit has Letta's default; the
    archives, a folder's agents and a block's agents read the same in pages (both cursors,
    both orders) as in one; filters keep exactly what they name; scheduled messages page with
    an exact has_next_page; importing a document the client wrote and exporting the agent
    gives the document back; a full-text search ranks by the share of the query's words
    (_agent_catalog_checks)."""
    catalog = ctx.state.get("catalog")
    if isinstance(catalog, CatalogWalker):
        _holds(check_catalog(catalog.log), "the catalog broke its contract")


def _handover_problems(ctx: WorkloadContext, handover: HandoverWalker) -> list[str]:
    retries = [
        e.time
        for e in _world(ctx).journal.entries
        if isinstance(e, Observed) and e.kind == "service.retry"
    ]
    return check_handover(handover.log, retries)


@invariant
def handover_contract(ctx: WorkloadContext) -> None:
    """(With ``handover``.) Requests that cross nodes, against the documented contract: a
    missing thing is a 404 (unless the server retried after an unknown outcome); a tool run
    through the API runs at most once per request that reached the server; a send retried with
    its otid after other runs is answered as it first was; a run create_async answered exists
    at once; an agent file's steps and results' statuses survive import and export; a sandbox's
    files follow its agent to other nodes (_agent_handover_checks)."""
    handover = ctx.state.get("handover")
    if isinstance(handover, HandoverWalker):
        _holds(_handover_problems(ctx, handover), "requests across nodes broke the contract")


@invariant
def http_refusals_documented(ctx: WorkloadContext) -> None:
    """(With ``wire``.) A request inside every limit of the HTTP server is served and leaves
    its connection usable (closed for HTTP/1.0); one over a limit gets its documented status
    (413, 431, 408, 505) with a JSON detail and ``connection: close``, is not applied, and the
    node serves the next connection; a slow connection delays no other (_agent_wire_checks)."""
    wire = ctx.state.get("wire")
    if isinstance(wire, WireWalker):
        _holds(check_wire(wire.log), "the HTTP server broke its documented limits")


@invariant
def message_views_agree(ctx: WorkloadContext) -> None:
    """(With ``wire``.) Every view of a history agrees: use_assistant_message either way shows
    send_message as the documented type, the two readings differ by exactly that; tool returns
    answer calls shown before them; type-filtered pages are the history filtered; a
    conversation lists its own turns only; runs by conversation are that conversation's; a
    list newest first is oldest first reversed (_agent_wire_checks)."""
    wire = ctx.state.get("wire")
    if isinstance(wire, WireWalker):
        _holds(check_message_views(wire.log), "the message views disagree")


@invariant
def message_fields_kept(ctx: WorkloadContext) -> None:
    """(With ``message_fields``.) An input is stored with the content, name and otid sent; the
    two renderings of a message agree on its date, run, step and otid; a model step's messages
    name a step of their run; answers show what is stored; a client's result or denial is the
    call's one result, with its status; a page is short only at the end (_agent_fields_checks)."""
    fields = ctx.state.get("fields")
    if isinstance(fields, FieldsWalker):
        _holds(check_fields(fields.fields), "a message's fields were not kept")


@invariant
def prompts_show_stored_memory(ctx: WorkloadContext) -> None:
    """(With ``fresh_prompts``.) Every step's prompt shows the agent's memory blocks exactly
    as the database holds them when the model is called: a write that landed, even one whose
    acknowledgement was lost, is never missing, and nothing unstored is shown (_agent_fresh)."""
    fresh = ctx.state.get("fresh")
    if isinstance(fresh, FreshPrompts):
        _holds(fresh.problems, "a prompt shows memory the database does not hold")
    shown = ctx.state.get("shown_calls")  # session 17 (llmL): the model's calls as it made them
    if isinstance(shown, ShownCalls):
        _holds(shown.problems, "a prompt shows a call other than the model made")


@invariant
def polls_consistent(ctx: WorkloadContext) -> None:
    """Every agent state a client polled mid-run is the agent it asked for, its memory shows
    that agent's marker and no other's, and its blocks fit their limits; its message_ids come
    in the order of the agent's history (_agent_polls)."""
    poller = ctx.state.get("poller")
    if isinstance(poller, Poller):
        order = check_polled_order(poller.seen, _record(ctx).histories)
        _holds(poller.problems + order, "a polled agent state is wrong")


@invariant
def no_acknowledged_message_lost(ctx: WorkloadContext) -> None:
    """Every acknowledged send's input and response are in the final history exactly once,
    after the agent's first messages (its system message, boot sequence), also there once."""
    record = _record(ctx)
    _holds(check_acknowledged(record.acks, record.histories), "acknowledged messages lost")
    types = {p.agent_id: p.agent_type for p in record.plans}
    _holds(check_initial(record.histories, types), "first messages wrong")


@invariant
def single_activation(ctx: WorkloadContext) -> None:
    """No two activations of one agent ever held committed writes at once."""
    world = ctx.state["world"]
    assert isinstance(world, World)
    _holds(check_single_activation(world.journal.entries), "single activation violated")


@invariant
def no_mixing_across_agents(ctx: WorkloadContext) -> None:
    """Each message in an agent's history (and its memory) belongs to that agent."""
    record = _record(ctx)
    sent = {p.agent_id: [m.text for m in p.messages] for p in record.plans}
    numbers = {p.agent_id: p.number for p in record.plans}
    problems = check_no_mixing(record.histories, record.blocks, sent, numbers)
    _holds(problems, "messages mixed across agents")


@invariant
def every_request_completed(ctx: WorkloadContext) -> None:
    """Every request was acknowledged (the liveness phase bounds when)."""
    record = _record(ctx)
    problems = check_completed(record.requests.values())
    missing = [
        f"a{p.number} #{m.index}: never sent"
        for p in record.plans
        for m in p.messages
        if f"a{p.number} #{m.index}" not in record.requests
    ]
    _holds(problems + missing, "requests not completed")


@invariant
def memory_blocks_within_limits(ctx: WorkloadContext) -> None:
    """Every memory block's value fits its limit, and read-only blocks never change."""
    record = _record(ctx)
    read_only = {
        (plan.agent_id, b.label): b.value
        for plan in record.plans
        for b in plan.blocks
        if b.read_only
    }
    problems = check_blocks(record.blocks) + check_read_only(record.blocks, read_only)
    _holds(problems, "memory blocks broken")


@invariant
def llm_sees_one_agent(ctx: WorkloadContext) -> None:
    """Every request the model got shows exactly one agent's data, that agent's memory (its
    marker, values within their limits, read-only blocks unchanged), and is one the real API
    accepts."""
    auditor = _world(ctx).auditor
    problems = [
        p for kind in ("isolation", "memory", "api") for p in auditor.problems.get(kind, [])
    ]
    _holds(problems, "what the model was shown is wrong")


@invariant
def llm_port_faithful(ctx: WorkloadContext) -> None:
    """Through the real SDK (``transport = "anthropic_api"``): every answer the LLM adapter
    gave the agent is the answer the model sent (blocks, tool calls, stop reason, usage), a
    stream the model cut off never became an answer, and the agent got a non-retryable
    error only for a request the model refused (_agent_llm_checks)."""
    _holds(_world(ctx).model.problems(), "the LLM adapter changed what the model said")


@invariant
def server_raised_nothing(ctx: WorkloadContext) -> None:
    """No request made a node's HTTP server report a problem: no exception escaped the API app
    (a 500 the API never means to send), and the app finished every response it started
    (_agent_server_log). Over ``via = "direct"`` there is no HTTP server and nothing to see."""
    _holds(_world(ctx).server_log.problems, "the HTTP server reported a problem")


@invariant
def context_complete(ctx: WorkloadContext) -> None:
    """Once the model has been shown an input, every later prompt of that agent shows it, in
    context or quoted in the summary of the messages compaction took out, and no compaction is
    stored twice (_agent_compaction)."""
    problems = check_summaries(_record(ctx).histories) + _world(ctx).auditor.context.problems
    _holds(problems, "the context lost or repeated messages")


@invariant
def tool_outcomes_correct(ctx: WorkloadContext) -> None:
    """Boundary edits (at, below and above a block's limit; read-only blocks; missing text),
    junk calls (unknown tools, bad arguments, broken JSON) and calls of tools the agent's rules
    have used up got the outcome any correct agent gives; and the model was never offered a
    tool that its ``max_count_per_step`` rule had used up in the run (_agent_rules)."""
    _holds(_world(ctx).auditor.problems.get("outcome", []), "a tool call got the wrong outcome")


@invariant
def turns_complete(ctx: WorkloadContext) -> None:
    """Every acknowledged turn ended with a reply to its message or an explicit stop reason,
    and every stored message the model wrote is part of an answer it completed (a cut stream
    never becomes an answer)."""
    record, auditor = _record(ctx), _world(ctx).auditor
    markers = {p.agent_id: p.marker for p in record.plans}
    problems = check_turns(record.acks, markers) + check_step_budgets(record.acks, record.histories)
    problems += check_model_said(record.histories, auditor.texts, auditor.calls)
    # where runs stop (_agent_stops): a reply ends its run; invalid_tool_call is earned
    problems += check_reply_ends_run(record.histories)
    problems += check_results_once(record.histories, auditor.siblings)
    limit = _world(ctx).loop.max_invalid_steps
    problems += check_invalid_stops(record.acks, record.histories, limit)
    problems += check_told_stop_reasons(record.acks, _world(ctx).journal.runs)
    _holds(problems, "a turn did not complete properly")


@invariant
def steps_recorded(ctx: WorkloadContext) -> None:
    """Every step was committed with its messages, and every acknowledged run's steps are
    stored, its own, in order, as many as its usage reported (``_agent_steps``)."""
    problems = _world(ctx).journal.steps.problems + list(ctx.state.get("steps", []))
    _holds(problems, "a run's steps are wrong")


@invariant
def acknowledged_is_durable(ctx: WorkloadContext) -> None:
    """At every acknowledgement and every node restart, the database itself holds each
    acknowledged input exactly once, in order, with the answer the client was given."""
    _holds(_record(ctx).durable, "an acknowledged message was not durable")


@invariant
def streams_match_results(ctx: WorkloadContext) -> None:
    """A streamed turn's pieces, joined per message, equal the turn's result, and the stream
    is closed when the turn ends; a stream the server finished (over HTTP) carried a stop
    reason or an error frame; a turn's JSON answer (over HTTP) holds the agent's messages, not
    the input (LettaResponse.messages has no user_message)."""
    record = _record(ctx)
    unclosed = [f"{key}: the stream stayed open after the turn" for key in record.unclosed]
    link = ctx.state.get("link")
    unclosed += list(getattr(link, "unterminated", []))
    unclosed += list(getattr(link, "echoed", []))
    _holds(check_streams(record.streams) + unclosed, "a stream differs from its result")


@invariant
def tool_effects_exactly_once(ctx: WorkloadContext) -> None:
    """Memory edits and archival inserts are stored once; every completed call of a tool with
    a side effect (custom, sandbox Python, MCP) took effect in the external service exactly
    once, under its own id, and never again once its result was committed; refused calls
    never took effect; an MCP call that timed out is not sent again by the same activation
    (its effect may have happened)."""
    record, world = _record(ctx), _world(ctx)
    twice = made_twice(record.histories)
    problems = check_exactly_once(
        record.blocks, record.passages, world.journal.entries, world.journal.executions, twice
    )
    ledger, made = world.ledger, world.auditor.call_ids
    calls = {key: call for key, call in ledger.calls.items() if key in made}
    problems += check_effects(ledger.applied, calls, world.journal.returns, ledger.calls)
    problems += check_resends(world.journal.sent, ledger.applied)
    _holds(problems, "a tool's effect was not exactly once")


@invariant
def mcp_recovers(ctx: WorkloadContext) -> None:
    """Once every fault has healed, each node's static MCP tools answer again: a node whose
    MCP calls after the heal all failed kept a server broken that was up."""
    healed = ctx.scenario.heal_at
    if healed is None:
        return
    _holds(
        check_mcp_recovers(_world(ctx).journal.mcp_calls, healed),
        "MCP tools stayed broken after the faults healed",
    )


def _contract(ctx: WorkloadContext) -> ContractWalker | None:
    contract = ctx.state.get("contract")
    return contract if isinstance(contract, ContractWalker) else None


@invariant
def api_key_enforced(ctx: WorkloadContext) -> None:
    """(With ``contract``.) With an API key set, every route but health answers 401 (a JSON
    detail, x-should-retry false) without the key, with another scheme or another key, the
    schema routes included, and a refused write is not applied (_agent_contract_checks)."""
    contract = _contract(ctx)
    if contract is not None:
        _holds(
            contract_checks.check_auth(contract.log), "the API key was not enforced as documented"
        )


@invariant
def list_parameters_documented(ctx: WorkloadContext) -> None:
    """(With ``contract``.) A list without order or limit is the list with the documented
    defaults, desc is asc reversed, every limit 0-1000 is served (1000 lists all, 0 none) and
    1001 is a 422 (_agent_contract_checks)."""
    contract = _contract(ctx)
    if contract is not None:
        _holds(
            contract_checks.check_lists(contract.log),
            "a list parameter broke its documented meaning",
        )


@invariant
def uploads_read_back_whole(ctx: WorkloadContext) -> None:
    """(With ``contract_uploads``.) A file uploaded to a folder reads back with the size the
    client sent and, once processed, with the text it sent (_contract_uploads)."""
    contract = _contract(ctx)
    if contract is not None:
        _holds(
            contract_checks.check_uploads(contract.log),
            "an uploaded file was not stored whole",
        )


@invariant
def quiet_streams_complete(ctx: WorkloadContext) -> None:
    """(With ``contract``.) Every stream the server finished, with or without pings, also one
    whose run was slower than the ping interval to start, ends with stop_reason and
    usage_statistics, and its message frames are its run's stored messages
    (_agent_contract_checks)."""
    contract = _contract(ctx)
    if contract is not None:
        _holds(contract_checks.check_streams(contract.log), "a stream did not carry its run")


@invariant
def http_limits_exact(ctx: WorkloadContext) -> None:
    """(With ``contract``.) A head of exactly max_header_bytes is served, one byte more is a
    431 with a JSON detail that closes the connection (_agent_contract_checks)."""
    contract = _contract(ctx)
    if contract is not None:
        _holds(
            contract_checks.check_limits(contract.log), "the HTTP server's head limit is not exact"
        )


@invariant
def refusals_documented(ctx: WorkloadContext) -> None:
    """(With ``contract``.) A well-formed request the state refuses is a 400, an unknown cursor
    a 404, a value the schema refuses a 422, each with a JSON detail and x-should-retry false
    (_agent_contract_checks)."""
    contract = _contract(ctx)
    if contract is not None:
        _holds(contract_checks.check_refusals(contract.log), "a refusal has the wrong status")


def _cold(ctx: WorkloadContext) -> ColdWalker | None:
    """The cold walk to judge; ``None`` (and the metric says so) when ``via = 'direct'``."""
    cold: ColdWalker | None = ctx.state.get("cold")
    if cold is None and ctx.state.get("cold_skipped"):
        ctx.metric("cold.restarted", 0)  # e.g. agent_chaos --set workload.params.via=direct
        return None
    assert cold is not None, "cold_restart: the walk did not run (is the parameter on?)"
    return cold


@invariant
def cold_restart_changes_nothing(ctx: WorkloadContext) -> None:
    """``cold_restart``: what the API showed before every server node was restarted at once is
    what it shows after (``_agent_cold``)."""
    cold = _cold(ctx)
    if cold is not None:
        _holds(check_cold(cold.log), "a cold restart changed what the API shows")


@invariant
def api_views_agree(ctx: WorkloadContext) -> None:
    """``cold_restart``: one thing shown by two routes (a list and its item's route, an item
    nested in another) is shown the same, before and after the restart (``_agent_cold``)."""
    cold = _cold(ctx)
    if cold is not None:
        problems = check_views(cold.log.before, "before the restart")
        _holds(problems + check_views(cold.log.after, "after it"), "two routes disagree")


@invariant
def settings_contract(ctx: WorkloadContext) -> None:
    """(With ``settings``.) An agent's settings in and out against the model: it shows what it
    was created with, whichever shape carried its model; a PATCH changes exactly the fields it
    gives; an imported copy shows the source's settings, rules, blocks and open files, shares
    no block, and exports as the document it came from (_agent_settings_checks)."""
    settings = ctx.state.get("settings")
    if isinstance(settings, SettingsWalker):
        _holds(check_settings(settings.log), "the agent settings broke their contract")


@invariant
def deletes_are_total(ctx: WorkloadContext) -> None:
    """(With ``deletes``.) A delete the server acknowledged is total and lasting: the thing
    answers 404 and is in no list and no agent that showed it (an archive's passages go with
    it), at once and five virtual seconds later; a thing never deleted is still everywhere it
    was (_agent_deletes_checks)."""
    deletes = ctx.state.get("deletes")
    if isinstance(deletes, DeleteWalker):
        _holds(check_deletes(deletes.log), "a delete is not total, or touched something else")


@invariant
def readback_consistent(ctx: WorkloadContext) -> None:
    """(With ``readback``.) What one client made and changed shows as it set it through every
    route that shows it; every list it read is the same newest first reversed and walked by
    either cursor in small pages; a filter with a limit keeps the first items of the unfiltered
    list it names; a send's answer holds no user_message and the history keeps the input's
    otid (_agent_readback_checks)."""
    readback = ctx.state.get("readback")
    if isinstance(readback, ReadbackWalker):
        _holds(check_readback(readback.log), "what the client wrote does not read back")


def _resource_problems(walker: ResourceWalker) -> list[str]:
    return check_readback(walker.log) + walker.problems_found()


@invariant
def resources_consistent(ctx: WorkloadContext) -> None:
    """(With ``resources``.) Tool rules of every type, approvals, conversations, message
    search, MCP servers and a folder nested at the documented limit read back as the client
    set them through every route that shows them (readback_consistent's properties), no answer
    shows a secret the client sent, and what the contract refuses is refused
    (_agent_resources)."""
    resources = ctx.state.get("resources")
    if isinstance(resources, ResourceWalker):
        _holds(_resource_problems(resources), "what the client set does not read back")


@invariant
def imports_contract(ctx: WorkloadContext) -> None:
    """(With ``imports``.) An agent-file import does what its options say (the copy suffix, a
    name, a model, strip_messages, override_existing_tools), keeps the source's file limits
    and matches tools by name; an export with scrub_messages has no message; a react agent is
    given no memory tool (_agent_imports)."""
    imports = ctx.state.get("imports")
    if isinstance(imports, ImportsWalker):
        _holds(check_imports(imports.log), "an import did not do what its options say")


@invariant
def retry_advice_honest(ctx: WorkloadContext) -> None:
    """(With ``retry_advice``.) A client that sends messages without an otid and inserts
    passages once each, retrying only when told to (x-should-retry: true), finds each stored
    at most once, and each acknowledged one stored (_agent_advice)."""
    advice = ctx.state.get("retry_advice")
    if isinstance(advice, AdviceWalker):
        _holds(check_advice(advice.log), "following the server's retry advice stored twice")


@invariant
def graceful_stops_bounded(ctx: WorkloadContext) -> None:
    """(With ``graceful_stops``.) A graceful stop of a node's HTTP server returns within its
    grace (requests still running then are cancelled, not waited for) with the server stopped
    and no connection open (_agent_drain)."""
    drains = ctx.state.get("drains")
    if isinstance(drains, Drains):
        _holds(check_drains(drains.stops), "a graceful stop broke its contract")


@invariant
def limits_accepted(ctx: WorkloadContext) -> None:
    """(With ``limits``.) Through the production server's default options, a block label of
    100 characters and a value of 20,000 (a body well over 16 KiB) are accepted and read back
    as sent, standalone and in an agent's memory; a label one over, or outside Letta's pattern,
    is refused with a 4xx and makes nothing (_agent_limits)."""
    limits = ctx.state.get("limits")
    if isinstance(limits, LimitsWalker):
        _holds(check_limits(limits.log), "a value at a documented limit was not accepted")


def _probes(ctx: WorkloadContext) -> ProbeLog | None:
    contract = _contract(ctx)
    return contract.probe_log if contract is not None and contract.probes else None


@invariant
def no_internal_errors(ctx: WorkloadContext) -> None:
    """No request is answered 500: the error table gives every failure the server expects a
    status of its own, so a 500 is an exception no layer meant (judged from the API apps' own
    reports of the 5xx they answered; _contract_probes_checks)."""
    _holds(
        check_internal_errors(_world(ctx).journal.internal_errors),
        "the server answered 500 Internal Server Error",
    )


@invariant
def cancels_reach_only_their_runs(ctx: WorkloadContext) -> None:
    """(With ``contract_probes``.) Cancelling a conversation asks only its runs to stop: a run
    of the agent's own history never ends cancelled (_contract_probes_checks)."""
    log = _probes(ctx)
    if log is not None:
        _holds(check_cancels(log), "a cancel reached runs it did not name")


@invariant
def searches_read_whole_texts(ctx: WorkloadContext) -> None:
    """(With ``contract_probes``.) A passage holding the word searched for ranks above
    passages sharing nothing with it, also when the word ends a long passage
    (_contract_probes_checks)."""
    log = _probes(ctx)
    if log is not None:
        _holds(check_ranks(log), "a search missed a word of a stored text")


@invariant
def file_deletes_at_once(ctx: WorkloadContext) -> None:
    """(With ``contract_probes``.) Right after its delete is acknowledged, a folder's file is
    not found and not listed (_contract_probes_checks)."""
    log = _probes(ctx)
    if log is not None:
        _holds(check_file_deletes(log), "a deleted file was still there")
