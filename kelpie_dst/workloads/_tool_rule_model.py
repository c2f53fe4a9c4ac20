"""A model of Letta's tool rules, and the properties ``agent_tool_rules`` judges with it.

The model is written from the rules' documented contract (Letta's ``ToolRulesSolver``, as
kelpie_agent's ``_tool_rules`` module docstring states it), not from the solver's code:

* the *history* of a run is the tools it called, in order, leaving out calls refused for
  breaking a rule (or any other check);
* with no history yet, ``run_first`` tools are the only ones allowed (with their ``args``
  prefilled);
* otherwise each ``constrain_child_tools`` (after its tool: only its children, with
  ``child_arg_nodes`` prefilled), ``conditional`` (after its tool: the child its output maps
  to, else ``default_child``, else any), ``parent_last_tool`` (its children only right after
  it) and ``max_count_per_step`` (not after ``limit`` calls in the run) rule allows a set;
  the allowed tools are their intersection, and every tool when that is empty;
* the model is offered exactly the allowed tools; a call of another is refused and never runs;
* an ``exit_loop`` tool that ran and succeeded ends the run: the model is not asked again in
  that run (a failed one does not end it: kelpie_agent ends a run on a *successful* terminal
  call, as a memgpt run goes on after any failed call).

:func:`judge_request` checks one request to the model against this: the tools it offers, and
for every earlier step of the same run shown in it, that each call was refused exactly when
the rules forbade it, and ran with the prefilled arguments when the rules prefilled any. It
reads everything from the request (the run's calls and results), so a crash, a retry or a
move to another node changes nothing about what must hold.

:func:`judge_sandbox_counts` checks the sandbox side: every workload tool appends one line to
a file in the agent's sandbox and reports how many lines the file then has, so the k-th call
whose result the agent's history holds must report ``k``: the sandbox's files are exactly
those of the committed calls, whatever crashed or failed to commit in between.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Iterable, Mapping, Sequence

import attrs

from kelpie_agent.llm import LlmRequest, TextBlock, ToolCall, ToolResult

__all__ = [
    "DIRECTIVE",
    "RuleSet",
    "allowed_now",
    "judge_archival_searches",
    "judge_pauses",
    "judge_request",
    "judge_sandbox_counts",
    "judge_timeouts",
    "prefilled_now",
    "result_message",
]

DIRECTIVE = re.compile(r"^(rr-a(\d+)-m\d+) ")
REFUSALS = ("[ToolConstraintError]", "invalid_tool_call:")
_COUNT = re.compile(r"\bn=(\d+)\b")
_MODE = re.compile(r"\bmode=(\S+)")


@attrs.frozen
class RuleSet:
    """One agent's rules, in plain data (the workload makes the ToolRules from it)."""

    tools: tuple[str, ...]  # attached, in order
    run_first: tuple[tuple[str, Mapping[str, str]], ...] = ()  # (tool, args)
    children: tuple[tuple[str, tuple[str, ...], Mapping[str, Mapping[str, str]]], ...] = ()
    parents: tuple[tuple[str, tuple[str, ...]], ...] = ()  # parent_last_tool: (tool, children)
    conditionals: tuple[tuple[str, Mapping[str, str], str | None], ...] = ()  # map, default
    max_counts: tuple[tuple[str, int], ...] = ()
    exits: tuple[str, ...] = ()


def result_message(content: str) -> str:
    """The ``message`` of a packaged tool result (else the text)."""
    try:
        data = json.loads(content)
    except ValueError:
        return content
    if isinstance(data, dict) and "message" in data:
        message = data["message"]
        return message if isinstance(message, str) else json.dumps(message)
    return content


def refused(content: str) -> bool:
    """A result that says the call was refused before it ran."""
    return result_message(content).startswith(REFUSALS)


def failed(content: str) -> bool:
    """A packaged result with status ``Failed`` (the tool did not run, or failed)."""
    try:
        data = json.loads(content)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("status") == "Failed"


