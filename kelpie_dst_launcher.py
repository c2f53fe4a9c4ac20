"""The ``kelpie-dst`` console script: pins PYTHONHASHSEED before importing anything heavy.

String hashing is randomised per process unless PYTHONHASHSEED is set when the interpreter
starts, and set iteration order follows it. So the CLI re-executes itself with the variable
pinned (design.md §1.2) — and does so here, before importing kelpie_dst, so a run pays for
one import of the package, not two. Opt out with KELPIE_DST_NO_REEXEC=1.
"""

import os
import sys


def main() -> None:
    if os.environ.get("KELPIE_DST_NO_REEXEC") != "1" and os.environ.get(
        "PYTHONHASHSEED", "random"
    ) in ("", "random"):
        env = dict(os.environ, PYTHONHASHSEED="0")
        os.execve(sys.executable, [sys.executable, "-m", "kelpie_dst", *sys.argv[1:]], env)
    from kelpie_dst._cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
