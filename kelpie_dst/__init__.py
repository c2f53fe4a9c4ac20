"""kelpie_dst: deterministic simulation testing for trio programs.

Run an unmodified trio program on one thread, in virtual time, with every random choice drawn
from one seed, faults injected at the I/O boundary, and a replayable seed for every failure::

    result = kelpie_dst.run(main, seed=42)
    print(result.summary_line())

See docs/tutorial.md.

Importing the package is cheap: the simulated ports (``open_kv``, ``open_sandbox``, and
``kelpie_dst.shims``), which need ``kelpie_agent``, load on first use, and so do the fault
types they register (``fault_types()`` and an unknown fault name load them first).
"""

from typing import TYPE_CHECKING, Any

from ._buggify import buggify as buggify
from ._determinism import DeterminismReport as DeterminismReport
from ._determinism import assert_deterministic as assert_deterministic
from ._determinism import check_determinism as check_determinism
from ._errors import DstError as DstError
from ._errors import FailureKind as FailureKind
from ._errors import HostNetworkError as HostNetworkError
from ._errors import InvariantViolation as InvariantViolation
from ._errors import LivenessError as LivenessError
from ._errors import NodeDownError as NodeDownError
from ._errors import NondeterminismError as NondeterminismError
from ._errors import ScenarioFailed as ScenarioFailed
from ._errors import SimulationCrashed as SimulationCrashed
from ._errors import UsageError as UsageError
from ._faults import Fault as Fault
from ._faults import FaultPlan as FaultPlan
from ._faults import FaultSpec as FaultSpec
from ._faults import fault_types as fault_types
from ._faults import register_fault as register_fault
from ._nodes import Node as Node
from ._nodes import NodeState as NodeState
from ._process_faults import nemesis as _nemesis  # noqa: F401  (registers process.* faults)
from ._public import current_simulation as current_simulation
from ._public import log as log
from ._result import Failure as Failure
from ._result import RunResult as RunResult
from ._rng import RngStream as RngStream
from ._run import run as run
from ._sim import DEFAULT_EPOCH as DEFAULT_EPOCH
from ._sim import Simulation as Simulation
from ._stepping import SimulationHandle as SimulationHandle
from ._stepping import open_simulation as open_simulation
from ._trace import TraceFile as TraceFile
from ._trace import load_trace as load_trace
from ._wallclock import NodeClock as NodeClock
from .net import NetworkConfig as NetworkConfig
from .net import SimNetwork as SimNetwork

if TYPE_CHECKING:
    from .shims import open_kv as open_kv
    from .shims import open_sandbox as open_sandbox

_SHIMS = frozenset({"open_kv", "open_sandbox"})


def __getattr__(name: str) -> Any:
    if name in _SHIMS:
        from . import shims

        value = getattr(shims, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__version__ = "0.1.0"
