"""Repository contracts: the README's commands, CI, and kelpie_agent's determinism rules."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _commands() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", README, re.S)
    return [line for block in blocks for line in block.splitlines() if line.startswith("python3")]


def test_readme_has_the_two_quick_start_commands() -> None:
    commands = _commands()
    assert len(commands) == 2, commands
    assert "kelpie-dst run" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert _commands()[1] in ci


def test_the_headline_run_from_the_readme_passes() -> None:
    command = _commands()[0]
    args = command.split("kelpie-dst ", 1)[1].split()
    proc = subprocess.run(
        [sys.executable, "-m", "kelpie_dst", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1].startswith("seed=1 trace_hash=")
    assert "faults fired:" in proc.stdout


FORBIDDEN = re.compile(
    r"time\.time\(|time_ns\(|datetime\.(now|utcnow|today)\(|date\.today\(|uuid[14]\(|"
    r"os\.urandom|^\s*import random|^\s*from random import|threading\.Thread\(|SystemRandom"
)


def test_kelpie_agent_never_reads_the_wall_clock_or_entropy_directly() -> None:
    offenders = []
    for path in sorted((ROOT / "kelpie_agent").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if FORBIDDEN.search(line) and "# determinism-ok" not in line:
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "use the Clock/Rng/Ids ports instead:\n" + "\n".join(offenders)


def test_every_registered_fault_type_is_documented() -> None:
    import importlib

    from kelpie_dst._faults import fault_types

    importlib.import_module("kelpie_dst.shims")  # registers the shim fault domains

    text = (ROOT / "docs" / "faults.md").read_text()
    missing = [name for name in sorted(fault_types()) if f"`{name}`" not in text]
    assert len(fault_types()) >= 30
    assert not missing, f"docs/faults.md lacks {missing}; see kelpie-dst faults --markdown"


# Imported only where their users already have them (the pytest plugin, loaded by pytest), or
# inside ``try: ... except ImportError``.
OPTIONAL_IMPORTS = {
    "pytest": {"kelpie_dst/pytest_plugin.py"},
    "opentelemetry": {"kelpie_dst/shims/llm/_api_host.py"},
    # the `cluster` extra: imported when `sweep --cluster` is used, with a one-line error
    # naming the extra when it is missing
    "distributed": {"kelpie_dst/scenario/_dask.py"},
}


def test_every_third_party_import_is_a_base_dependency() -> None:
    """The README's first command installs without the dev extra, so everything the packages
    import (outside the pytest plugin) must be in ``[project] dependencies``."""
    import ast
    import importlib.metadata
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {re.split(r"[\[<>=~!; ]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    distributions = importlib.metadata.packages_distributions()
    missing = []
    for package in ("kelpie_dst", "kelpie_agent"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    dists = {d.lower() for d in distributions.get(top, [])}
                    if not dists or dists & base or top in ("kelpie_dst", "kelpie_agent"):
                        continue  # the standard library, a base dependency, or ours
                    where = str(path.relative_to(ROOT))
                    if where not in OPTIONAL_IMPORTS.get(top, set()):
                        missing.append(f"{where}: {name} ({', '.join(sorted(dists))})")
    assert not missing, missing
