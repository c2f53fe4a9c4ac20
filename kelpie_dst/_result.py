"""Values a run produces: :class:`RunResult` and :class:`Failure`."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from ._errors import FailureKind
from ._faults import Fault

__all__ = ["Failure", "RunResult"]


@attrs.frozen
class Failure:
    """Why a run failed: its class (the exit code), a one-line message, and details."""

    kind: FailureKind
    message: str
    details: str = ""
    virtual_time: float = 0.0

    @property
    def exit_code(self) -> int:
        return int(self.kind)

    def describe(self) -> str:
        text = f"FAILED: {self.kind.label} at t={self.virtual_time:.6f}s\n{self.message}"
        if self.details:
            text += "\n" + self.details
        return text


@attrs.frozen
class RunResult:
    """The outcome of one seeded run. Equal seeds and options give equal results."""

    seed: int
    trace_hash: str
    virtual_time: float
    events: int
    failure: Failure | None
    strategy: str = "random"
    faults: tuple[Fault, ...] = ()
    faults_fired: Mapping[str, int] = attrs.field(factory=dict, hash=False)
    # BUGGIFY sites that fired, with their counts (``buggify`` events in the trace)
    buggify_fired: Mapping[str, int] = attrs.field(factory=dict, eq=False, hash=False)
    redirected: tuple[tuple[str, str, int], ...] = ()
    # the run's guard policy: under "strict" only guard_allow modules are redirected
    guards: str = attrs.field(default="redirect", eq=False)
    value: object = attrs.field(default=None, eq=False, hash=False)
    wall_seconds: float = attrs.field(default=0.0, eq=False)
    # task steps the scheduler ran (the sum of trio's batch sizes)
    steps: int = attrs.field(default=0, eq=False)

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def exit_code(self) -> int:
        return 0 if self.failure is None else self.failure.exit_code

    def summary_line(self) -> str:
        """``seed=<N> trace_hash=<hex> virtual_time=<seconds> events=<count>``."""
        return (
            f"seed={self.seed} trace_hash={self.trace_hash} "
            f"virtual_time={self.virtual_time:.6f} events={self.events}"
        )
