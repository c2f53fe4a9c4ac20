"""Loading ``package.module:function`` entry points and parsing human durations."""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from ._errors import UsageError

__all__ = ["entry_name", "load_entry", "parse_duration"]

_ENTRY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


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


def parse_duration(text: str) -> float:
    """``90s``, ``10m``, ``1h``, ``500ms``, ``2d`` or plain seconds, as seconds."""
    match = _DURATION.match(str(text))
    if not match:
        raise UsageError(f"bad duration {text!r}: use a number with a unit, like 90s, 10m or 1h")
    value = float(match.group(1)) * _UNITS[match.group(2)]
    if value <= 0:
        raise UsageError(f"bad duration {text!r}: it must be positive")
    return value


def format_duration(seconds: float) -> str:
    for unit, size in (("h", 3600.0), ("m", 60.0), ("s", 1.0)):
        if seconds >= size and (seconds / size).is_integer():
            return f"{int(seconds / size)}{unit}"
    return f"{seconds:g}s"
