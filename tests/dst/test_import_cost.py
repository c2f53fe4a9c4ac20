"""Start-up stays cheap: ``import kelpie_dst`` and a plain ``kelpie-dst run --entry`` load
neither the agent server nor the heavy libraries it needs (each checked in a fresh process,
where nothing else has imported them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# top-level packages that must wait until they are used
HEAVY = (
    "pytest",
    "_pytest",
    "kelpie_agent",
    "fastapi",
    "starlette",
    "pydantic",
    "anthropic",
    "httpx",
    "httpx2",
    "letta_client",
    "mcp",
    "hypothesis",
    "rich",
)


def _loaded(code: str, cwd: Path | None = None) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=cwd
    ).stdout
    modules = json.loads(out.strip().splitlines()[-1])
    return sorted({m.split(".")[0] for m in modules} & set(HEAVY))


def test_import_kelpie_dst_loads_nothing_heavy() -> None:
    assert _loaded("import kelpie_dst") == []


def test_an_entry_run_loads_nothing_heavy(tmp_path: Path) -> None:
    (tmp_path / "empty_main.py").write_text("async def main():\n    pass\n")
    code = (
        "import sys; sys.path.insert(0, '.')\n"
        "from kelpie_dst._cli import main\n"
        "try:\n    main(['run', '--entry', 'empty_main:main', '--seed', '1'])\n"
        "except SystemExit as exit:\n    assert exit.code == 0, exit.code"
    )
    assert _loaded(code, cwd=tmp_path) == []


def test_fault_types_and_shims_load_on_first_use() -> None:
    code = (
        "import kelpie_dst, sys\n"
        "assert 'kelpie_agent' not in sys.modules\n"
        "assert kelpie_dst.Fault('llm.timeout', 0.1).spec.params == {'after': 60.0}\n"
        "assert 'storage.latency' in kelpie_dst.fault_types()\n"
        "assert callable(kelpie_dst.open_kv)"
    )
    assert _loaded(code) == ["kelpie_agent"]


def test_the_server_loads_the_mcp_sdk_only_when_a_client_connects() -> None:
    """``kelpie serve`` imports the MCP client with the service; the ``mcp`` SDK and its types
    (about a second of a start-up) load only when a server is first connected (Dspeed-12)."""
    assert "mcp" not in _loaded("import kelpie_agent.cli._serve, kelpie_agent.mcp")
    code = (
        "from kelpie_agent.mcp import McpServerConfig, stdio_transport\n"
        "stdio_transport(McpServerConfig(name='s', command='true'))"
    )
    assert "mcp" in _loaded(code)