def allowed_now(rules: RuleSet, history: Sequence[str], last: str | None) -> frozenset[str]:
    """The tools the model may call next (every attached tool when the rules allow all)."""
    attached = frozenset(rules.tools)
    if not history and rules.run_first:
        first = frozenset(t for t, _ in rules.run_first) & attached
        if first:
            return first
    allowed = set(attached)
    previous = history[-1] if history else None
    for parent, kids, _ in rules.children:
        if previous == parent:
            allowed &= set(kids)
    for parent, kids in rules.parents:
        allowed &= set(kids) if previous == parent else attached - set(kids)
    for parent, mapping, default in rules.conditionals:
        if previous != parent:
            continue
        output = result_message(last) if last is not None else None
        if output is not None and output in mapping:
            allowed &= {mapping[output]}
        elif default is not None:
            allowed &= {default}
    for tool, limit in rules.max_counts:
        if sum(1 for name in history if name == tool) >= limit:
            allowed.discard(tool)
    return frozenset(allowed) if allowed else attached


def prefilled_now(rules: RuleSet, history: Sequence[str], tool: str) -> Mapping[str, str]:
    """The arguments the rules prefill (override) for ``tool`` as the next call."""
    out: dict[str, str] = {}
    if not history:
        for name, first_args in rules.run_first:
            if name == tool:
                out.update(first_args)
    previous = history[-1] if history else None
    for parent, _, nodes in rules.children:
        if previous == parent and tool in nodes:
            out.update(nodes[tool])
    return out


@attrs.frozen
class _Step:
    calls: tuple[tuple[ToolCall, str | None], ...]  # each call with its result text (if shown)


def _run_region(request: LlmRequest) -> tuple[str, int, list[_Step]] | None:
    """The directive (tag), agent number and steps of the run the request steps, if any."""
    messages = request.messages
    start = None
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.role != "user":
            continue
        text = " ".join(b.text for b in message.content if isinstance(b, TextBlock)).strip()
        m = DIRECTIVE.match(text)
        if m is not None:
            start, tag, agent = position, m.group(1), int(m.group(2))
            break
    if start is None:
        return None
    results: dict[str, str] = {}
    for message in messages[start + 1 :]:
        for block in message.content:
            if isinstance(block, ToolResult):
                results[block.tool_call_id] = block.content
    steps = []
    for message in messages[start + 1 :]:
        if message.role != "assistant":
            continue
        calls = tuple((b, results.get(b.id)) for b in message.content if isinstance(b, ToolCall))
        if calls:
            steps.append(_Step(calls))
    return tag, agent, steps


def _args(call: ToolCall) -> Mapping[str, object]:
    try:
        data = json.loads(call.arguments)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def judge_request(request: LlmRequest, rules: Mapping[int, RuleSet], where: str) -> list[str]:
    """What ``request`` shows that breaks the agent's rules (see the module docstring)."""
    region = _run_region(request)
    if region is None:
        return []
    tag, agent, steps = region
    ruleset = rules.get(agent)
    if ruleset is None:
        return []
    problems: list[str] = []
    history: list[str] = []
    last: str | None = None
    for number, step in enumerate(steps, 1):
        allowed = allowed_now(ruleset, history, last)
        base = list(history)
        counts = {name: base.count(name) for name in ruleset.tools}
        for call, result in step.calls:
            if result is None:
                continue  # not answered yet (never the case in a request)
            name = call.name
            limit = dict(ruleset.max_counts).get(name)
            forbidden = name in ruleset.tools and (
                name not in allowed or (limit is not None and counts.get(name, 0) >= limit)
            )
            was_refused = refused(result)
            what = f"{where}: {tag} step {number}: {name}"
            if forbidden and not was_refused:
                problems.append(
                    f"{what} ran although the rules allowed only {sorted(allowed)} after "
                    f"{base or 'nothing'}"
                )
            elif not forbidden and was_refused and name in ruleset.tools:
                problems.append(
                    f"{what} was refused although the rules allowed it after "
                    f"{base or 'nothing'}: {result_message(result)[:160]}"
                )
            if was_refused:
                continue
            expected = prefilled_now(ruleset, base, name)
            mode = _MODE.search(result_message(result))
            wanted = expected.get("mode", _args(call).get("mode", "free"))
            if mode is not None and mode.group(1) != wanted:
                problems.append(
                    f"{what} ran with mode={mode.group(1)}, not {wanted} (the model asked "
                    f"{_args(call).get('mode')!r}; the rules prefill {dict(expected) or 'nothing'})"
                )
            history.append(name)
            counts[name] = counts.get(name, 0) + 1
            last = result
            if name in ruleset.exits and not failed(result):
                problems.append(
                    f"{where}: {tag}: the model was asked again after the exit_loop tool "
                    f"{name} ran in step {number}"
                )
    offered = frozenset(t.name for t in request.tools)
    expected_now = allowed_now(ruleset, history, last)
    if offered != expected_now:
        problems.append(
            f"{where}: {tag} step {len(steps) + 1}: offered {sorted(offered)}, but after "
            f"{history or 'nothing'} the rules allow {sorted(expected_now)}"
        )
    return problems


