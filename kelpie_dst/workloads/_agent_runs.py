"""Background runs in the agent workload: some sends start a run with ``create_async`` and
follow it with ``runs.messages.stream``, resuming after the last ``seq_id`` seen when a node
crashes or the connection breaks (Letta's background mode).

Each attempt first asks for the run again with the send's ``otid`` (idempotent: the agent
answers with the run the first attempt started, and activating the agent resumes a run its
dead node left), then follows it from where the client stopped. With ``breaks`` (a share of
attempts, chosen by the otid's hash) the client also drops the stream itself after one to four
frames and reconnects from its last ``seq_id``, once or twice, as a client on a flaky network
does. The oracle, at the client's
boundary (:func:`check_followed`): the frames a client was shown are numbered 1, 2, 3, ...
with no gap and no repeat across every resume, and, once the run ended, they are exactly the
run's stored messages (``runs.messages.list``), in order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import attrs

from ._agent_client import Sent

__all__ = ["BackgroundRuns", "Followed", "IncompleteFollowError", "check_followed"]


@attrs.define
class Followed:
    """One background send as its client saw it, across attempts."""

    otid: str
    run_id: str = ""
    frames: list[tuple[int, str, str]] = attrs.Factory(list)  # (seq_id, id, message_type)
    stored: list[tuple[str, str]] | None = None  # (id, message_type) once the run ended
    attempts: int = 0
    resumed: int = 0  # streams that followed from a seq_id > 0
    breaks: int = 0  # streams the client dropped itself (then reconnected)
    problems: list[str] = attrs.Factory(list)


class IncompleteFollowError(Exception):
    """The run's stream ended before its stop reason (the node went away): retry."""


class BackgroundRuns:
    """Which sends go through background mode (a fixed share, chosen by the otid's hash, so
    no random stream of the workload moves), and what their clients saw."""

    def __init__(self, fraction: float, breaks: float = 0.0) -> None:
        self.fraction = fraction
        self.breaks = breaks
        self.followed: dict[str, Followed] = {}

    def chosen(self, otid: str | None) -> bool:
        if otid is None or self.fraction <= 0:
            return False
        return _share(otid) < self.fraction

    def _cuts(self, otid: str, attempt: int) -> list[int]:
        """Frame counts after which this attempt drops its stream and reconnects (none, one
        or two, by hash: no random stream of the workload moves)."""
        key = f"{otid}/{attempt}"
        if self.breaks <= 0 or _share(key) >= self.breaks:
            return []
        return [1 + int(_share(f"{key}/{i}") * 4) for i in range(1 + (_share(key + "/n") < 0.5))]

    async def send(
        self,
        client: Any,
        agent_id: str,
        body: dict[str, Any],
        max_steps: int,
        text: Callable[[Any], str],
    ) -> Sent:
        otid = str(body["otid"])
        seen = self.followed.setdefault(otid, Followed(otid))
        seen.attempts += 1
        run = await client.agents.messages.create_async(
            agent_id, messages=[body], max_steps=max_steps
        )
        if seen.run_id and run.id != seen.run_id:
            seen.problems.append(f"{otid}: the retry started run {run.id}, not {seen.run_id}")
        seen.run_id = run.id
        stop, steps = None, None
        cuts = self._cuts(otid, seen.attempts)
        while True:
            after = len(seen.frames)
            seen.resumed += after > 0
            stream = await client.runs.messages.stream(run.id, starting_after=after)
            cut = cuts.pop(0) if cuts else None
            got = 0
            chunk: Any
            async for chunk in stream:
                kind = chunk.message_type
                if kind == "stop_reason":
                    stop = chunk.stop_reason
                elif kind == "usage_statistics":
                    steps = chunk.step_count
                elif kind != "ping":
                    number = getattr(chunk, "seq_id", None)
                    if number != len(seen.frames) + 1:
                        seen.problems.append(
                            f"{otid}: run {run.id} sent seq_id {number} after "
                            f"{len(seen.frames)} frames (from starting_after={after})"
                        )
                    seen.frames.append((number or 0, chunk.id, kind))
                    got += 1
                    if got == cut:
                        break
            if got == cut and stop is None:
                await stream.close()  # the client drops the connection, then reconnects
                seen.breaks += 1
                continue
            break
        if stop is None:
            raise IncompleteFollowError(f"the stream of run {run.id} ended before its stop")
        if steps is None:  # Letta's stream ends with the stop reason, then the run's usage
            seen.problems.append(f"{otid}: run {run.id}'s stream ended without its usage")
        page = await client.runs.messages.list(run.id, limit=1000, order="asc")
        seen.stored = [(m.id, m.message_type) for m in page.items]
        texts = [text(m) for m in page.items if m.message_type == "assistant_message"]
        return Sent(
            run.id,
            tuple(i for i, _ in seen.stored),
            str(stop),
            reply=texts[-1] if texts else None,
            steps=steps,
        )


def check_followed(runs: BackgroundRuns) -> list[str]:
    """Every followed run: frames numbered without gaps or repeats across resumes, a stream
    that ends with the stop reason and the run's usage, and, for a run the client saw end,
    exactly the run's stored messages in order."""
    problems: list[str] = []
    for seen in runs.followed.values():
        problems += seen.problems
        if seen.stored is not None:
            shown = [(i, kind) for _, i, kind in seen.frames]
            if shown != seen.stored:
                problems.append(
                    f"{seen.otid}: run {seen.run_id} streamed {shown}, stored {seen.stored}"
                )
    return problems


def _share(key: str) -> float:
    """A number in [0, 1) from ``key``'s hash."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") / 2**64
