"""Self-checking snapshot framing, shared by every sandbox implementation.

A snapshot is ``MAGIC (5) || VERSION (1) || KIND (8, NUL-padded) || SHA-256 (32) || payload``,
where the digest covers everything but itself. The payload is the implementation's own (a tar
for ProcessSandbox, a msgpack'd in-memory filesystem for SimSandbox); ``KIND`` names it, so a
snapshot restored into the wrong kind of sandbox is refused cleanly instead of misparsed.

SHA-256 rather than the CRC32 the storage framing uses: snapshots are megabytes rather than
values of a few bytes, SHA-256 costs well under a millisecond per megabyte, and no damage pattern
of any length is likelier than 2**-256 to pass.
"""

from __future__ import annotations

import hashlib
import struct

from ._errors import CorruptSnapshotError, RestoreError

__all__ = ["HEADER_SIZE", "seal", "unseal", "verify_snapshot"]

MAGIC = b"KSNAP"
VERSION = 1
_HEADER = struct.Struct(">5sB8s32s")
HEADER_SIZE = _HEADER.size


def _kind(kind: str) -> bytes:
    raw = kind.encode("ascii")
    if not 0 < len(raw) <= 8:
        raise ValueError(f"snapshot kind {kind!r} must be 1 to 8 ASCII characters")
    return raw.ljust(8, b"\x00")


def _digest(kind: bytes, payload: bytes) -> bytes:
    h = hashlib.sha256(MAGIC + bytes([VERSION]) + kind)
    h.update(payload)
    return h.digest()


def seal(kind: str, payload: bytes) -> bytes:
    """The snapshot bytes for ``payload`` made by a ``kind`` sandbox."""
    raw = _kind(kind)
    return _HEADER.pack(MAGIC, VERSION, raw, _digest(raw, payload)) + payload


def verify_snapshot(snapshot: bytes) -> None:
    """Check a snapshot's framing and checksum without restoring it (any kind);
    ``CorruptSnapshotError`` if it fails. Lets a caller refuse to keep damaged bytes."""
    if len(snapshot) < HEADER_SIZE:
        raise CorruptSnapshotError(
            f"snapshot is {len(snapshot)} bytes, shorter than its {HEADER_SIZE}-byte header"
        )
    magic, version, raw, digest = _HEADER.unpack_from(snapshot)
    if magic != MAGIC or version != VERSION:
        raise CorruptSnapshotError("not a kelpie sandbox snapshot (bad magic or version byte)")
    if digest != _digest(raw, snapshot[HEADER_SIZE:]):
        raise CorruptSnapshotError("snapshot checksum mismatch: the bytes are corrupted")


def unseal(kind: str, snapshot: bytes) -> bytes:
    """The payload of ``snapshot``; ``CorruptSnapshotError`` unless it verifies, and
    ``RestoreError`` if it verifies but was made by another kind of sandbox."""
    if len(snapshot) < HEADER_SIZE:
        raise CorruptSnapshotError(
            f"snapshot is {len(snapshot)} bytes, shorter than its {HEADER_SIZE}-byte header"
        )
    magic, version, raw, digest = _HEADER.unpack_from(snapshot)
    if magic != MAGIC or version != VERSION:
        raise CorruptSnapshotError("not a kelpie sandbox snapshot (bad magic or version byte)")
    payload = snapshot[HEADER_SIZE:]
    if digest != _digest(raw, payload):
        raise CorruptSnapshotError("snapshot checksum mismatch: the bytes are corrupted")
    if raw != _kind(kind):
        other = raw.rstrip(b"\x00").decode("ascii", errors="replace")
        raise RestoreError(f"snapshot was taken by a {other!r} sandbox, not a {kind!r} one")
    return payload
