"""``kelpie serve`` as a user runs it: the startup line, health, auth, the request log, the
default model notice, graceful stops, and one-line usage errors with exit 64."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import httpx
import letta_client
import pytest

from .harness import BLOCKS, environment, run, sqlite_url, start


def test_startup_line_health_request_log_and_sigint(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    server = start(tmp_path, "--db", sqlite_url(db))
    try:
        out = server.stdout().splitlines()
        assert out[0] == (
            "kelpie: ANTHROPIC_API_KEY is not set: using the local deterministic model (llm sim)"
        )
        assert out[1].startswith(f"kelpie: listening on {server.url} (db sqlite://{db}, llm sim")
        assert out[1].endswith(", auth off)")
        client = server.client()
        assert client.health().status == "ok"
        agent = client.agents.create(name="otto", memory_blocks=BLOCKS)
        reply = client.agents.messages.create(agent.id, input="hello there")
        assert reply.messages[-1].content == "Hello! How can I help you today?"  # type: ignore[union-attr]
        with pytest.raises(letta_client.NotFoundError):
            client.agents.retrieve("agent-missing")
        assert httpx.get(f"{server.url}/v1/agents/?limit=1").status_code == 200
        # A second server cannot open the same SQLite file: one line, exit 64.
        second = run(tmp_path, "serve", "--port", "0", "--db", sqlite_url(db))
        assert second.returncode == 64, second
        assert second.stderr.startswith(f"kelpie: error: --db sqlite://{db}: cannot open")
        assert "another kelpie serve" in second.stderr
    finally:
        code = server.stop(signal.SIGINT)
    assert code == 0, server.describe()
    requests = [(m[1], m[2].split("?")[0], m[3]) for m in server.access_lines()]
    assert requests == [
        ("GET", "/v1/health/", "200"),
        ("POST", "/v1/agents/", "200"),
        ("POST", f"/v1/agents/{agent.id}/messages", "200"),
        ("GET", "/v1/agents/agent-missing", "404"),
        ("GET", "/v1/agents/", "200"),
    ]
    lines = server.stdout().splitlines()
    assert lines[-3:] == [
        "kelpie: SIGINT: draining requests (up to 10 s)",
        "kelpie: releasing leases",
        "kelpie: stopped",
    ]
    assert server.stderr() == ""


def test_an_api_key_guards_every_route_but_health(tmp_path: Path) -> None:
    env = environment(tmp_path, KELPIE_API_KEY="s3cret-key", ANTHROPIC_API_KEY="sk-unused")
    server = start(tmp_path, "--node-id", "n1", env=env)
    try:
        line = server.stdout().splitlines()[0]
        db = tmp_path / "kelpie.db"  # the default: the data dir is $KELPIE_HOME
        assert line == (
            f"kelpie: listening on {server.url} (db sqlite://{db}, llm anthropic, node n1, auth on)"
        )
        assert server.client().health().status == "ok"
        with pytest.raises(letta_client.AuthenticationError):
            server.client().agents.list()
        with pytest.raises(letta_client.AuthenticationError):
            server.client("wrong-key").agents.list()
        assert server.client("s3cret-key").agents.list().items == []
        key = {"Authorization": "Bearer s3cret-key"}
        # Building the OpenAPI schema the first time takes seconds on a loaded machine: not
        # what this test measures, so a generous timeout instead of httpx's 5 s.
        slow = 120.0
        for path in ("/openapi.json", "/docs", "/redoc"):  # the schema needs the key too
            assert httpx.get(server.url + path, timeout=slow).status_code == 401
            assert httpx.get(server.url + path, headers=key, timeout=slow).status_code == 200
        schema = httpx.get(server.url + "/openapi.json", headers=key, timeout=slow).json()
        assert "/openapi.json" not in schema["paths"] and "/v1/agents/" in schema["paths"]
    finally:
        assert server.stop() == 0, server.describe()
    assert [m[3] for m in server.access_lines()] == ["200", "401", "401", "200"] + [
        "401",
        "200",
    ] * 3 + ["200"]
    assert "s3cret-key" not in server.stdout() + server.stderr()
    env.pop("ANTHROPIC_API_KEY")  # (its SDK's import costs a second)
    env.pop("KELPIE_API_KEY")
    (tmp_path / "key").write_text("file-key\n")
    from_file = start(tmp_path, "--api-key-file", str(tmp_path / "key"), env=env)
    try:
        assert from_file.client("file-key").agents.list().items == []
        with pytest.raises(letta_client.AuthenticationError):
            from_file.client("s3cret-key").agents.list()
    finally:
        assert from_file.stop() == 0, from_file.describe()
    assert "file-key" not in from_file.stdout() + from_file.stderr()
    flagged = start(tmp_path, "--api-key", "flag-key", env=env)  # discouraged, still works
    try:
        assert flagged.client("flag-key").agents.list().items == []
        assert (
            "kelpie: warning: --api-key is visible to every local user (ps, /proc); "
            "use KELPIE_API_KEY or --api-key-file"
        ) in flagged.stdout().splitlines()
    finally:
        assert flagged.stop() == 0, flagged.describe()


def test_wrong_methods_and_oversized_chunked_bodies(tmp_path: Path) -> None:
    server = start(tmp_path)
    try:
        cases = {
            ("DELETE", "/v1/agents/"): "GET, POST",
            ("PUT", "/v1/agents/agent-x"): "DELETE, GET, PATCH",
            ("POST", "/v1/tools/tool-x"): "DELETE, GET, PATCH",
        }
        for (method, path), allow in cases.items():
            response = httpx.request(method, server.url + path)
            assert (response.status_code, response.headers["allow"]) == (405, allow), path
        with socket.create_connection(server.url.removeprefix("http://").split(":")) as sock:
            sock.sendall(
                b"POST /v1/agents/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            chunk = b"%x\r\n%s\r\n" % (1 << 20, b"a" * (1 << 20))
            try:
                for _ in range(20):  # 20 MiB, past the 16 MiB limit
                    sock.sendall(chunk)
            except OSError:
                pass  # the server answered and closed
            answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 413 "), answer
    finally:
        assert server.stop() == 0, server.describe()
    assert server.stderr() == ""  # no internal error logged


def _busy_port() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["--db", "mysql://x/y"], {}, "--db: unknown scheme 'mysql'"),
        (["--db", "sqlite://host/x.db"], {}, "a SQLite URL has no host"),
        (["--port", "70000"], {}, "Invalid value for '--port': 70000 is not in the range"),
        (["--port", "http"], {}, "Invalid value for '--port'"),
        (["--llm", "anthropic"], {}, "--llm anthropic needs ANTHROPIC_API_KEY"),
        (["--llm", "gpt"], {}, "Invalid value for '--llm'"),
        (["--api-key", " "], {}, "--api-key is empty; unset it for no auth"),
        ([], {"KELPIE_API_KEY": ""}, "KELPIE_API_KEY is empty; unset it for no auth"),
        (["--api-key", "k"], {"KELPIE_API_KEY": "k"}, "the API key is given twice"),
        (["--api-key-file", "{file}/x"], {}, "--api-key-file {file}/x: cannot read it"),
        (["--api-key-file", "{empty}"], {}, "must hold one non-empty line"),
        (["--sandbox-allow-host", "a b"], {}, "--sandbox-allow-host: host pattern 'a b'"),
        (["--node-id", "a b"], {}, "--node-id 'a b': use 1-200 letters"),
        (["--nope"], {}, "No such option"),
        (["--db", "postgresql://kelpie@127.0.0.1:1/kelpie"], {}, "cannot open the database"),
        (["--data-dir", "{file}/sub"], {}, "not a writable directory (Not a directory)"),
        (["--db", "sqlite:///nonexistent-dir/k.db"], {}, "the directory /nonexistent-dir is"),
        (["--port", "{busy}"], {}, "the address is already in use"),
    ],
)
def test_bad_input_is_one_line_and_exit_64(
    tmp_path: Path, args: list[str], env: dict[str, str], expected: str
) -> None:
    (tmp_path / "file").write_text("not a directory")
    (tmp_path / "empty").write_text("\n")
    busy = _busy_port()
    try:
        port = str(busy.getsockname()[1])
        names = {"file": tmp_path / "file", "empty": tmp_path / "empty", "busy": port}
        argv = [a.format(**names) for a in args]
        expected = expected.format(**names)
        if "--port" not in argv:
            argv = ["--port", "0", *argv]
        result = run(tmp_path, "serve", *argv, env=environment(tmp_path / "home", **env))
    finally:
        busy.close()
    assert result.returncode == 64, result
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("kelpie: error: ")
    assert expected in result.stderr, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert "listening" not in result.stdout
