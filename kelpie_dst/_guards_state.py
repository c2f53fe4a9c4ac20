"""Module-level random state that must not carry over from one run to the next in a process.

The global ``random`` module is seeded by the session itself. Two more generators live in
modules and would otherwise continue from wherever the previous run (or the host) left them:

* ``tempfile``'s name sequence (``tempfile._name_sequence``), created lazily with an unseeded
  ``random.Random``: the first run of a process created it (a redirected call, traced), later
  runs reused it, so one ``tempfile.mkdtemp()`` made the in-process repeat of
  ``check-determinism`` differ. Each run now gets a fresh sequence seeded from its seed, and
  the temporary directory is looked up (and cached by tempfile) before the run, because that
  first lookup draws names from a generator of its own.
* numpy's legacy global generator (``numpy.random.seed``/``random``/``randint``...), when numpy
  was imported before the run: seeded from the run's seed, and restored afterwards.

Both are restored when the run ends, so the host's own temporary names and numpy draws go on as
if no simulation had run.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
from typing import Any

from ._rng import derive_seed

__all__ = ["ModuleRandomState"]


class ModuleRandomState:
    """Seeds the module-level generators for one run (:meth:`enter`) and restores them."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._tempfile: Any = None
        self._numpy_state: Any = None

    def enter(self) -> None:
        # The first gettempdir() of a process probes the directory with names from a fresh
        # unseeded generator; do it now, outside the run, so no run is the "first".
        tempfile.gettempdir()
        self._tempfile = tempfile._name_sequence  # type: ignore[attr-defined]
        names = tempfile._RandomNameSequence()  # type: ignore[attr-defined]
        names._rng = random.Random(derive_seed(self.seed, "tempfile"))  # noqa: S311
        names._rng_pid = os.getpid()
        tempfile._name_sequence = names  # type: ignore[attr-defined]
        numpy_random = sys.modules.get("numpy.random")
        if numpy_random is not None:
            self._numpy_state = numpy_random.get_state()
            numpy_random.seed(derive_seed(self.seed, "numpy-random") % 2**32)

    def exit(self) -> None:
        tempfile._name_sequence = self._tempfile  # type: ignore[attr-defined]
        numpy_random = sys.modules.get("numpy.random")
        if numpy_random is not None and self._numpy_state is not None:
            numpy_random.set_state(self._numpy_state)
        self._numpy_state = None
