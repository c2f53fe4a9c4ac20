"""Running a SimStateMachine: settings profiles, ``run_machine`` and ``Machine.TestCase``.

Profiles (``KELPIE_HYPOTHESIS_PROFILE``, default ``ci``):

* ``ci``: short and stable. ``derandomize=True`` makes every run of the suite try the same
  examples (so CI never flips, and re-running the test replays a failure); with it Hypothesis
  keeps no example database. Only the first failure found is shrunk and reported.
* ``extended``: 250 examples of up to 50 steps, randomized, with the example database
  (failures are saved and replayed first on the next run).

Both leave out Hypothesis's explain phase (see ``_COMMON``) and its deadline.
"""

from __future__ import annotations

import functools
import os
import unittest
from typing import Any, ClassVar

from hypothesis import HealthCheck, Phase, reproduce_failure
from hypothesis import settings as Settings
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.stateful import run_state_machine_as_test

from .._errors import UsageError
from ._machine import SimStateMachine
from ._replay import reproduction_for

__all__ = ["PROFILES", "PROFILE_ENV", "profile_settings", "run_machine", "test_case_for"]

PROFILE_ENV = "KELPIE_HYPOTHESIS_PROFILE"
_COMMON: dict[str, Any] = {
    # Examples are deterministic but their wall time is not: never fail on it.
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow],
    # The explain phase re-runs examples under a line tracer: with a simulation inside, it
    # multiplied the toy service's time to find and shrink its bug by 15.
    "phases": tuple(p for p in Phase if p is not Phase.explain),
}
PROFILES: dict[str, dict[str, Any]] = {
    "ci": {
        "max_examples": 50,
        "stateful_step_count": 20,
        "derandomize": True,
        "database": None,
        "report_multiple_bugs": False,
    },
    # Explicit, not inherited: with $CI set Hypothesis's own default profile derandomizes
    # and drops the database, which would quietly turn "extended" into a replay of "ci".
    "extended": {
        "max_examples": 250,
        "stateful_step_count": 50,
        "derandomize": False,
        "database": "default",
    },
}


def profile_settings(profile: str | None = None, **overrides: Any) -> Settings:
    """The settings of ``profile`` (default: ``$KELPIE_HYPOTHESIS_PROFILE``, else ``ci``),
    with ``overrides`` applied. Use it as a decorator on a machine class, or pass it to
    :func:`run_machine`."""
    name = profile if profile is not None else os.environ.get(PROFILE_ENV, "").strip() or "ci"
    if name not in PROFILES:
        where = "profile" if profile is not None else PROFILE_ENV
        raise UsageError(
            f"{where}={name!r} is not a kelpie_dst Hypothesis profile "
            f"(choose from {', '.join(PROFILES)})"
        )
    chosen = {**_COMMON, **PROFILES[name], **overrides}
    if chosen.get("database") == "default":
        # Hypothesis's own default location, in the working directory.
        chosen["database"] = DirectoryBasedExampleDatabase(".hypothesis/examples")
    return Settings(**chosen)


def run_machine(
    machine: type[SimStateMachine], *, settings: Settings | None = None, profile: str | None = None
) -> None:
    """Run ``machine`` as a Hypothesis test: silently if it passes; otherwise raise the minimal
    failure, with the steps, the simulation seed and a replay line in its report.

    Settings come from ``settings``, else a ``@settings``/``@profile_settings`` decorator on the
    class, else the profile. ``$KELPIE_HYPOTHESIS_REPRODUCE`` naming this machine replays one
    recorded example instead.
    """
    if not (isinstance(machine, type) and issubclass(machine, SimStateMachine)):
        raise UsageError(f"run_machine takes a SimStateMachine subclass, got {machine!r}")
    chosen = settings or _decorated_settings(machine) or profile_settings(profile)
    pinned = reproduction_for(machine)
    if pinned is None:
        run_state_machine_as_test(machine, settings=chosen)
        return

    def replay() -> SimStateMachine:
        return machine()

    # Hypothesis accepts any factory here; its annotation says a class.
    run_state_machine_as_test(reproduce_failure(*pinned)(replay), settings=chosen)  # type: ignore[arg-type]


class _CurrentProfile:
    """``TestCase.settings`` until a ``@settings`` decorator replaces it: the profile's."""

    def __get__(self, obj: object, owner: type) -> Settings:
        return profile_settings()


@functools.cache
def test_case_for(machine: type[SimStateMachine]) -> type[unittest.TestCase]:
    """The ``unittest.TestCase`` behind ``machine.TestCase`` (runs :func:`run_machine`)."""

    class TestCase(unittest.TestCase):
        settings: ClassVar[Any] = _CurrentProfile()  # a @settings decorator assigns its own

        def runTest(self) -> None:
            run_machine(machine)

        runTest.is_hypothesis_test = True  # type: ignore[attr-defined]

    TestCase.__name__ = TestCase.__qualname__ = f"{machine.__name__}.TestCase"
    TestCase.__module__ = machine.__module__
    return TestCase


def _decorated_settings(machine: type[SimStateMachine]) -> Settings | None:
    """What a ``@settings(...)`` decorator on ``machine`` set, if any."""
    chosen = vars(machine.TestCase).get("settings")
    return None if isinstance(chosen, _CurrentProfile) else chosen
