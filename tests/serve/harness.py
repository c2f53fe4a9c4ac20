"""``kelpie serve`` as a real subprocess: start it, find its URL, read its logs, stop or kill it.

The server's stdout and stderr go to files, not pipes: a server whose pipe nobody reads
would block on its request log. ``start()`` waits for the ``kelpie: listening on URL`` line
and returns a :class:`Server`; ``run()`` runs a command that should exit on its own (the
usage errors). The environment never carries the caller's ``ANTHROPIC_API_KEY`` or
``KELPIE_API_KEY`` unless given, and ``KELPIE_HOME`` points into the test's directory.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import attrs
from letta_client import Letta
from letta_client.types import CreateBlockParam

_SCRIPT = Path(sys.executable).with_name("kelpie")
KELPIE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "kelpie_agent.cli"]
LISTENING = re.compile(r"^kelpie: listening on (http://\S+) \(db (\S+), llm (\w+), node (\S+), ")
ACCESS = re.compile(r'^\S+ "(\S+) (\S+) HTTP/1\.[01]" (\d+|-) \d+ [\d.]+ms$')
STARTUP_TIMEOUT = 60.0
BLOCKS: list[CreateBlockParam] = [
    {"label": "persona", "value": "I am Otto."},
    {"label": "human", "value": ""},
]
_names = itertools.count()


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ANTHROPIC_API_KEY", "KELPIE_API_KEY", "KELPIE_HOME")
    }
    env["KELPIE_HOME"] = str(home)
    env.update(extra)
    return env


@attrs.define
class Server:
    """One ``kelpie serve`` process."""

    proc: subprocess.Popen[bytes]
    out: Path
    err: Path
    began: float
    url: str = ""
    node: str = ""
    startup_seconds: float = 0.0
    _clients: dict[tuple[str | None, float], Letta] = attrs.field(factory=dict, repr=False)

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def access_lines(self) -> list[re.Match[str]]:
        lines = (ACCESS.match(line) for line in self.stdout().splitlines())
        return [match for match in lines if match]

    def client(self, api_key: str | None = None, *, timeout: float = 60.0) -> Letta:
        """The unmodified SDK, without its own retries (the tests retry with the same otid);
        one per key and timeout, so connections are reused."""
        key = (api_key, timeout)
        if key not in self._clients:
            self._clients[key] = Letta(
                base_url=self.url, api_key=api_key, max_retries=0, timeout=timeout
            )
        return self._clients[key]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        """Send ``sig`` and wait for the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: no drain, no lease release, nothing flushed."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)

    def ready(self, timeout: float = STARTUP_TIMEOUT) -> Server:
        """Wait for the listening line; sets ``url``, ``node`` and ``startup_seconds``."""
        deadline = self.began + timeout
        while time.perf_counter() < deadline:
            for line in self.stdout().splitlines():
                match = LISTENING.match(line)
                if match:
                    self.url, self.node = match.group(1), match.group(4)
                    self.startup_seconds = time.perf_counter() - self.began
                    return self
            if self.proc.poll() is not None:
                raise AssertionError(f"kelpie serve exited during startup: {self.describe()}")
            time.sleep(0.02)
        self.kill()
        raise AssertionError(f"no listening line within {timeout}s: {self.describe()}")

    def describe(self) -> str:
        return f"exit {self.proc.poll()}\nstdout:\n{self.stdout()}\nstderr:\n{self.stderr()}"


def spawn(home: Path, *args: str, env: dict[str, str] | None = None) -> Server:
    """Start ``kelpie serve --port 0 ARGS...`` without waiting (see :meth:`Server.ready`)."""
    home.mkdir(parents=True, exist_ok=True)
    name = f"serve-{next(_names)}"
    out, err = home / f"{name}.out", home / f"{name}.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            [*KELPIE, "serve", "--port", "0", *args],
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            env=env if env is not None else environment(home),
        )
    return Server(proc, out, err, began=time.perf_counter())


def start(home: Path, *args: str, env: dict[str, str] | None = None) -> Server:
    """Start ``kelpie serve --port 0 ARGS...`` and wait for its listening line."""
    return spawn(home, *args, env=env).ready()


def run(
    home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """Run ``kelpie ARGS...`` to completion (for commands that should fail)."""
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [*KELPIE, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=env if env is not None else environment(home),
        check=False,
    )


def sqlite_url(path: Path) -> str:
    return f"sqlite://{path.absolute()}"


def postgres_url(dsn: str, schema: str) -> str:
    """The key=value DSN of the test cluster as a ``postgresql://`` URL on ``schema``."""
    from psycopg.conninfo import conninfo_to_dict

    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    user, dbname = params.pop("user", ""), params.pop("dbname", "")
    params["options"] = f"-c search_path={schema}"
    query = "&".join(f"{k}={quote(v, safe='/')}" for k, v in params.items())
    return f"postgresql://{quote(user)}@/{quote(dbname)}?{query}"
