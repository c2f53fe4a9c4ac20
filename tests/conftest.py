"""Session fixtures for every test that needs PostgreSQL: a throwaway cluster, and store factories.

The cluster is started once per session from the server binaries found (in order) in
``$KELPIE_PG_BIN``, ``pg_config --bindir``, the newest ``/usr/lib/postgresql/*/bin`` (Debian's
``postgresql`` package), or ``PATH``. It lives in a fresh temporary directory, listens only on
a unix socket there, runs as the ``postgres`` user when the tests run as root (initdb refuses
root), and is stopped and deleted at the end of the session. Set ``KELPIE_PG_DSN`` to use an
existing server instead. Without binaries the PostgreSQL tests are skipped with a loud reason,
unless ``$CI`` is set: then they fail, so CI cannot silently stop testing PostgreSQL.

Tests marked ``bubblewrap`` run real sandboxes (ProcessSandbox, ``kelpie serve`` tools), which
need ``bwrap``; without it they are skipped the same loud way, or fail under ``$CI``.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kelpie_agent.storage import PostgresKV


# Inside an xdist worker, a pytest that a test runs (pytester, a subprocess) starts no workers
# of its own: xdist's own hook reads this too, for runs that do not load this file.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"] = "0"


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many xdist workers ``-n auto`` (in addopts) starts: one per core for the suite or
    a directory; none (the tests run in this process, with plain output) when every argument
    names a test file or a test, e.g. ``DST_SEED=7 pytest tests/x.py::test``. Set
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` to choose. Each worker is its own process, with its own
    PostgreSQL cluster (``postgres_dsn``), temporary directories and free ports."""
    chosen = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if chosen and chosen.isdigit():
        return int(chosen)
    args = [a for a in config.args if not a.startswith("-")]
    if args and all("::" in a or a.endswith(".py") for a in args):
        return 0
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _share_default_ssl_contexts() -> None:
    """Every ``httpx``/``httpx2`` client builds an SSL context and loads certifi's CA bundle
    into it (~0.15 s quiet, ~0.4 s under load, per client), even for ``http://`` URLs. A
    simulated run creates fresh clients (the anthropic SDK, letta-client, the examples), so a
    run of the http example spent a third of its time there. The tests speak no TLS (the
    network is simulated or loopback), so one default context per process is shared: the
    cache holds only the default case (``verify=True``, no client cert); any other argument
    builds its context as before. See docs/decisions.md, Dsuite-1."""
    import functools

    for name in ("httpx", "httpx2"):
        try:
            module = __import__(f"{name}._transports.default", fromlist=["create_ssl_context"])
        except ImportError:  # pragma: no cover - both are dependencies
            continue
        build = module.create_ssl_context
        if getattr(build, "_kelpie_shared", False):
            continue
        cached = functools.cache(lambda trust_env, build=build: build(trust_env=trust_env))

        def create_ssl_context(
            verify: object = True,
            cert: object = None,
            trust_env: bool = True,
            *,
            _build: object = build,
            _cached: object = cached,
        ) -> object:
            if verify is True and cert is None:
                return _cached(trust_env)  # type: ignore[operator]
            return _build(verify=verify, cert=cert, trust_env=trust_env)  # type: ignore[operator]

        create_ssl_context._kelpie_shared = True  # type: ignore[attr-defined]
        setattr(module, "create_ssl_context", create_ssl_context)  # noqa: B010


