"""Hypothesis stateful tests inside the simulation.

Subclass :class:`SimStateMachine`, write rules as ``async def`` (each runs as one step of a
persistent simulation), add the ready-made fault rules (``CrashRules``, ``PartitionRules``,
``FaultWindowRules``, ``TimeRules``) as mixins, and run it with
:func:`run_machine` or ``Machine.TestCase``. Each example opens its own simulation with a seed
drawn by Hypothesis, so shrinking simplifies the seed along with the steps and the faults.
``Outcome``, ``Register`` and ``ExactlyOnce`` model requests whose outcome a client may not
learn (a timeout, a crash mid-request), for checking a service against a model honestly.

See docs/hypothesis.md.
"""

from ._decorators import initialize as initialize
from ._decorators import invariant as invariant
from ._decorators import precondition as precondition
from ._decorators import rule as rule
from ._machine import SimStateMachine as SimStateMachine
from ._models import ExactlyOnce as ExactlyOnce
from ._models import Outcome as Outcome
from ._models import Register as Register
from ._replay import REPRODUCE_ENV as REPRODUCE_ENV
from ._rules import CrashRules as CrashRules
from ._rules import FaultWindowRules as FaultWindowRules
from ._rules import PartitionRules as PartitionRules
from ._rules import TimeRules as TimeRules
from ._rules import enable_fault as enable_fault
from ._run import PROFILE_ENV as PROFILE_ENV
from ._run import PROFILES as PROFILES
from ._run import profile_settings as profile_settings
from ._run import run_machine as run_machine
