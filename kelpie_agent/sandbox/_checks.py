"""Argument checks and output capture shared by every sandbox implementation."""

from __future__ import annotations

import math

from ._errors import SandboxFileError

__all__ = [
    "DISK_MESSAGE",
    "ENTRY_COST",
    "OutputBuffer",
    "check_bytes",
    "check_command",
    "check_path",
    "check_timeout",
    "file_too_large",
]


DISK_MESSAGE = (
    "sandbox: the working area grew past its disk limit of {} bytes; the command was killed\n"
)
ENTRY_COST = 4096  # bytes each file or directory counts towards the disk limit, besides its data


def check_command(command: object, what: str = "command") -> str:
    if not isinstance(command, str):
        raise TypeError(f"{what} must be a str, not {type(command).__name__}")
    if "\x00" in command:
        raise ValueError(f"{what} contains a NUL character")
    return command


def check_timeout(timeout: object, default: float) -> float:
    if timeout is None:
        return default
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout must be a number of seconds, not {type(timeout).__name__}")
    if math.isnan(timeout) or timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    return float(timeout)


def check_path(path: object) -> str:
    if not isinstance(path, str):
        raise TypeError(f"path must be a str, not {type(path).__name__}")
    if not path:
        raise ValueError("path must not be empty")
    if "\x00" in path:
        raise ValueError(f"path {path!r} contains a NUL character")
    return path


def check_bytes(data: object, what: str) -> bytes:
    if not isinstance(data, bytes):
        raise TypeError(f"{what} must be bytes, not {type(data).__name__}")
    return data


def file_too_large(path: str, size: int, limit: int) -> SandboxFileError:
    return SandboxFileError(
        f"{path!r} is {size} bytes, over the sandbox's file size limit of {limit} bytes"
    )


class OutputBuffer:
    """Keeps the first ``limit`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._chunks: list[bytes] = []
        self._kept = 0
        self.truncated = False

    def add(self, data: bytes | bytearray) -> None:
        room = self.limit - self._kept
        if len(data) > room:
            self.truncated = True
            data = data[: max(room, 0)]
        if data:
            self._chunks.append(bytes(data))
            self._kept += len(data)

    @property
    def text(self) -> str:
        return b"".join(self._chunks).decode("utf-8", errors="replace")
