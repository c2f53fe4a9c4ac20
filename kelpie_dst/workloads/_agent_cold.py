"""What a user reads of an agent does not depend on whether it was in memory: the WARM-COLD
oracle (``cold_reads``, session 15).

An active agent serves reads from its runtime: the agent record, its blocks, its history and
context window, its archive, its loaded conversations, all cached in memory and kept in step
with storage by the rule "compute, commit, then apply" (``kelpie_agent/agent/_runtime.py``). A
runtime that forgets to apply a committed change, applies one that did not commit, keeps a
deleted thing, or loads something differently from how it keeps it, answers differently from
a fresh activation reading the same database. So after the workload, with every client done,
the workload reads each agent through the API (warm: on whatever node holds it), makes every
node deactivate it (as an idle agent is deactivated), and reads it again (cold: a fresh
activation loads it from storage). The two readings must be equal, field by field.

What is read: the agent (``GET /v1/agents/{id}``, with its blocks, tools, rules and in-context
message ids), its blocks, its whole history (oldest first, in pages), its archival passages,
its context window, and its conversations. Nothing is compared with a model, so the oracle
judges every field of every scenario that turns it on; it needs the clients quiet, which
the end of the workload guarantees (faults may still fire: a read is tried again until it
answers, and a reading that never answers is skipped, not judged).

:func:`diff` is the pure comparison (``tests/workloads/test_agent_cold.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import trio

from kelpie_agent.actors import ActorId

from ._agent_world import PORT

__all__ = ["ColdLog", "ColdReads", "diff"]


_VOLATILE = frozenset({"last_stop_reason", "last_run_completion", "last_run_duration_ms"})
"""Fields a read may see change without any write: none so far (a fresh activation changes
nothing a user reads). Kept empty on purpose; a field goes here only with a reason."""
_MAX_DIFFS = 6


@attrs.define
class ColdLog:
    compared: int = 0  # agents read warm and cold
    skipped: list[str] = attrs.Factory(list)  # agents a reading could not finish for
    problems: list[str] = attrs.Factory(list)


def diff(warm: Any, cold: Any, path: str = "") -> list[str]:
    """Where two JSON values differ, as ``path: warm -> cold`` lines (at most a few)."""
    out: list[str] = []
    _diff(warm, cold, path or "$", out)
    return out


def _diff(warm: Any, cold: Any, path: str, out: list[str]) -> None:
    if len(out) >= _MAX_DIFFS:
        return
    if isinstance(warm, Mapping) and isinstance(cold, Mapping):
        for key in sorted(set(warm) | set(cold)):
            if key in _VOLATILE:
                continue
            if key not in warm or key not in cold:
                side = "warm" if key in warm else "cold"
                value = warm.get(key, cold.get(key))
                out.append(f"{path}.{key}: only in the {side} reading ({_short(value)})")
                continue
            _diff(warm[key], cold[key], f"{path}.{key}", out)
        return
    if isinstance(warm, list) and isinstance(cold, list):
        if len(warm) != len(cold):
            out.append(f"{path}: {len(warm)} items warm, {len(cold)} cold")
        for i, (a, b) in enumerate(zip(warm, cold, strict=False)):
            _diff(a, b, f"{path}[{i}]", out)
        return
    if warm != cold:
        out.append(f"{path}: {_short(warm)} warm, {_short(cold)} cold")


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


class ColdReads:
    """Read each agent warm, deactivate it everywhere, read it cold, compare."""

    def __init__(
        self,
        http: Any,
        services: Mapping[str, Any],
        nodes: Sequence[str],
        rng: Any,
        retryable: Any,
    ) -> None:
        self.http = http
        self.services = services  # node name -> its live AgentService
        self.nodes = tuple(nodes)
        self.rng = rng
        self.retryable = retryable
        self.log = ColdLog()
        self.requests = 0

    async def run(self) -> None:
        """Every agent the server lists (the clients' and the walkers' alike)."""
        listed = await self._get("/v1/agents/", {"limit": 1000})
        if not isinstance(listed, list):
            self.log.skipped.append("the agent list")
            return
        for agent_id in sorted(a["id"] for a in listed):
            warm = await self._reading(agent_id)
            if warm is None:
                self.log.skipped.append(agent_id)
                continue
            await self._deactivate(agent_id)
            cold = await self._reading(agent_id)
            if cold is None:
                self.log.skipped.append(agent_id)
                continue
            self.log.compared += 1
            for line in diff(warm, cold, agent_id):
                self.log.problems.append(f"read warm and cold: {line}")

    async def _deactivate(self, agent_id: str) -> None:
        actor = ActorId("agent", agent_id)
        for name in sorted(self.services):
            service = self.services[name]
            if service.running:
                with trio.move_on_after(30):
                    await service.dispatcher.deactivate(actor)

    async def _reading(self, agent_id: str) -> dict[str, Any] | None:
        base = f"/v1/agents/{agent_id}"
        reading: dict[str, Any] = {}
        for name, path, query in (
            ("agent", base, {}),
            ("blocks", f"{base}/core-memory/blocks", {}),
            ("passages", f"{base}/archival-memory", {"limit": 1000, "ascending": "true"}),
            ("conversations", "/v1/conversations/", {"agent_id": agent_id, "limit": 1000}),
        ):
            got = await self._get(path, query)
            if got is None:
                return None
            reading[name] = got
        messages: list[Any] = []
        while True:
            params: dict[str, Any] = {"limit": 50, "order": "asc"}
            if messages:
                params["after"] = messages[-1]["id"]
            page = await self._get(f"{base}/messages", params)
            if not isinstance(page, list):
                return None
            messages += page
            if len(page) < 50:
                break
        reading["messages"] = messages
        return reading

    async def _get(self, path: str, params: Mapping[str, Any]) -> Any:
        """The JSON of a GET, tried on random live nodes until it answers (None: it never
        did, or the answer was not a success)."""
        for _ in range(12):
            node = self.rng.choice(self.nodes)
            self.requests += 1
            try:
                with trio.fail_after(20):
                    response = await self.http.get(f"http://{node}:{PORT}{path}", params=params)
            except Exception as error:
                if not (isinstance(error, trio.TooSlowError) or self.retryable(error)):
                    raise
            else:
                if response.status_code == 200:
                    return response.json()
                if response.status_code not in (408, 409, 429, 502, 503, 504):
                    return None
            await trio.sleep(1.0 + self.rng.random())
        return None
