"""The escape suite: a hostile tool author against a real ``kelpie serve`` (issue #16).

The server runs as a careless operator would start it: the API key on its command line, the
Anthropic key in its environment, SQLite in its data dir. Custom tools are created and run
through the API (``POST /v1/agents/{id}/tools/{name}/run``), each one a probe that tries to
get out and reports what it found. Every probe must come back blocked, and no answer may carry
a secret.
"""

from __future__ import annotations

import itertools
import json
import socket
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.outside import web_server

from .harness import Server, environment, start

pytestmark = pytest.mark.bubblewrap

API_KEY = "kelpie-escape-test-api-key-9c1f"
ANTHROPIC_KEY = "sk-ant-escape-test-anthropic-key-5e7d"
SECRETS = (API_KEY, ANTHROPIC_KEY)
_probes = itertools.count()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("escape")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[Server]:
    env = environment(home, ANTHROPIC_API_KEY=ANTHROPIC_KEY)
    flags = ["--tool-timeout", "3", "--sandbox-memory", "256", "--sandbox-disk", "16"]
    serve = start(home, "--api-key", API_KEY, *flags, "--sandbox-processes", "24", env=env)
    try:
        yield serve
    finally:
        assert serve.stop() == 0, serve.describe()
        everything = serve.stdout() + serve.stderr()
        assert not any(secret in everything for secret in SECRETS), "a log line shows a secret"


def _http(server: Server) -> httpx.Client:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    return httpx.Client(base_url=server.url, headers=headers, timeout=60)


def _agent(server: Server, name: str) -> str:
    with _http(server) as http:
        response = http.post("/v1/agents/", json={"name": name, "memory_blocks": []})
        response.raise_for_status()
        return str(response.json()["id"])


def probe(server: Server, agent_id: str, body: str, **args: Any) -> dict[str, Any]:
    """Create a custom tool whose function runs ``body`` (which returns a string), attach it
    to the agent, run it with ``args``, and return the run's answer."""
    params = ", ".join(f"{name}: str" for name in args)
    docs = "".join(f"        {name}: a value\n" for name in args)
    name = f"probe_{next(_probes)}"
    source = (
        f"def {name}({params}) -> str:\n"
        f'    """A probe.\n\n    Args:\n{docs}    """\n'
        + textwrap.indent(textwrap.dedent(body), "    ")
    )
    with _http(server) as http:
        created = http.post("/v1/tools/", json={"source_code": source})
        assert created.status_code == 200, created.text
        tool_id = created.json()["id"]
        http.patch(f"/v1/agents/{agent_id}/tools/attach/{tool_id}").raise_for_status()
        ran = http.post(f"/v1/agents/{agent_id}/tools/{name}/run", json={"args": args})
        assert ran.status_code == 200, ran.text
    answer: dict[str, Any] = ran.json()
    assert not any(secret in json.dumps(answer) for secret in SECRETS), answer
    return answer


def verdict(answer: dict[str, Any]) -> str:
    assert answer["status"] == "success", answer
    return str(answer["func_return"])


@pytest.fixture(scope="module")
def agent(server: Server) -> str:
    return _agent(server, "mallory")


def test_host_files_are_not_there(server: Server, agent: str) -> None:
    found = verdict(
        probe(
            server,
            agent,
            """
            import os
            places = ("/etc/shadow", "/etc/hostname", "/etc/ssh", "/home", "/var", "/srv",
                      "/root/.ssh", "/root/.bash_history", "/root/.kelpie", "/work/main")
            seen = [p for p in places if os.path.exists(p)]
            return "visible: " + " ".join(seen) if seen else "blocked"
            """,
        )
    )
    assert found == "blocked"


def test_the_database_and_data_dir_are_not_there(server: Server, agent: str, home: Path) -> None:
    found = verdict(
        probe(
            server,
            agent,
            """
            import os
            out = []
            for path in (db, os.path.join(home, "sandboxes")):
                try:
                    out.append(path + ": " + str(os.listdir(path) if os.path.isdir(path)
                                                  else len(open(path, "rb").read())))
                except OSError as error:
                    out.append(path + ": " + type(error).__name__)
            return "; ".join(out) + "; cwd " + os.getcwd()
            """,
            db=str(home / "kelpie.db"),
            home=str(home),
        )
    )
    own = found.rsplit("; cwd ", 1)[1].split("/")[-2]  # its own kelpie-sandbox-XXXX
    assert found.startswith(
        f"{home}/kelpie.db: FileNotFoundError; {home}/sandboxes: [{own!r}]; cwd "
    ), found


