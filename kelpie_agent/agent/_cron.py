"""Five-field cron expressions (POSIX), evaluated in UTC: ``minute hour day month weekday``.

Each field is ``*``, a number, a range ``a-b``, a list ``a,b,c``, any of those with a step
``/n`` (``*/15``, ``0-30/5``), or for months and weekdays a three-letter name (``jan``,
``mon``). Weekdays run 0-6 from Sunday, and 7 is Sunday too. As in cron, when both the day of
the month and the weekday are restricted, a day matching either one fires. No seconds field,
no ``@daily`` shorthands (they are refused with a one-line error).
"""

from __future__ import annotations

import calendar
import datetime as _dt

import attrs

from ._errors import InvalidRequestError

__all__ = ["Cron", "parse_cron"]

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_DAYS = {name.lower(): (i + 1) % 7 for i, name in enumerate(calendar.day_abbr)}
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
_HORIZON_DAYS = 366 * 5  # a schedule that never fires within five years is refused


def _value(text: str, names: dict[str, int], where: str) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not text.isdigit():
        raise InvalidRequestError(f"cron_expression: {where}: {text!r} is not a number")
    return int(text)


def _field(text: str, index: int) -> frozenset[int]:
    name, low, high, names = _FIELDS[index]
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise InvalidRequestError(f"cron_expression: {name}: bad step in {part!r}")
            step = int(step_text)
        if base == "*":
            start, stop = low, high
        elif "-" in base:
            first, _, last = base.partition("-")
            start, stop = _value(first, names, name), _value(last, names, name)
        else:
            start = _value(base, names, name)
            stop = high if step_text else start
        if not (low <= start <= high and low <= stop <= high) or start > stop:
            raise InvalidRequestError(
                f"cron_expression: {name}: {part!r} is outside {low}-{high} or reversed"
            )
        values.update(range(start, stop + 1, step))
    if index == 4 and 7 in values:  # Sunday is 0 and 7
        values = (values - {7}) | {0}
    return frozenset(values)


@attrs.frozen
class Cron:
    """A parsed expression; :meth:`next_after` gives the next firing time."""

    expression: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool
    any_weekday: bool

    def _day_matches(self, day: _dt.date) -> bool:
        in_month = day.day in self.days
        weekday = (day.weekday() + 1) % 7  # Python: Monday 0; cron: Sunday 0
        in_week = weekday in self.weekdays
        if self.any_day and self.any_weekday:
            return True
        if self.any_day:
            return in_week
        if self.any_weekday:
            return in_month
        return in_month or in_week

    def next_after(self, epoch: float) -> float:
        """The first whole minute strictly after ``epoch`` (UTC epoch seconds) that matches."""
        moment = _dt.datetime.fromtimestamp(epoch, tz=_dt.UTC).replace(second=0, microsecond=0)
        moment += _dt.timedelta(minutes=1)
        day = moment.date()
        for _ in range(_HORIZON_DAYS):
            if day.month in self.months and self._day_matches(day):
                start = moment if day == moment.date() else None
                for hour in sorted(self.hours):
                    if start is not None and hour < start.hour:
                        continue
                    for minute in sorted(self.minutes):
                        if start is not None and hour == start.hour and minute < start.minute:
                            continue
                        found = _dt.datetime(
                            day.year, day.month, day.day, hour, minute, tzinfo=_dt.UTC
                        )
                        return found.timestamp()
            day += _dt.timedelta(days=1)
        raise InvalidRequestError(
            f"cron_expression: {self.expression!r} does not fire within five years"
        )


def parse_cron(expression: object) -> Cron:
    """Parse a five-field expression; a one-line :class:`InvalidRequestError` if it is not."""
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidRequestError("cron_expression: must be a non-empty string")
    parts = expression.split()
    if len(parts) != 5:
        raise InvalidRequestError(
            f"cron_expression: expected 5 fields (minute hour day month weekday), "
            f"got {len(parts)} in {expression!r}"
        )
    minutes, hours, days, months, weekdays = (_field(part, i) for i, part in enumerate(parts))
    cron = Cron(
        " ".join(parts),
        minutes,
        hours,
        days,
        months,
        weekdays,
        any_day=parts[2] == "*",
        any_weekday=parts[4] == "*",
    )
    cron.next_after(0.0)  # refuse expressions that never fire (31 February)
    return cron
