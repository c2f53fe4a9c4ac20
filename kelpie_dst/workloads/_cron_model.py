"""A reference model of five-field cron expressions, for the schedule oracle.

The oracle must not ask the code under test when a schedule is due: a bug in the server's cron
arithmetic (``kelpie_agent.agent._cron``) would then be the oracle's bug too, and every check
built on it would agree with the server (the session-8 blind test found exactly that). This is
a deliberately naive, independent reading of POSIX cron: a minute fires when each of its fields
is in the field's set, where a day fires when the day of the month *or* the weekday matches if
both are restricted (either one if only one is). The next firing time is found by walking
minute by minute, which is slow but obviously right, and bounded (``horizon_minutes``).
"""

from __future__ import annotations

import datetime as _dt

import attrs

__all__ = ["CronModel", "cron_model"]

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))


def _number(text: str, field: int) -> int:
    lowered = text.lower()
    if field == 3 and lowered in _MONTHS:
        return _MONTHS.index(lowered) + 1
    if field == 4 and lowered in _DAYS:
        return _DAYS.index(lowered)
    return int(text)


def _values(text: str, field: int) -> frozenset[int]:
    low, high = _RANGES[field]
    out: set[int] = set()
    for part in text.split(","):
        base, slash, step_text = part.partition("/")
        step = int(step_text) if slash else 1
        if base == "*":
            first, last = low, high
        elif "-" in base:
            a, _, b = base.partition("-")
            first, last = _number(a, field), _number(b, field)
        else:
            first = _number(base, field)
            last = high if slash else first
        value = first
        while value <= last:
            out.add(0 if field == 4 and value == 7 else value)
            value += step
    return frozenset(out)


@attrs.frozen
class CronModel:
    """One expression, read naively. Times are UTC epoch seconds."""

    expression: str
    fields: tuple[frozenset[int], ...]
    day_restricted: bool
    weekday_restricted: bool

    def fires_at(self, epoch: float) -> bool:
        """Does the expression fire at ``epoch`` (which must be a whole minute)?"""
        whole = round(epoch)
        if abs(epoch - whole) > 1e-3 or whole % 60:
            return False
        moment = _dt.datetime.fromtimestamp(whole, tz=_dt.UTC)
        minutes, hours, days, months, weekdays = self.fields
        if moment.minute not in minutes or moment.hour not in hours:
            return False
        if moment.month not in months:
            return False
        in_month = moment.day in days
        in_week = moment.isoweekday() % 7 in weekdays
        if self.day_restricted and self.weekday_restricted:
            return in_month or in_week
        if self.day_restricted:
            return in_month
        if self.weekday_restricted:
            return in_week
        return True

    def next_after(self, epoch: float, horizon_minutes: int = 60 * 24 * 8) -> float:
        """The first whole minute strictly after ``epoch`` at which it fires."""
        minute = (int(epoch // 60) + 1) * 60
        for _ in range(horizon_minutes):
            if self.fires_at(float(minute)):
                return float(minute)
            minute += 60
        raise ValueError(f"{self.expression!r} does not fire within {horizon_minutes} minutes")


def cron_model(expression: str) -> CronModel:
    """The model of a well-formed five-field expression (the workload's own; no validation
    beyond what reading it needs)."""
    parts = expression.split()
    if len(parts) != 5:
        raise ValueError(f"expected five cron fields, got {expression!r}")
    fields = tuple(_values(part, i) for i, part in enumerate(parts))
    return CronModel(expression, fields, parts[2] != "*", parts[4] != "*")