def test_another_agents_files_are_not_there(server: Server, agent: str) -> None:
    other = _agent(server, "alice")
    where = verdict(
        probe(
            server,
            other,
            """
            open("diary.txt", "w").write("alice's secret")
            import os
            return os.getcwd()
            """,
        )
    )
    found = verdict(
        probe(
            server,
            agent,
            """
            import os
            try:
                return "read: " + open(os.path.join(path, "diary.txt")).read()
            except OSError as error:
                above = os.path.dirname(os.path.dirname(path))
                return "blocked: " + type(error).__name__ + " " + str(os.listdir(above))
            """,
            path=where,
        )
    )
    assert found.startswith("blocked: FileNotFoundError"), found
    assert "alice" not in found


def test_the_servers_proc_entries_are_not_there(server: Server, agent: str) -> None:
    found = verdict(
        probe(
            server,
            agent,
            """
            import os
            pids = [p for p in os.listdir("/proc") if p.isdigit()]
            leaks = []
            for pid in pids:
                for part in ("environ", "cmdline"):
                    try:
                        data = open(f"/proc/{pid}/{part}", "rb").read()
                    except OSError:
                        continue
                    if b"--api-key" in data or b"ANTHROPIC" in data or b"kelpie serve" in data:
                        leaks.append(f"{pid}/{part}")
            return f"{len(pids)} processes; leaks: {leaks}"
            """,
        )
    )
    count, _, leaks = found.partition(" processes; leaks: ")
    assert leaks == "[]" and int(count) <= 3, found


def test_the_environment_holds_nothing_of_the_server(server: Server, agent: str) -> None:
    found = verdict(
        probe(
            server,
            agent,
            """
            import os
            return " ".join(sorted(os.environ))
            """,
        )
    )
    assert found.split() == ["HOME", "LANG", "LOGNAME", "PATH", "PWD", "TMPDIR", "USER"], found


def test_the_network_to_the_server_is_cut(server: Server, agent: str) -> None:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    addresses = [host]
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.connect(("192.0.2.1", 9))
            addresses.append(udp.getsockname()[0])
    except OSError:
        pass
    found = verdict(
        probe(
            server,
            agent,
            """
            import socket
            out = []
            for address in addresses.split():
                try:
                    socket.create_connection((address, int(port)), timeout=2).close()
                    out.append(address + " connected")
                except OSError as error:
                    out.append(address + " " + type(error).__name__)
            return "; ".join(out)
            """,
            addresses=" ".join(addresses),
            port=port,
        )
    )
    assert "connected" not in found, found


def test_writes_outside_the_working_directory_fail(server: Server, agent: str, home: Path) -> None:
    found = verdict(
        probe(
            server,
            agent,
            """
            import os
            out = []
            for path in ("/tmp/x", "/x", "/etc/passwd", os.path.join(home, "x"), "/dev/shm/x"):
                try:
                    open(path, "w").write("pwned")
                    out.append("wrote " + path)
                except OSError as error:
                    out.append(type(error).__name__)
            open("inside.txt", "w").write("fine")
            return " ".join(out)
            """,
            home=str(home),
        )
    )
    assert "wrote" not in found, found
    assert not (home / "x").exists()


def test_a_fork_bomb_hits_the_process_limit(server: Server, agent: str) -> None:
    found = verdict(
        probe(
            server,
            agent,
            """
            import os, time
            n = 0
            try:
                for _ in range(500):
                    if os.fork() == 0:
                        time.sleep(2)
                        os._exit(0)
                    n += 1
            except OSError as error:
                return f"stopped after {n}: {error.strerror}"
            return f"forked {n}"
            """,
        )
    )
    assert found == "stopped after 23: Resource temporarily unavailable", found


def test_a_detached_child_does_not_outlive_the_call(server: Server, agent: str) -> None:
    started = verdict(
        probe(
            server,
            agent,
            """
            import subprocess, sys
            beat = "import time\\nwhile True:\\n    open('beat', 'a').write('x')\\n"
            beat += "    time.sleep(0.05)"
            subprocess.Popen([sys.executable, "-c", beat], start_new_session=True)
            import time
            time.sleep(0.3)
            return "started"
            """,
        )
    )
    assert started == "started"
    found = verdict(
        probe(
            server,
            agent,
            """
            import os, time
            first = os.path.getsize("beat")
            time.sleep(0.5)
            second = os.path.getsize("beat")
            pids = [p for p in os.listdir("/proc") if p.isdigit()]
            return f"grew {second - first}, {len(pids)} processes"
            """,
        )
    )
    assert found.startswith("grew 0, "), found


