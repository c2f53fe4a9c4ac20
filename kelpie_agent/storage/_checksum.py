"""The framing every backend stores instead of a bare value.

A framed value is ``FORMAT (1 byte) || CRC32 (4 bytes, big-endian) || value``, where the CRC is
computed over the format byte, the key and the value. Reading a framed value recomputes it and
raises :class:`ChecksumError` on any mismatch, so corrupted bytes are never handed to a caller.

Why CRC32 (``zlib.crc32``): it is in the standard library and runs in C (about 1.2 GB/s on the
development machine, twice blake2b's speed), it detects every single-bit error and every burst
of up to 32 bits, and misses random damage with probability 2**-32. CRC32C has the same
guarantees but would need a dependency; a cryptographic hash (blake2b) would cost more bytes and
time to defend against an adversary who is not in our threat model (we defend against bit rot,
torn or misdirected writes, and injected faults).
Covering the key catches a value stored under the wrong key; the format byte leaves room to
change the framing later without ambiguity.
"""

from __future__ import annotations

import struct
import zlib

from ._errors import ChecksumError
from ._keys import short

__all__ = ["FORMAT", "HEADER_SIZE", "frame", "unframe"]

FORMAT = 1
HEADER_SIZE = 5
_HEADER = struct.Struct(">BI")
_FORMAT_CRC = zlib.crc32(bytes([FORMAT]))


def frame(key: bytes, value: bytes) -> bytes:
    """The bytes to store for ``key -> value``."""
    return _HEADER.pack(FORMAT, zlib.crc32(value, zlib.crc32(key, _FORMAT_CRC))) + value


def unframe(key: bytes, framed: bytes) -> bytes:
    """The value inside ``framed``, or :class:`ChecksumError` if it does not verify."""
    if len(framed) < HEADER_SIZE:
        raise ChecksumError(f"stored value for key {short(key)} is truncated ({len(framed)} bytes)")
    fmt, crc = _HEADER.unpack_from(framed)
    if fmt != FORMAT:
        raise ChecksumError(f"stored value for key {short(key)} has unknown format byte {fmt}")
    value = framed[HEADER_SIZE:]
    if crc != zlib.crc32(value, zlib.crc32(key, _FORMAT_CRC)):
        raise ChecksumError(f"checksum mismatch in stored value for key {short(key)}")
    return value
