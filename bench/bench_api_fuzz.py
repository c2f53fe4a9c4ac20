"""The long API fuzz: schemathesis's CLI with ``--checks all`` against a real ``kelpie serve``.

Starts ``kelpie serve`` on a free port (a fresh data directory, the local model, an API key
unless ``--no-auth``), runs ``schemathesis run URL/openapi.json --checks all`` over every
operation (coverage, fuzzing and stateful phases, ``--max-examples`` per operation, a fixed
seed, the repository's ``schemathesis.toml``), stops the server, and prints schemathesis's
summary: how many test cases ran and how many failures it found (the acceptance figure is 0
failures over at least 2,000 requests). The full report goes to ``--out``.

Usage: ``python bench/bench_api_fuzz.py [--max-examples 60] [--seed 2] [--no-auth]``.
CI runs the smaller in-process version, ``tests/api/test_fuzz.py``.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
KEY = "bench-api-fuzz-key-0123456789"


def serve(home: Path, auth: bool) -> tuple[subprocess.Popen[bytes], str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KELPIE_API_KEY", "ANTHROPIC_API_KEY")}
    env["KELPIE_HOME"] = str(home)
    if auth:
        env["KELPIE_API_KEY"] = KEY
    out = home / "serve.out"
    with out.open("wb") as stdout, (home / "serve.err").open("wb") as stderr:
        proc = subprocess.Popen(
            [str(BIN / "kelpie"), "serve", "--port", "0", "--tool-timeout", "5"],
            stdout=stdout,
            stderr=stderr,
            env=env,
            start_new_session=True,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = re.search(r"listening on (http://\S+)", out.read_text(errors="replace"))
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            raise SystemExit(f"kelpie serve exited: {(home / 'serve.err').read_text()}")
        time.sleep(0.1)
    raise SystemExit("kelpie serve did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=60)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--no-auth", action="store_true")
    parser.add_argument("--out", default="api-fuzz-report.txt")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-api-fuzz-"))
    proc, url = serve(home, auth=not args.no_auth)
    command = [
        str(BIN / "schemathesis"),
        "run",
        f"{url}/openapi.json",
        "--checks",
        "all",
        "--max-examples",
        str(args.max_examples),
        "--seed",
        str(args.seed),
        "--workers",
        "1",
        "--no-color",
    ]
    if not args.no_auth:
        command += ["--header", f"Authorization: Bearer {KEY}"]
    started = time.monotonic()
    try:
        result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    report = result.stdout + result.stderr
    Path(args.out).write_text(report)
    cases = re.search(r"(\d+) generated, (.*)", report)
    print(
        f"schemathesis --checks all, max-examples {args.max_examples}, seed {args.seed}, "
        f"auth {'off' if args.no_auth else 'on'}: {time.monotonic() - started:.0f} s"
    )
    print(cases.group(0) if cases else "no summary (see the report)")
    print(report.strip().splitlines()[-1])
    errors = (home / "serve.err").read_text()
    print(f"server stderr: {len(errors.splitlines())} lines")
    sys.exit(result.returncode)


if __name__ == "__main__":
    main()