def test_filling_the_disk_is_stopped(server: Server, agent: str) -> None:
    answer = probe(
        server,
        agent,
        """
        for i in range(100):
            with open(f"fill-{i}", "wb") as f:
                f.write(b"x" * 1_000_000)
        return "filled 100 MB"
        """,
    )
    assert answer["status"] == "error", answer
    assert "disk limit of 16777216 bytes" in "".join(answer["stderr"]), answer
    cleaned = verdict(
        probe(
            server,
            agent,
            """
            import glob, os
            for name in glob.glob("fill-*"):
                os.remove(name)
            return "cleaned"
            """,
        )
    )
    assert cleaned == "cleaned"


def test_memory_past_the_limit_is_refused(server: Server, agent: str) -> None:
    found = verdict(
        probe(
            server,
            agent,
            """
            try:
                block = bytearray(1 << 30)
                return "allocated 1 GiB"
            except MemoryError:
                return "MemoryError"
            """,
        )
    )
    assert found == "MemoryError"


def test_a_tool_that_never_ends_is_killed_at_its_timeout(server: Server, agent: str) -> None:
    answer = probe(
        server,
        agent,
        """
        while True:
            pass
        """,
    )
    assert answer["status"] == "error" and "TimeoutError" in answer["func_return"], answer


def test_a_new_user_namespace_gives_no_way_out(server: Server, agent: str) -> None:
    found = verdict(
        probe(
            server,
            agent,
            """
            import ctypes, os
            libc = ctypes.CDLL(None, use_errno=True)
            out = []
            for name, flag in (("user", 0x10000000), ("mount", 0x00020000), ("net", 0x40000000)):
                if libc.unshare(flag) == 0:
                    out.append(name + " unshared")
                else:
                    out.append(name + " " + os.strerror(ctypes.get_errno()))
            return "; ".join(out)
            """,
        )
    )
    refused = "; ".join(f"{ns} Operation not permitted" for ns in ("user", "mount", "net"))
    assert found == refused, found


def test_only_hosts_the_agent_and_the_server_both_allow(tmp_path: Path) -> None:
    with web_server(tmp_path / "www") as (address, port):
        home = tmp_path / "home"
        env = environment(home, KELPIE_API_KEY=API_KEY)
        serve = start(home, "--sandbox-allow-host", address, env=env)
        try:
            with _http(serve) as http:
                bad = http.post(
                    "/v1/agents/",
                    json={"name": "x", "metadata": {"sandbox_allow_hosts": ["not a host"]}},
                )
                assert bad.status_code == 422, bad.text
                assert "metadata.sandbox_allow_hosts" in bad.text
                allowed = http.post(
                    "/v1/agents/",
                    json={
                        "name": "fetcher",
                        "metadata": {"sandbox_allow_hosts": [address, "example.com"]},
                    },
                ).json()["id"]
            plain = _agent(serve, "plain")
            fetch = """
            import urllib.request, urllib.error
            try:
                return urllib.request.urlopen(url, timeout=10).read().decode()
            except urllib.error.HTTPError as error:
                return f"{error.code} {error.read().decode().strip()}"
            except OSError as error:
                return type(error).__name__
            """
            url = f"http://{address}:{port}/hello.txt"
            assert verdict(probe(serve, allowed, fetch, url=url)) == "hello from outside"
            assert verdict(probe(serve, plain, fetch, url=url)) == "URLError"  # no network
            refused = verdict(probe(serve, allowed, fetch, url=f"http://example.com:{port}/"))
            assert refused.startswith("403 sandbox: example.com"), refused  # not the server's
            local = verdict(probe(serve, allowed, fetch, url=f"{serve.url}/v1/health/"))
            assert local.startswith("403 sandbox: "), local
            keep = 'open("kept.txt", "w").write("kept")\nreturn "written"'
            assert verdict(probe(serve, plain, keep)) == "written"
            with _http(serve) as http:  # allowing it later takes effect at the next call
                metadata = {"sandbox_allow_hosts": [address]}
                http.patch(f"/v1/agents/{plain}", json={"metadata": metadata}).raise_for_status()
            assert verdict(probe(serve, plain, fetch, url=url)) == "hello from outside"
            kept = verdict(probe(serve, plain, 'return open("kept.txt").read()'))
            assert kept == "kept"  # the new sandbox took the old one's files over
        finally:
            assert serve.stop() == 0, serve.describe()
