"""Checkers: pure functions over recorded histories, independent of the simulator.

The linearizability checker decides whether a concurrent key-value history could have been
produced by a single, atomic copy of the store; see ``docs/checkers.md``.
"""

from ._history import UNKNOWN as UNKNOWN
from ._history import HistoryRecorder as HistoryRecorder
from ._history import Key as Key
from ._history import MalformedHistoryError as MalformedHistoryError
from ._history import Operation as Operation
from ._history import OpHandle as OpHandle
from ._history import OpKind as OpKind
from ._history import Unknown as Unknown
from ._linearizability import DEFAULT_MAX_STEPS as DEFAULT_MAX_STEPS
from ._linearizability import check_linearizability as check_linearizability
from ._model import KVModel as KVModel
from ._model import KVState as KVState
from ._model import Model as Model
from ._result import BlockedOp as BlockedOp
from ._result import Counterexample as Counterexample
from ._result import LinearizabilityResult as LinearizabilityResult
from ._result import LinearizedOp as LinearizedOp

__all__ = [
    "DEFAULT_MAX_STEPS",
    "UNKNOWN",
    "BlockedOp",
    "Counterexample",
    "HistoryRecorder",
    "KVModel",
    "KVState",
    "Key",
    "LinearizabilityResult",
    "LinearizedOp",
    "MalformedHistoryError",
    "Model",
    "OpHandle",
    "OpKind",
    "Operation",
    "Unknown",
    "check_linearizability",
]
