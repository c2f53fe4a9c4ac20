"""Print a trace file written by ``kelpie-dst run --trace FILE``, one event per line.

A stand-in until the planned ``kelpie-dst trace`` command exists (issue #7). It uses
``kelpie_dst._trace.read_trace``, a private function that may change.

Usage: python show_trace.py FILE [KIND_PREFIX ...]
"""

from __future__ import annotations

import sys

from kelpie_dst._trace import read_trace


def main() -> None:
    path, prefixes = sys.argv[1], tuple(sys.argv[2:])
    for event in read_trace(path):
        if not prefixes or event.kind.startswith(prefixes):
            print(event.describe())


if __name__ == "__main__":
    main()