def judge_sandbox_counts(agent: str, returns: Iterable[tuple[str, str]]) -> list[str]:
    """``returns``: the agent's stored successful results of the workload's tools, in
    history order, as (tool, message). The k-th must report ``n=k`` (if it reports a count).
    Every call was one line more; none of the tools fails once it ran (no sandbox faults)."""
    problems = []
    expected = 0
    for tool, message in returns:
        expected += 1  # every workload tool appends a line (rt_route answers only its choice)
        m = _COUNT.search(message)
        if m is None:
            continue
        if int(m.group(1)) != expected:
            problems.append(
                f"{agent}: stored call {expected} of the sandbox tools ({tool}) found "
                f"{int(m.group(1)) - 1} line(s) in its file, not {expected - 1}: the sandbox's "
                f"files are not those of the committed calls ({message[:120]!r})"
            )
            expected = int(m.group(1))
    return problems


_SLEEP = re.compile(r"^sleep (\d+);")


def judge_timeouts(requests: Iterable[LlmRequest], timeout: float) -> list[str]:
    """``run_code`` calls (``sleep N; ...``) against the tool timeout: one that sleeps past
    ``timeout`` must not succeed; one that sleeps under half of it must not time out."""
    problems: list[str] = []
    seen: set[str] = set()
    for request in requests:
        calls = {
            b.id: b
            for m in request.messages
            for b in m.content
            if isinstance(b, ToolCall) and b.name == "run_code"
        }
        for message in request.messages:
            for block in message.content:
                if not isinstance(block, ToolResult) or block.tool_call_id not in calls:
                    continue
                if block.tool_call_id in seen:
                    continue
                seen.add(block.tool_call_id)
                code = str(_args(calls[block.tool_call_id]).get("code", ""))
                m = _SLEEP.match(code)
                if m is None:
                    continue
                seconds = int(m.group(1))
                text = result_message(block.content)
                if seconds > timeout and not failed(block.content):
                    problems.append(
                        f"run_code {code!r} slept {seconds}s, past the {timeout:g}s tool "
                        f"timeout, and succeeded: {text[:120]!r}"
                    )
                if seconds < timeout / 2 and "TimeoutError" in text:
                    problems.append(
                        f"run_code {code!r} slept {seconds}s, within the {timeout:g}s tool "
                        f"timeout, and was reported timed out: {text[:120]!r}"
                    )
    return problems


def _calls_and_results(requests: Iterable[LlmRequest], tool: str) -> list[tuple[ToolCall, str]]:
    """Each call of ``tool`` the requests show with its result, once (by call id)."""
    out: list[tuple[ToolCall, str]] = []
    seen: set[str] = set()
    for request in requests:
        calls = {
            b.id: b
            for m in request.messages
            for b in m.content
            if isinstance(b, ToolCall) and b.name == tool
        }
        for message in request.messages:
            for block in message.content:
                if not isinstance(block, ToolResult):
                    continue
                key = block.tool_call_id
                if key in calls and key not in seen:
                    seen.add(key)
                    out.append((calls[key], block.content))
    return out


