"""How long is the program? The PCT strategy's horizon, estimated from a calibration run.

PCT (Burckhardt et al., ASPLOS 2010) finds a bug of depth ``d`` in a program of ``n`` steps
with ``k`` tasks with probability at least ``1 / (k * n**(d - 1))`` per run, provided its
``d - 1`` change points are spread over the program's real length ``n``. Spread over a fixed
2,000 steps, they almost never land inside a 30-step program (issue #14).

The estimate must not depend on which seeds ran before in the process, or a sweep's replay line
would not reproduce its failure. So it comes from a *calibration run*: the same program and
options, with seed 0 and the uniform strategy, whose length in task steps is the horizon. It is
seed-independent, so every process (a sweep's workers, a replay, ``check-determinism``'s fresh
processes) computes the same horizon; it runs once per program and options per process (cached
here), so a sweep pays for one extra run per worker. The horizon is recorded in ``run.start``.

Programs that cannot be named (closures, such as a scenario's ``main``) and stepped simulations
(``open_simulation``, Hypothesis) get no calibration: their change points are drawn
log-uniformly (:class:`~kelpie_dst._sched.PCTStrategy`), which fits any length at some cost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ._entry import entry_name
from ._sim import SimConfig

__all__ = ["horizon_for"]

_HORIZONS: dict[tuple[str, str], int] = {}


def horizon_for(
    main: Callable[..., Any], config: SimConfig, calibrate: Callable[[SimConfig], int]
) -> int | None:
    """The horizon for ``main`` under ``config`` (``None``: no estimate, ``main`` has no name).

    ``calibrate(config)`` runs the program once under ``config`` and returns its length in
    task steps; it is called at most once per program and options in a process.
    """
    name = entry_name(main)
    if name is None:
        return None
    reference = attrs.evolve(config, seed=0, strategy="random", record=False, pct_horizon=None)
    key = (name, repr(reference))
    horizon = _HORIZONS.get(key)
    if horizon is None:
        horizon = _HORIZONS[key] = max(1, calibrate(reference))
    return horizon
