"""A host outside the sandbox for network tests: a plain HTTP server on this machine's
non-loopback address (sandboxes may never reach loopback, whatever their allow-list)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["host_ip", "web_server"]


def host_ip() -> str | None:
    """An address of this host other than loopback, if it has one."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # no packet is sent
            address = str(probe.getsockname()[0])
    except OSError:
        return None
    return None if address.startswith("127.") else address


@contextmanager
def web_server(root: Path, text: str = "hello from outside") -> Iterator[tuple[str, int]]:
    """Serve ``root`` (with ``hello.txt`` holding ``text``) over HTTP on this host's
    non-loopback address; skips the test when there is none."""
    address = host_ip()
    if address is None:
        pytest.skip("this host has no address besides loopback to serve from")
    root.mkdir(parents=True, exist_ok=True)
    (root / "hello.txt").write_text(text)
    with socket.socket() as probe:
        probe.bind((address, 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", address],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection((address, port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield address, port
    finally:
        proc.kill()
        proc.wait()