def judge_archival_searches(requests: Iterable[LlmRequest]) -> list[str]:
    """``archival_memory_search`` calls with ``tags``: every hit has all the tags (mode
    ``all``) or at least one of them (``any``, the default), as Letta documents the filter."""
    problems: list[str] = []
    for call, content in _calls_and_results(requests, "archival_memory_search"):
        if failed(content):
            continue
        args = _args(call)
        asked = args.get("tags")
        if not isinstance(asked, list) or not asked:
            continue
        mode = args.get("tag_match_mode") or "any"
        try:
            hits = json.loads(result_message(content))
        except ValueError:
            problems.append(f"archival_memory_search answered no JSON: {content[:120]!r}")
            continue
        for hit in hits if isinstance(hits, list) else []:
            tags = set(hit.get("tags", ())) if isinstance(hit, dict) else set()
            ok = set(asked) <= tags if mode == "all" else bool(set(asked) & tags)
            if not ok:
                problems.append(
                    f"archival_memory_search(tags={asked}, tag_match_mode={mode!r}) returned "
                    f"a passage tagged {sorted(tags)}: {str(hit.get('content'))[:60]!r}"
                )
    return problems


_PAUSED = re.compile(r"^Pausing timed heartbeats for (\d+) min")
PAUSE_MARGIN = 2.0  # seconds: results are stamped to the second


def _when(content: str) -> float | None:
    """The ``time`` of a packaged tool result, as epoch seconds."""
    try:
        data = json.loads(content)
    except ValueError:
        return None
    text = data.get("time") if isinstance(data, dict) else None
    if not isinstance(text, str):
        return None
    try:
        # Letta's time format, as kelpie_agent writes it (the agents' timezone is UTC)
        return _dt.datetime.strptime(text, "%Y-%m-%d %I:%M:%S %p UTC%z").timestamp()
    except ValueError:
        return None


def forced_tools(rules: RuleSet) -> frozenset[str]:
    """The tools after which the loop always goes on: a child, conditional or count rule on
    them (kelpie_agent's ``_tool_rules``: "a child rule or a continue_loop rule"), unless
    they end the run."""
    names = {tool for tool, _, _ in rules.children}
    names |= {tool for tool, _, _ in rules.conditionals}
    names |= {tool for tool, _ in rules.max_counts}
    return frozenset(names - set(rules.exits))


def judge_pauses(request: LlmRequest, rules: Mapping[int, RuleSet], where: str) -> list[str]:
    """A memgpt agent that called ``pause_heartbeats(minutes=m)`` at ``t`` ignores heartbeats
    until ``t + 60 m``: a step that ends within the pause ends its run (unless one of its
    tools forces the loop on), whatever heartbeats it asked for. So no request may follow such
    a step in its run."""
    region = _run_region(request)
    if region is None:
        return []
    tag, agent, steps = region
    ruleset = rules.get(agent)
    if ruleset is None or "pause_heartbeats" not in ruleset.tools:
        return []
    pauses: dict[str, tuple[float, int]] = {}  # call id -> (when, minutes)
    for call, content in _calls_and_results([request], "pause_heartbeats"):
        m, when = _PAUSED.match(result_message(content)), _when(content)
        if m is not None and when is not None and not failed(content):
            pauses[call.id] = (when, int(m.group(1)))
    if not pauses:
        return []
    # a pause of this run counts from its own step on; one of an earlier run, by its time
    in_run = {call.id: n for n, step in enumerate(steps, 1) for call, _ in step.calls}
    forced = forced_tools(ruleset)
    problems = []
    for number, step in enumerate(steps, 1):
        times = [t for _, r in step.calls if r is not None for t in [_when(r)] if t is not None]
        if not times or any(call.name in forced for call, _ in step.calls):
            continue
        end = max(times)
        latest = sorted(
            (t, m) for key, (t, m) in pauses.items() if in_run.get(key, 0) <= number and t <= end
        )
        if not latest:
            continue
        since, minutes = latest[-1]
        if minutes and end < since + 60 * minutes - PAUSE_MARGIN:
            problems.append(
                f"{where}: {tag} step {number} ended {end - since:.0f}s into a "
                f"{minutes}-minute heartbeat pause, yet its run went on"
            )
    return problems
