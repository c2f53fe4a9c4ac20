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
from ._errors import SandboxStateError as SandboxStateError
from ._errors import SnapshotError as SnapshotError
from ._port import ExecResult as ExecResult
from ._port import Sandbox as Sandbox
from ._port import SandboxLimits as SandboxLimits
from ._port import SandboxState as SandboxState
from ._process import ProcessSandbox as ProcessSandbox
from ._snapshot import verify_snapshot as verify_snapshot

__all__ = [
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
    "SandboxLimits",
    "SandboxState",
    "SandboxStateError",
    "SnapshotError",
    "verify_snapshot",
]
