"""Process-wide adjustments made once, at the first simulation: deterministic hashes for the
thread objects the standard library keeps in sets, and silence about killed threads.

``ThreadPoolExecutor.shutdown`` joins ``self._threads``, a set of ``Thread`` objects;
``concurrent.futures.as_completed`` and ``wait`` hand back sets of futures. Their default hash is
the object's address, so the order of those sets differs between processes (and between runs
in one process), and so would the order of the joins and the results. Threads and futures
created inside a simulation get a hash from a per-run serial number instead, fixed the first
time they are hashed; everything else keeps its address hash. The class attribute stays
installed after the first simulation (an object's hash must never change), and behaves exactly
as before outside simulations.

A killed thread (``ThreadKilled``, see ``_core``) unwinds like a cancellation; a
``ThreadPoolExecutor`` worker logs whatever ends it as "Exception in worker". A filter on the
``concurrent.futures`` logger drops those records, and only those: a killed process says
nothing.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from ._core import ThreadKilled, current

__all__ = ["install_stable_hashes"]

_ATTR = "_kelpie_dst_hash"
_DONE: set[str] = set()


def _stable_hash(self: Any) -> int:
    attrs = self.__dict__
    value = attrs.get(_ATTR)
    if value is None:
        me = current()
        value = object.__hash__(self) if me is None else me.runtime.next_serial()
        attrs[_ATTR] = value
    return int(value)


def install_stable_hashes() -> None:
    """Give ``threading.Thread`` and (once imported) ``concurrent.futures.Future`` stable
    hashes, unless a class already defines its own."""
    targets: list[tuple[str, Any]] = [("threading.Thread", threading.Thread)]
    futures = sys.modules.get("concurrent.futures._base")
    if futures is not None:
        targets.append(("concurrent.futures.Future", futures.Future))
    for name, cls in targets:
        if name in _DONE:
            continue
        _DONE.add(name)
        if cls.__hash__ is object.__hash__:
            cls.__hash__ = _stable_hash
    if "logging" not in _DONE:
        _DONE.add("logging")
        logging.getLogger("concurrent.futures").addFilter(_not_killed)


def _not_killed(record: logging.LogRecord) -> bool:
    return not (record.exc_info and isinstance(record.exc_info[1], ThreadKilled))
