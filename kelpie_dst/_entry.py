"""Loading ``package.module:function`` entry points and parsing human durations."""

from __future__ import annotations

import importlib
import math
import os
import re
import shlex
import sys
from collections.abc import Awaitable, Callable, Mapping
from decimal import Decimal
from typing import Any

from ._errors import UsageError
from ._hashseed import current_hashseed
from .threads._watchdog import DEFAULT_WATCHDOG

__all__ = ["entry_name", "format_duration", "load_entry", "parse_duration", "replay_command"]

_ENTRY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|)")
_COMPOUND = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d)?)+$")
_UNITS = {
    "ms": Decimal("0.001"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
    "d": Decimal(86400),
    "": Decimal(1),
}


def load_entry(spec: str) -> Callable[..., Awaitable[Any]]:
    """Import ``package.module:function`` (from the current directory or PYTHONPATH)."""
    if not _ENTRY.match(spec):
        raise UsageError(f"--entry must look like package.module:function, got {spec!r}")
    module_name, _, attr_path = spec.partition(":")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            raise UsageError(f"--entry {spec}: no module named {error.name!r}") from None
        raise UsageError(f"--entry {spec}: importing {module_name} failed: {error}") from None
    except Exception as error:
        raise UsageError(
            f"--entry {spec}: importing {module_name} failed: {type(error).__name__}: {error}"
        ) from None
    target: Any = module
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise UsageError(f"--entry {spec}: {module_name} has no attribute {part!r}") from None
    if not callable(target):
        raise UsageError(f"--entry {spec}: {attr_path} is not callable")
    return target  # type: ignore[no-any-return]


def entry_name(fn: Callable[..., Any]) -> str | None:
    """``module:qualname`` for ``fn`` if it can be imported by that name, else ``None``."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        return None
    return f"{module}:{qualname}"


def parse_duration(text: str | float) -> float:
    """``90s``, ``10m``, ``1h30m``, ``500ms``, ``2d``, ``1.5h`` or plain seconds, as seconds.

    Parts are added in exact decimal arithmetic and rounded to a float once, so that
    ``parse_duration(format_duration(x)) == x`` for every positive float ``x``.
    """
    source = re.sub(r"\s+", "", str(text))
    if isinstance(text, int | float) and not isinstance(text, bool) and math.isfinite(text):
        source = format(Decimal(repr(text)), "f")
    parts = _PART.findall(source) if _COMPOUND.match(source) else []
    if not parts:
        raise UsageError(
            f"bad duration {text!r}: use a number with a unit, like 90s, 10m, 1h30m or 500ms"
        )
    units = [unit for _, unit in parts]
    if len(parts) > 1 and ("" in units or len(set(units)) != len(units)):
        raise UsageError(f"bad duration {text!r}: every part needs its own unit, like 1h30m")
    total = sum((Decimal(number) * _UNITS[unit] for number, unit in parts), Decimal(0))
    value = float(total)
    if not value > 0 or value == math.inf:
        raise UsageError(f"bad duration {text!r}: it must be positive and finite")
    return value


def format_duration(seconds: float) -> str:
    """The exact text of ``seconds`` that :func:`parse_duration` reads back as the same float:
    the largest whole unit when there is one (``5400`` is ``90m``), else decimal seconds with
    no exponent (``1e-07`` is ``0.0000001s``)."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and float(seconds).is_integer() and int(seconds) % size == 0:
            return f"{int(seconds) // size}{unit}"
    text = format(Decimal(repr(float(seconds))), "f")
    return f"{text}s"


def replay_command(
    entry: str, seed: int, options: Mapping[str, Any], *, hashseed: str | None = "current"
) -> str:
    """The copy-pasteable command that replays ``seed`` of ``entry`` with the same options
    (``kelpie_dst.run`` keyword arguments), under ``hashseed`` (this process's by default;
    ``None``: it was random, so there is no replay)."""
    parts = ["kelpie-dst", "run", "--entry", entry, "--seed", str(seed)]
    if options.get("guards") == "strict":
        parts.append("--strict")
    if options.get("strategy", "random") != "random":
        parts += ["--strategy", options["strategy"]]
    for fault in options.get("faults", ()):
        parts += ["--fault", fault]
    if options.get("swarm"):
        parts.append("--swarm")
    if options.get("max_time") is not None:
        parts += ["--max-time", format_duration(options["max_time"])]
    if options.get("watchdog", DEFAULT_WATCHDOG) != DEFAULT_WATCHDOG:
        parts += ["--watchdog", format_duration(options["watchdog"])]
    if hashseed == "current":
        hashseed = current_hashseed()
    if hashseed is None:
        return (
            "unavailable: this process runs under a random PYTHONHASHSEED, so the run may not "
            "replay; set PYTHONHASHSEED (or unset KELPIE_DST_NO_REEXEC)"
        )
    prefix = f"PYTHONHASHSEED={hashseed} " if hashseed != "0" else ""
    return prefix + shlex.join(parts)
