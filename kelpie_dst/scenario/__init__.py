"""Scenario files (``scenarios/*.toml``): loading, running, sweeping, replaying, shrinking.

A scenario names a workload (``module:function`` declared with :func:`workload`), its
parameters, the topology, the virtual duration, the faults (explicit and swarm), the invariants
and a liveness phase. See docs/scenarios.md.
"""

from ._loader import apply_overrides as apply_overrides
from ._loader import find_scenario as find_scenario
from ._loader import load_scenario as load_scenario
from ._loader import parse_override as parse_override
from ._loader import scenario_dirs as scenario_dirs
from ._loader import scenario_files as scenario_files
from ._model import FaultEntry as FaultEntry
from ._model import Liveness as Liveness
from ._model import LlmTopology as LlmTopology
from ._model import McpServer as McpServer
from ._model import Scenario as Scenario
from ._model import SimOptions as SimOptions
from ._model import Swarm as Swarm
from ._model import Topology as Topology
from ._model import WorkloadSpec as WorkloadSpec
from ._runtime import ScenarioRun as ScenarioRun
from ._runtime import describe_faults as describe_faults
from ._runtime import run_scenario as run_scenario
from ._schema import ScenarioError as ScenarioError
from ._token import ReplayToken as ReplayToken
from ._token import current_hashseed as current_hashseed
from ._workload import BUILTIN_INVARIANTS as BUILTIN_INVARIANTS
from ._workload import WorkloadContext as WorkloadContext
from ._workload import WorkloadInfo as WorkloadInfo
from ._workload import invariant as invariant
from ._workload import workload as workload

__all__ = [
    "BUILTIN_INVARIANTS",
    "FaultEntry",
    "Liveness",
    "LlmTopology",
    "McpServer",
    "ReplayToken",
    "Scenario",
    "ScenarioError",
    "ScenarioRun",
    "SimOptions",
    "Swarm",
    "Topology",
    "WorkloadContext",
    "WorkloadInfo",
    "WorkloadSpec",
    "apply_overrides",
    "current_hashseed",
    "describe_faults",
    "find_scenario",
    "invariant",
    "load_scenario",
    "parse_override",
    "run_scenario",
    "scenario_dirs",
    "scenario_files",
    "workload",
]