_share_default_ssl_contexts()


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile the project's packages once, before any worker imports them.

    With ``PYTHONDONTWRITEBYTECODE`` set (as on this project's machines) Python never caches
    the project's bytecode, so every xdist worker and every subprocess a test starts
    (``kelpie serve``, sandboxes, fresh-process re-runs, CLI runs) compiled every module it
    imported again: 12-15% of a ``kelpie serve`` start-up. Python still *reads* cached
    bytecode under that variable, so writing it here, once per session (the controller or a
    plain run; a no-op when it is current), serves every process after it. See
    docs/decisions.md, Dspeed-11."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import compileall

    root = Path(__file__).resolve().parent.parent
    for package in ("kelpie_dst", "kelpie_agent"):
        compileall.compile_dir(root / package, quiet=2, workers=1)


_NO_BWRAP = (
    "!!! bubblewrap (bwrap) NOT FOUND: the sandbox is NOT being tested !!! "
    "(apt-get install bubblewrap)"
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if shutil.which("bwrap") or os.path.exists("/usr/bin/bwrap") or os.environ.get("CI"):
        return  # (under CI, a missing bwrap fails them with SandboxIsolationError's message)
    skip = pytest.mark.skip(reason=_NO_BWRAP)
    for item in items:
        if item.get_closest_marker("bubblewrap"):
            item.add_marker(skip)


_MISSING = (
    "!!! PostgreSQL server binaries NOT FOUND: PostgresKV is NOT being tested !!! "
    "(apt-get install postgresql, or set KELPIE_PG_BIN / KELPIE_PG_DSN)"
)


def _find_bindir() -> Path | None:
    candidates: list[str] = []
    if os.environ.get("KELPIE_PG_BIN"):
        candidates.append(os.environ["KELPIE_PG_BIN"])
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        candidates.append(out.stdout.strip())
    debian = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True
    )
    candidates.extend(debian)
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(str(Path(initdb).parent))
    for candidate in candidates:
        bindir = Path(candidate)
        if all((bindir / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return bindir
    return None


def _server_user_problem() -> str | None:
    """As root, the cluster must run as ``postgres`` through runuser; what is missing?"""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return "running as root, but there is no 'postgres' user to run the server as"
    if shutil.which("runuser") is None:
        return "running as root, but runuser (util-linux) is missing"
    return None


def _as_server_user(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "postgres", "--", *argv]


def _run(argv: list[str], what: str, cwd: Path, log: Path | None = None) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120, cwd=cwd)
    if result.returncode != 0:
        server_log = log.read_text(errors="replace") if log and log.exists() else ""
        raise RuntimeError(
            f"{what} failed ({result.returncode}): {result.stdout}\n{result.stderr}\n{server_log}"
        )


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A DSN for a superuser on a throwaway PostgreSQL cluster (started on first use)."""
    if os.environ.get("KELPIE_PG_DSN"):
        yield os.environ["KELPIE_PG_DSN"]
        return
    bindir = _find_bindir()
    problem = _server_user_problem()
    if bindir is None or problem:
        message = (
            _MISSING if bindir is None else f"!!! {problem}: PostgresKV is NOT being tested !!!"
        )
        if os.environ.get("CI"):
            pytest.fail(message + " -- failing because $CI is set", pytrace=False)
        pytest.skip(message)
    # The server user must reach the directory, and the socket path must stay short.
    root = Path(tempfile.mkdtemp(prefix="kelpie-pg-", dir="/tmp" if os.geteuid() == 0 else None))
    data, log = root / "data", root / "server.log"
    try:
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
        _run(
            _as_server_user(
                [
                    *(str(bindir / "initdb"), "-D", str(data), "-U", "kelpie", "--auth=trust"),
                    *("-E", "UTF8", "--locale=C", "--no-sync"),
                ]
            ),
            "initdb",
            root,
        )
        # Durability is pointless for a throwaway cluster; the socket lives in our directory.
        options = f"-p 5432 -k {root} -c listen_addresses='' -c fsync=off -c full_page_writes=off"
        _run(
            _as_server_user(
                [
                    *(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options),
                    *("-w", "-t", "60", "start"),
                ]
            ),
            "pg_ctl start",
            root,
            log,
        )
        try:
            yield f"host={root} port=5432 user=kelpie dbname=postgres"
        finally:
            _run(
                _as_server_user(
                    [str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]
                ),
                "pg_ctl stop",
                root,
                log,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


_schemas = itertools.count()


@pytest.fixture
def make_postgres_kv(postgres_dsn: str) -> Callable[[], Awaitable[PostgresKV]]:
    """``await make()`` opens a PostgresKV on a fresh, empty schema of the test cluster."""
    import psycopg
    import trio
    from psycopg.conninfo import make_conninfo

    from kelpie_agent.storage import PostgresKV

    def fresh_schema() -> str:
        name = f"kelpie_test_{os.getpid()}_{next(_schemas)}"
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {name}")
        return make_conninfo(postgres_dsn, options=f"-c search_path={name}")

    async def make() -> PostgresKV:
        dsn = await trio.to_thread.run_sync(fresh_schema)
        return await PostgresKV.open(dsn)

    return make
