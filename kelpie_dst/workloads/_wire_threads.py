"""Background sends to each thread, and each thread's latest run followed (``wire_threads``).

With the workload's ``wire_threads`` (on top of ``wire``), the wire walk's message views add,
after their sends, one **background** send to every thread of the wire agent: its own history
(the conversation ``default``, with ``agent_id``) and each of its two conversations, through
``POST /v1/conversations/{id}/messages`` with ``streaming`` and ``background`` (the answer is
the run followed from storage). Each send waits :data:`GAP` seconds first, so its run is its
thread's latest by ``created_at`` whatever the nodes' clocks say. The otids and runs join the
walk's ``sent`` and ``runs``, so the thread and run views (``ThreadSeen``, ``RunsSeen``) judge
where they landed. Then every thread's latest run is followed with
``POST /v1/conversations/{id}/stream`` and no ``run_id``: a :class:`FollowSeen` each.

The property (:func:`check_follows`, part of ``message_views_agree``): a thread's stream without
a ``run_id`` follows *that thread's* latest run, the run of its background send, and every
message frame it shows is that run's; a background send's frames are its own run's, one run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio

__all__ = ["DENSE", "GAP", "FollowSeen", "check_follows", "dense_reads", "send_and_follow"]

DENSE = ("assistant_message", "reasoning_message", "tool_call_message", "tool_return_message")
"""Every type a turn shows but its input: a page filtered by them gets most of a read, so a
page that needed a second read is likely to be filled past its ``limit`` by it."""

GAP = 5.0
"""Seconds waited before each background send: more than twice the clock skew of the wire
scenarios (``max_skew = 2``), so its run is created after every earlier run of its thread on
any node's clock."""

Lister = Callable[..., Awaitable[Sequence[Any]]]
Stream = Callable[[str, str, Any], Awaitable[tuple[list[dict[str, Any]], list[str]]]]


@attrs.frozen
class FollowSeen:
    """What one stream showed: ``expected`` is the run it had to show (``None``: not known,
    the background send's own frames named no run), ``shown`` the runs its frames named."""

    what: str
    expected: str | None
    shown: tuple[str, ...]


async def send_and_follow(
    stream: Stream,
    agent: str,
    threads: Sequence[str],
    sent: dict[str, set[str]],
    runs: dict[str, set[str]],
    follows: list[FollowSeen],
    mark: str,
) -> None:
    """The background sends, then the follows (see the module docstring). ``stream(what,
    path, body)`` posts and reads a stream (retried like every walk request); ``threads``
    starts with ``"default"``; ``sent`` and ``runs`` (conversations only) are the walk's."""
    latest: dict[str, str | None] = {}
    for n, thread in enumerate(threads):
        await trio.sleep(GAP)
        otid = f"wire-bg-{n}"
        body: dict[str, Any] = {
            "messages": [
                {"role": "user", "content": f"remember bg note {n} ({mark})", "otid": otid}
            ],
            "streaming": True,
            "background": True,
            "agent_id": agent,
        }
        what = f"background send {n} to {thread}"
        frames, _ = await stream(what, f"/v1/conversations/{thread}/messages", body)
        sent[thread].add(otid)
        named = _runs(frames)
        if thread in runs:
            runs[thread] |= set(named)
        latest[thread] = named[0] if len(named) == 1 else None
        follows.append(FollowSeen(what, latest[thread], named))
    for thread in threads:
        if latest[thread] is None:
            continue  # its send's frames were judged already
        what = f"the latest run of {thread}, followed"
        frames, _ = await stream(what, f"/v1/conversations/{thread}/stream", {"agent_id": agent})
        follows.append(FollowSeen(what, latest[thread], _runs(frames)))


async def dense_reads(
    lister: Lister, what: str, path: str, full: Sequence[Any], use: bool, typed: list[Any]
) -> None:
    """Pages of ``path`` filtered by :data:`DENSE`, limits 2 to 4, both orders, each logged
    as a ``TypedSeen`` against ``full`` (the thread oldest first, read with
    ``use_assistant_message=use``): a filtered page is the filtered thread's first ``limit``.
    ``lister(what, path, **params)`` reads a page of ``MsgSeen``."""
    from ._agent_wire_checks import TypedSeen

    for limit in (2, 3, 4):
        for order in ("asc", "desc"):
            params: dict[str, Any] = {
                "order": order,
                "limit": limit,
                "include_return_message_types": list(DENSE),
            }
            if path.startswith("/v1/agents/"):
                params["use_assistant_message"] = use
            got = await lister(f"{what} by type, limit {limit} {order}", path, **params)
            typed.append(
                TypedSeen(
                    f"{what} (use_assistant_message={use})",
                    DENSE,
                    limit,
                    order,
                    tuple(m.id for m in got),
                    tuple(m.id for m in full),
                    tuple(m.type for m in full),
                )
            )


def _runs(frames: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    """The distinct runs the frames name, in order of first appearance."""
    named: dict[str, None] = {}
    for frame in frames:
        run = frame.get("run_id")
        if isinstance(run, str) and run:
            named.setdefault(run)
    return tuple(named)


def check_follows(follows: Sequence[FollowSeen]) -> list[str]:
    """Each stream showed exactly its run: a background send one run (its own), a thread's
    follow the run of that thread's background send."""
    out: list[str] = []
    for f in follows:
        if f.expected is None:
            out.append(f"{f.what}: its frames name the runs {list(f.shown)}, not one run")
        elif list(f.shown) != [f.expected]:
            out.append(f"{f.what}: showed the runs {list(f.shown)}, not {f.expected}")
    return out
