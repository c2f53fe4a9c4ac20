"""Teleport: an agent's sandbox files go with it from node to node.

The sandbox lives in one process, but the agent moves (a handoff, recovery on another node
after its node died, idle deactivation and a later activation). So the sandbox's working area
is saved in the database as an *image* and restored into a fresh sandbox wherever the agent
activates next:

==================================  =========================================================
``sandbox/<agent>``                  :class:`SandboxImage`: size, chunk count, SHA-256 digest
``sandboxchunk/<agent>/<n:08x>``     the snapshot bytes, in chunks of 256 KiB
==================================  =========================================================

**When.** With every tool call that ran in the sandbox (``run_code``, custom tools): right
after the command, the sandbox is snapshotted and the image is written *in the transaction that
commits the call's result* (the run's checkpoint). So a call whose result is committed, an
acknowledged call, never loses its files, and a call whose result is not committed (a crash,
storage giving up) leaves no trace in the image: the sandbox is closed and the next use starts
from the last image, where the call runs again. At deactivation the image is already current;
the sandbox is saved again only if it changed since (it never does through the agent's tools).

**Faults.** A snapshot that fails (``SnapshotError``) or comes back damaged (its checksum is
verified before it is kept) is taken again, ``snapshot_attempts`` times; then the call fails
with ``SandboxSaveError`` and the sandbox is rolled back to the last image. A restore that fails
(``RestoreError``) is retried, reading the image again each time (a checksum mismatch on read is
retried too), ``restore_attempts`` times with backoff; then the tool fails with
``SandboxRestoreError`` naming the cause. A sandbox is never silently handed out empty when an
image exists.
"""

from __future__ import annotations

import hashlib

import attrs
import trio

from kelpie_agent.sandbox import (
    CorruptSnapshotError,
    RestoreError,
    Sandbox,
    SandboxError,
    SnapshotError,
    verify_snapshot,
)

from ._codec import pack, register, unpack
from ._runtime import AgentRuntime

__all__ = [
    "CHUNK",
    "IMAGES",
    "SandboxImage",
    "SandboxRestoreError",
    "SandboxSaveError",
    "capture",
    "chunk_key",
    "image_key",
    "restore_into",
]

IMAGES = b"sandbox/"
CHUNKS = b"sandboxchunk/"
CHUNK = 256 * 1024
SNAPSHOT_ATTEMPTS = 3
RESTORE_ATTEMPTS = 4


class SandboxSaveError(SandboxError):
    """The sandbox could not be snapshotted; the call's changes were rolled back."""


class SandboxRestoreError(SandboxError):
    """The agent's saved sandbox files could not be restored (after retries)."""


@attrs.frozen
class SandboxImage:
    """The saved working area of one agent's sandbox (the chunks hold the bytes)."""

    agent_id: str
    size: int
    chunks: int
    digest: str  # SHA-256 of the snapshot bytes, hex
    taken_at: float
    generation: int = 1  # images saved so far


register("sandbox_image", SandboxImage)


def image_key(agent_id: str) -> bytes:
    return IMAGES + agent_id.encode()


def chunk_key(agent_id: str, n: int) -> bytes:
    return CHUNKS + f"{agent_id}/{n:08x}".encode()


def chunk_prefix(agent_id: str) -> bytes:
    return CHUNKS + f"{agent_id}/".encode()


async def stored_image(rt: AgentRuntime) -> SandboxImage | None:
    data = await rt.get(image_key(rt.agent_id), "the sandbox image")
    return unpack(data) if data is not None else None


async def capture(
    rt: AgentRuntime, sandbox: Sandbox
) -> tuple[SandboxImage, list[tuple[bytes, bytes | None]]]:
    """Snapshot ``sandbox`` (verified; retried) and return the image with the writes that
    store it (a value of None deletes the key). ``SandboxSaveError`` when every attempt
    failed."""
    last: Exception | None = None
    for _ in range(SNAPSHOT_ATTEMPTS):
        try:
            data = await sandbox.snapshot()
            verify_snapshot(data)
        except (SnapshotError, CorruptSnapshotError) as error:
            last = error
            continue
        previous = rt.image if rt.image is not None else await stored_image(rt)
        image = SandboxImage(
            agent_id=rt.agent_id,
            size=len(data),
            chunks=max(1, -(-len(data) // CHUNK)),
            digest=hashlib.sha256(data).hexdigest(),
            taken_at=rt.now(),
            generation=(previous.generation + 1) if previous is not None else 1,
        )
        writes: list[tuple[bytes, bytes | None]] = [
            (chunk_key(rt.agent_id, n), data[n * CHUNK : (n + 1) * CHUNK])
            for n in range(image.chunks)
        ]
        # a smaller image than the last one: its old last chunks go with it (None: delete),
        # or they would stay stored for good, even after the agent is deleted
        stale = range(image.chunks, previous.chunks if previous is not None else 0)
        writes.extend((chunk_key(rt.agent_id, n), None) for n in stale)
        writes.append((image_key(rt.agent_id), pack(image)))
        return image, writes
    raise SandboxSaveError(
        f"the sandbox's files could not be saved after {SNAPSHOT_ATTEMPTS} snapshots "
        f"({type(last).__name__}: {last}); the call's changes were rolled back"
    )


async def _read(rt: AgentRuntime, image: SandboxImage) -> bytes:
    parts = []
    for n in range(image.chunks):
        part = await rt.get(chunk_key(rt.agent_id, n), "a sandbox image chunk")
        if part is None:
            raise CorruptSnapshotError(f"sandbox image chunk {n} of {image.chunks} is missing")
        parts.append(part)
    data = b"".join(parts)[: image.size]
    if hashlib.sha256(data).hexdigest() != image.digest:
        raise CorruptSnapshotError("the stored sandbox image does not match its digest")
    return data


async def restore_into(rt: AgentRuntime, sandbox: Sandbox) -> SandboxImage | None:
    """Restore the agent's saved image (if any) into a freshly booted ``sandbox``; retried.
    ``SandboxRestoreError`` if it cannot be done: never an empty sandbox in its place."""
    image = await stored_image(rt)
    if image is None:
        return None
    last: Exception | None = None
    for attempt in range(RESTORE_ATTEMPTS):
        try:
            await sandbox.restore(await _read(rt, image))
            return image
        except RestoreError as error:  # CorruptSnapshotError included
            last = error
        await trio.sleep(rt.config.storage_backoff * (2**attempt))
    raise SandboxRestoreError(
        f"the agent's saved sandbox files (image {image.generation}, {image.size} bytes) could "
        f"not be restored after {RESTORE_ATTEMPTS} attempts ({type(last).__name__}: {last})"
    )


def image_keys(agent_id: str, image: SandboxImage | None) -> list[bytes]:
    """Every key of an agent's image (to delete it with the agent)."""
    if image is None:
        return [image_key(agent_id)]
    return [image_key(agent_id), *(chunk_key(agent_id, n) for n in range(image.chunks))]
