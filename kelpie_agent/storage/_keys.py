"""Argument checks and key-range arithmetic shared by every backend."""

from __future__ import annotations

__all__ = [
    "MAX_KEY_SIZE",
    "check_key",
    "check_scan",
    "check_value",
    "in_range",
    "prefix_end",
    "short",
]

# PostgreSQL cannot index keys much above 2.7 kB; one limit for every backend keeps simulation and
# production in agreement about which keys are legal.
MAX_KEY_SIZE = 1024


def short(key: bytes) -> str:
    """``repr(key)``, cut short for error messages."""
    return repr(key) if len(key) <= 40 else f"{key[:40]!r}...({len(key)} bytes)"


def check_key(key: object, what: str = "key") -> bytes:
    if not isinstance(key, bytes):
        raise TypeError(f"{what} must be bytes, not {type(key).__name__}")
    if len(key) > MAX_KEY_SIZE:
        raise ValueError(f"{what} is {len(key)} bytes; the limit is {MAX_KEY_SIZE}")
    return key


def check_value(value: object) -> bytes:
    if not isinstance(value, bytes):
        raise TypeError(f"value must be bytes, not {type(value).__name__}")
    return value


def check_scan(start: object, end: object, limit: object, reverse: object) -> None:
    check_key(start, "start")
    if end is not None:
        check_key(end, "end")
    if limit is not None:
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise TypeError(f"limit must be an int or None, not {type(limit).__name__}")
        if limit < 0:
            raise ValueError(f"limit must be >= 0, not {limit}")
    if not isinstance(reverse, bool):
        raise TypeError(f"reverse must be a bool, not {type(reverse).__name__}")


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None: no such key)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def in_range(key: bytes, start: bytes, end: bytes | None) -> bool:
    return start <= key and (end is None or key < end)
