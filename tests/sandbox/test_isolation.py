"""ProcessSandbox's namespaces, probed from inside: what a command can see, write, start and
reach. (tests/serve/test_escape.py probes the same through a real ``kelpie serve``.)"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from kelpie_agent.sandbox import (
    ProcessSandbox,
    SandboxIsolationError,
    SandboxLimits,
    SandboxNetwork,
    SandboxState,
    SandboxStateError,
    isolation_problem,
)
from tests.outside import host_ip, web_server

pytestmark = [pytest.mark.trio, pytest.mark.bubblewrap]

MiB = 1 << 20


@pytest.fixture
async def sb(tmp_path: Path) -> AsyncIterator[ProcessSandbox]:
    limits = SandboxLimits(processes=16, disk_bytes=8 * MiB, file_size_bytes=4 * MiB)
    sandbox = ProcessSandbox(limits, parent_dir=tmp_path / "sandboxes", hide=[tmp_path])
    (tmp_path / "sandboxes").mkdir()
    await sandbox.boot()
    yield sandbox
    await sandbox.stop()


async def sh(sb: ProcessSandbox, command: str) -> str:
    result = await sb.exec(command)
    return result.stdout + result.stderr


async def test_the_root_is_minimal_and_read_only(sb: ProcessSandbox, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s3cret")
    listing = (await sb.exec("ls /")).stdout.split()
    assert "home" not in listing and "var" not in listing and "srv" not in listing
    for path in ("/etc/shadow", "/etc/hostname", str(tmp_path / "secret.txt"), "/root/.bashrc"):
        assert "No such file" in await sh(sb, f"cat {path}"), path
    for path in ("/x", "/tmp/x", "/usr/x", "/dev/x", "/dev/shm/x", "/etc/passwd"):
        result = await sb.exec(f"echo pwned > {path}")
        assert result.exit_code != 0, path
    assert (await sb.exec("echo fine > here && cat here")).stdout == "fine\n"
    assert (await sb.exec("echo x > /dev/null")).exit_code == 0


async def test_the_command_runs_as_nobody_special(sb: ProcessSandbox) -> None:
    uid = int((await sb.exec("id -u")).stdout)
    assert uid != 0 or os.geteuid() != 0  # a root server's tools do not run as root
    assert (await sb.exec("id -un")).stdout == "sandbox\n"
    assert (await sb.exec("hostname")).stdout == "kelpie-sandbox\n"
    status = (await sb.exec("cat /proc/self/status")).stdout
    assert "CapEff:\t0000000000000000" in status
    assert "NoNewPrivs:\t1" in status


async def test_no_process_outside_the_sandbox_is_visible(sb: ProcessSandbox) -> None:
    script = "for p in /proc/[0-9]*; do echo $(tr '\\0' ' ' < $p/cmdline); done"
    commands = (await sb.exec(script)).stdout.splitlines()
    assert len(commands) <= 4, commands  # the supervisor, sh, tr (and a subshell)
    assert commands[0].split()[3] == "/run/kelpie/supervisor.py", commands  # PID 1
    assert not any("-m pytest" in line for line in commands)  # this test process


async def test_a_detached_child_dies_with_the_command(sb: ProcessSandbox) -> None:
    code = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time\\nwhile True:\\n"
        '    open("beat", "a").write("x"); time.sleep(0.02)\'], start_new_session=True)\n'
        "print('left it running')\n"
    )
    assert (await sb.exec_python(code)).stdout == "left it running\n"
    size = Path(sb.workdir, "beat").stat().st_size if Path(sb.workdir, "beat").exists() else 0
    await trio.sleep(0.3)
    after = Path(sb.workdir, "beat").stat().st_size if Path(sb.workdir, "beat").exists() else 0
    assert after == size
    assert (await sb.exec("ls /proc | grep -cE '^[0-9]+$'")).stdout.strip() in ("3", "4")


async def test_a_fork_bomb_hits_the_process_limit(sb: ProcessSandbox) -> None:
    code = (
        "import os, time\n"
        "children = 0\n"
        "try:\n"
        "    for _ in range(200):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(5)\n"
        "            os._exit(0)\n"
        "        children += 1\n"
        "except OSError as error:\n"
        "    print(children, error.errno)\n"
    )
    result = await sb.exec_python(code)
    children, errno_ = result.stdout.split()
    assert (int(children), int(errno_)) == (15, 11)  # 16 with itself, then EAGAIN
    assert (await sb.exec("echo still works")).stdout == "still works\n"


async def test_filling_the_disk_with_small_files_is_stopped(sb: ProcessSandbox) -> None:
    # 50 files of 1 MB, one every 20 ms: the 8 MB limit is crossed after about 0.2 s, and the
    # loop would take at least 1 s, so a measurement every 50 ms stops it long before the end
    # even on a loaded machine (a bound on the file count alone was timing-dependent).
    result = await sb.exec(
        "for i in $(seq 1 50); do head -c 1000000 /dev/zero > f$i; sleep 0.02; done"
    )
    assert result.exit_code == -signal.SIGXFSZ
    assert "disk limit of 8388608 bytes" in result.stderr
    files = {path.name for path in Path(sb.workdir).iterdir()}
    assert "f9" in files and "f50" not in files  # over the limit, then stopped before the end
    assert (await sb.exec("rm f*; echo cleaned")).stdout == "cleaned\n"  # cleaning up is allowed
    assert (await sb.exec("head -c 1000 /dev/zero > small && echo ok")).stdout == "ok\n"


async def test_without_an_allow_list_there_is_no_network(sb: ProcessSandbox) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = (
            "import socket\n"
            f"for host in ('127.0.0.1', '{host_ip() or '127.0.0.1'}', '1.1.1.1'):\n"
            "    try:\n"
            f"        socket.create_connection((host, {port}), timeout=2)\n"
            "        print(host, 'connected')\n"
            "    except OSError as error:\n"
            "        print(host, type(error).__name__)\n"
        )
        out = (await sb.exec_python(code)).stdout
    assert "connected" not in out, out
    assert "HTTP_PROXY" not in (await sb.exec("env")).stdout


@pytest.fixture
def web(tmp_path: Path) -> Iterator[tuple[str, int]]:
    with web_server(tmp_path / "www") as where:
        yield where


async def test_named_hosts_are_reachable_through_the_proxy_and_nothing_else(
    tmp_path: Path, web: tuple[str, int]
) -> None:
    address, port = web
    network = SandboxNetwork([address, "localhost", "127.0.0.1"])
    sandbox = ProcessSandbox(parent_dir=tmp_path, network=network)
    await sandbox.boot()
    fetch = (
        "import sys, urllib.request, urllib.error\n"
        "try:\n"
        "    print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())\n"
        "except urllib.error.HTTPError as error:\n"
        "    print(error.code, error.read().decode().strip())\n"
    )
    await sandbox.write_file("fetch.py", fetch.encode())
    try:
        ok = await sandbox.exec(f"python3 fetch.py http://{address}:{port}/hello.txt")
        assert ok.stdout == "hello from outside\n", ok
        for url, why in (
            (f"http://example.com:{port}/", "not on this sandbox's allow-list"),
            (f"http://localhost:{port}/", "may not reach"),
            (f"http://127.0.0.1:{port}/", "may not reach"),
        ):
            refused = await sandbox.exec(f"python3 fetch.py {url}")
            assert refused.stdout.startswith("403 sandbox: ") and why in refused.stdout, refused
        raw = await sandbox.exec_python(
            f"import socket\nsocket.create_connection(('{address}', {port}), timeout=2)"
        )
        assert raw.exit_code == 1 and "OSError" in raw.stderr  # only the proxy gets out
    finally:
        await sandbox.stop()


async def test_without_bubblewrap_nothing_runs(tmp_path: Path) -> None:
    sandbox = ProcessSandbox(parent_dir=tmp_path, bwrap=str(tmp_path / "no-bwrap"))
    with pytest.raises(SandboxIsolationError, match="refuses to run tool code") as caught:
        await sandbox.boot()
    assert "\n" not in str(caught.value)
    assert sandbox.state is SandboxState.STOPPED
    with pytest.raises(SandboxStateError, match="boot failed"):
        await sandbox.exec("true")
    assert list(tmp_path.iterdir()) == []
    unsafe = ProcessSandbox(parent_dir=tmp_path, isolation="none", bwrap="/nonexistent")
    await unsafe.boot()  # explicitly without isolation: runs, as a plain subprocess
    try:
        assert (await unsafe.exec("echo plain")).stdout == "plain\n"
    finally:
        await unsafe.stop()


async def test_isolation_problem_says_why(tmp_path: Path) -> None:
    assert await isolation_problem(tmp_path) is None
    missing = await isolation_problem(tmp_path, bwrap="/bin/false")
    assert missing is not None and "bubblewrap" in missing
    assert list(tmp_path.iterdir()) == []


async def test_no_new_namespaces_inside(sb: ProcessSandbox) -> None:
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "for flag in (0x10000000, 0x00020000, 0x40000000):\n"
        "    print(libc.unshare(flag), os.strerror(ctypes.get_errno()))\n"
    )
    assert (await sb.exec_python(code)).stdout == "-1 Operation not permitted\n" * 3
    assert (await sb.exec("unshare -U true")).exit_code != 0
    threads = "import threading\nt = threading.Thread(target=print, args=('ok',))\nt.start()"
    assert (await sb.exec_python(threads)).stdout == "ok\n"  # clone without new namespaces


async def test_the_seccomp_filter_exists_for_the_common_machines() -> None:
    from kelpie_agent.sandbox._seccomp import program

    for machine in ("x86_64", "aarch64"):
        filter_ = program(machine)
        assert filter_ is not None and len(filter_) % 8 == 0
    assert program("riscv64") is None
