"""The regression-seed corpus (``seeds/``): one file per scenario, one seed per line.

``seeds/<scenario>.txt`` holds lines like::

    123  # lost update under partition, fixed in 4f2a9c1
    77 workload.params.clients=2  # the same with two clients

A line is a seed, optional ``PATH=VALUE`` overrides, and a note after ``#`` (required: say why
the seed is there). Blank lines and lines that are only a comment are skipped. The file's stem
names the scenario (looked up like ``kelpie-dst run NAME``).
"""

from __future__ import annotations

from pathlib import Path

import attrs

from .._errors import UsageError
from ._loader import parse_override

MAX_SEED = 2**64 - 1

__all__ = ["CorpusEntry", "read_corpus"]


@attrs.frozen
class CorpusEntry:
    scenario: str
    seed: int
    overrides: tuple[str, ...]
    note: str
    file: Path
    line: int


def read_corpus(location: str | Path) -> list[CorpusEntry]:
    """Entries of a corpus directory (every ``*.txt``, sorted) or of one file."""
    path = Path(location)
    if path.is_dir():
        files = sorted(path.glob("*.txt"))
        if not files:
            raise UsageError(f"--corpus {location}: no *.txt seed files in it")
    elif path.is_file():
        files = [path]
    else:
        raise UsageError(f"--corpus {location}: no such file or directory")
    entries = []
    for file in files:
        for number, raw in enumerate(file.read_text().splitlines(), 1):
            entry = _parse_line(file, number, raw)
            if entry is not None:
                entries.append(entry)
    return entries


def _parse_line(file: Path, number: int, raw: str) -> CorpusEntry | None:
    body, hash_, note = raw.partition("#")
    words = body.split()
    if not words:
        return None
    where = f"{file}:{number}"
    signed = words[0].lstrip("+-").isdigit() and not words[0].isdigit()
    if signed or (words[0].isdigit() and int(words[0]) > MAX_SEED):
        raise UsageError(f"{where}: a seed is a whole number from 0 to {MAX_SEED}, got {words[0]}")
    if not words[0].isdigit():
        raise UsageError(f"{where}: expected 'SEED  # note', got {raw.strip()!r}")
    if not hash_ or not note.strip():
        raise UsageError(f"{where}: seed {words[0]} has no note; say why it is here after '#'")
    for word in words[1:]:
        try:
            parse_override(word)
        except UsageError:
            raise UsageError(f"{where}: {word!r} is not an override PATH=VALUE") from None
    return CorpusEntry(file.stem, int(words[0]), tuple(words[1:]), note.strip(), file, number)
