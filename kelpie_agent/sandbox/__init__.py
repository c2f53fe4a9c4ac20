"""The sandbox port: where an agent's tool code runs, with a lifecycle, limits and snapshots.

kelpie_agent runs tool code only through :class:`Sandbox`; production uses
:class:`ProcessSandbox` (subprocesses under resource limits in a private directory), and
simulation uses ``kelpie_dst.shims.SimSandbox``. See docs/sandbox.md.
"""

from ._errors import CorruptSnapshotError as CorruptSnapshotError
from ._errors import ExecTimeoutError as ExecTimeoutError
from ._errors import PathOutsideSandboxError as PathOutsideSandboxError
from ._errors import PauseError as PauseError
from ._errors import RestoreError as RestoreError
from ._errors import SandboxBootError as SandboxBootError
from ._errors import SandboxCrashedError as SandboxCrashedError
from ._errors import SandboxError as SandboxError
from ._errors import SandboxFileError as SandboxFileError
from ._errors import SandboxIsolationError as SandboxIsolationError
from ._errors import SandboxStateError as SandboxStateError
from ._errors import SnapshotError as SnapshotError
from ._network import SandboxNetwork as SandboxNetwork
from ._network import check_host_pattern as check_host_pattern
from ._port import ALLOW_HOSTS_KEY as ALLOW_HOSTS_KEY
from ._port import ExecResult as ExecResult
from ._port import Sandbox as Sandbox
from ._port import SandboxLimits as SandboxLimits
from ._port import SandboxRequest as SandboxRequest
from ._port import SandboxState as SandboxState
from ._port import agent_network as agent_network
from ._process import ProcessSandbox as ProcessSandbox
from ._process import isolation_problem as isolation_problem
from ._snapshot import verify_snapshot as verify_snapshot

__all__ = [
    "ALLOW_HOSTS_KEY",
    "CorruptSnapshotError",
    "ExecResult",
    "ExecTimeoutError",
    "PathOutsideSandboxError",
    "PauseError",
    "ProcessSandbox",
    "RestoreError",
    "Sandbox",
    "SandboxBootError",
    "SandboxCrashedError",
    "SandboxError",
    "SandboxFileError",
    "SandboxIsolationError",
    "SandboxLimits",
    "SandboxNetwork",
    "SandboxRequest",
    "SandboxState",
    "SandboxStateError",
    "SnapshotError",
    "agent_network",
    "check_host_pattern",
    "isolation_problem",
    "verify_snapshot",
]
