"""Hypothesis's stateful decorators, re-typed so that type checkers accept ``async def``.

They are the very same decorators (``hypothesis.stateful.rule`` and friends); Hypothesis types
them for functions returning ``None``, which an ``async def`` does not. Using Hypothesis's own
works the same at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from hypothesis import stateful

__all__ = ["initialize", "invariant", "precondition", "rule"]

F = TypeVar("F", bound=Callable[..., Any])


def rule(**kwargs: Any) -> Callable[[F], F]:
    """:func:`hypothesis.stateful.rule`; the rule may be ``async def``."""
    return cast(Callable[[F], F], stateful.rule(**kwargs))


def initialize(**kwargs: Any) -> Callable[[F], F]:
    """:func:`hypothesis.stateful.initialize`; the rule may be ``async def``."""
    return cast(Callable[[F], F], stateful.initialize(**kwargs))


def invariant(*, check_during_init: bool = False) -> Callable[[F], F]:
    """:func:`hypothesis.stateful.invariant`; the invariant may be ``async def``."""
    return stateful.invariant(check_during_init=check_during_init)


def precondition(precond: Callable[[Any], Any]) -> Callable[[F], F]:
    """:func:`hypothesis.stateful.precondition`; ``precond`` may be ``async def`` (it then runs
    as a step of its own, each time Hypothesis asks)."""
    return stateful.precondition(precond)
