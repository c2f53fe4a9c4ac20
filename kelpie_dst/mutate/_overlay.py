"""Overlays: a mutated copy of the packages a mutant edits, outside the working tree.

The top-level packages (or module files) that a mutant's edits touch are copied from the
spec's root into a temporary directory, and the edited files are written there. A child
process with that directory first on ``PYTHONPATH`` imports the mutated code; the working
tree is never written. Compiled ``__pycache__`` files are copied too (they stay valid for the
files that did not change, since ``copy2`` keeps modification times), except those of the
edited files, which are deleted so that Python compiles the edited source.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ._spec import Mutant

__all__ = ["build_overlay", "overlay"]


def build_overlay(root: Path, mutant: Mutant, where: Path) -> None:
    """Write ``mutant``'s overlay into the empty directory ``where``."""
    texts = mutant.check(root)  # MutantStale before anything is copied
    for top in mutant.tops:
        source = root / top
        if source.is_dir():
            shutil.copytree(source, where / top, symlinks=True)
        else:
            shutil.copy2(source, where / top)
    for file, text in texts.items():
        target = where / file
        for stale in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
            stale.unlink()
        target.write_text(text)


@contextlib.contextmanager
def overlay(root: Path, mutant: Mutant) -> Iterator[Path]:
    """A temporary overlay directory for ``mutant``, removed afterwards."""
    where = Path(tempfile.mkdtemp(prefix=f"kelpie-mutant-{mutant.name}-"))
    try:
        build_overlay(root, mutant, where)
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)
