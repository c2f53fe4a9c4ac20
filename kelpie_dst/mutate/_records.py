"""Catches: the seed that caught a mutant, and the file ``--record`` keeps them in.

A catch names a scenario (as it was named: a name on the search path or a file), the
``--set`` overrides, the seed, and what fired: ``invariant <name>``, ``liveness``,
``liveness (deadlock)``, ``crash: <ExceptionType>`` or ``nondeterminism``. ``--check`` replays
a recorded catch and compares what fires, not the trace hash: the hash changes with any change
to the code the scenario runs, while a caught bug should stay caught by its invariant.

The file (``<spec>_caught.toml`` next to the spec) holds one ``[[catch]]`` table per mutant.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from .._errors import UsageError
from ..scenario._schema import Doc, ScenarioError
from ..scenario._token import ReplayToken
from ..scenario._toml import dumps

__all__ = ["Catch", "fired_label", "load_catches", "save_catches"]

_INVARIANT = re.compile(r"invariant ([A-Za-z_][\w.-]*)(?: does not hold|:)")
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")


def fired_label(failure_class: str | None, message: str) -> str:
    """A short, stable name for what made a run fail (see the module docstring)."""
    if failure_class is None:
        return "passed"
    first = message.splitlines()[0] if message else ""
    if failure_class == "invariant":
        found = _INVARIANT.search(first)
        return f"invariant {found.group(1)}" if found else "invariant"
    if failure_class == "liveness":
        return "liveness (deadlock)" if first.startswith("deadlock") else "liveness"
    if failure_class == "crash":
        found = _EXCEPTION.match(first)
        return f"crash: {found.group(1)}" if found else "crash"
    return failure_class


@attrs.frozen
class Catch:
    """One failing seed of a mutant."""

    mutant: str
    scenario: str  # the scenario's name
    ref: str  # how the scenario was named (a name or a file)
    overrides: tuple[str, ...]
    seed: int
    fired: str
    failure_class: str = ""
    message: str = ""
    trace_hash: str = ""
    hashseed: str | None = "0"
    runs: int = 0  # seed-runs it took to catch (all scenarios counted)

    @classmethod
    def from_result(cls, mutant: str, result: Mapping[str, Any], runs: int) -> Catch:
        return cls(
            mutant=mutant,
            scenario=str(result["scenario"]),
            ref=str(result["ref"]),
            overrides=tuple(result["overrides"]),
            seed=int(result["seed"]),
            fired=fired_label(result["failure_class"], str(result["message"])),
            failure_class=str(result["failure_class"]),
            message=str(result["message"]),
            trace_hash=str(result["trace_hash"]),
            hashseed=result["hashseed"],
            runs=runs,
        )

    @property
    def item(self) -> list[Any]:
        """The sweep item a child runs: ``[ref, overrides, seed]``."""
        return [self.ref, list(self.overrides), self.seed]

    def token(self) -> ReplayToken | None:
        if self.hashseed is None:
            return None
        return ReplayToken(self.ref, self.seed, self.overrides, self.trace_hash, self.hashseed)

    def to_json(self) -> dict[str, Any]:
        token = self.token()
        return {
            "scenario": self.scenario,
            "ref": self.ref,
            "overrides": list(self.overrides),
            "seed": self.seed,
            "fired": self.fired,
            "failure_class": self.failure_class,
            "message": self.message,
            "trace_hash": self.trace_hash,
            "hashseed": self.hashseed,
            "runs": self.runs,
            "token": token.encode() if token is not None else None,
        }


_HEADER = """\
# Catches of the mutants in {spec}, written by `kelpie-dst mutate --record`.
# `kelpie-dst mutate --check` replays each one: the seed must still fail the same way with the
# mutant applied, and pass without it. Edit by re-recording, not by hand.
"""


def _is_file(ref: str) -> bool:
    return ref.endswith(".toml") or "/" in ref or os.sep in ref


def load_catches(path: Path) -> dict[str, Catch]:
    """The recorded catch of each mutant (none if the file does not exist). Scenario files
    are recorded relative to the file's directory and come back relative to the working
    directory (as the spec's own ``defaults.scenarios``)."""
    if not path.exists():
        return {}
    source = str(path)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(source, "", f"invalid TOML: {error}") from None
    except OSError as error:
        raise UsageError(f"{source}: cannot read it: {error.strerror}") from None
    doc = Doc(data, "", source, frozenset())
    doc.only(("catch",))
    raw = doc.raw("catch", [])
    if not isinstance(raw, list):
        doc.fail("catch", "expected [[catch]] tables")
    catches: dict[str, Catch] = {}
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            doc.fail(f"catch[{index}]", "expected a table")
        entry = Doc(item, f"catch[{index}]", source, frozenset())
        entry.only(("mutant", "scenario", "ref", "overrides", "seed", "fired", "runs"))
        ref = entry.text("ref")
        if _is_file(ref) and not Path(ref).is_absolute():
            ref = str(path.parent / ref)
        catch = Catch(
            mutant=entry.text("mutant"),
            scenario=entry.text("scenario"),
            ref=ref,
            overrides=entry.str_list("overrides", ()),
            seed=entry.integer("seed", minimum=0),
            fired=entry.text("fired"),
            runs=entry.integer("runs", 0, minimum=0),
        )
        if catch.mutant in catches:
            entry.fail("mutant", f"mutant {catch.mutant!r} has two catches")
        catches[catch.mutant] = catch
    return catches


def save_catches(path: Path, spec_name: str, catches: Iterable[Catch], order: list[str]) -> None:
    """Write the catches, in the spec's mutant order."""
    rank = {name: i for i, name in enumerate(order)}
    rows = sorted(catches, key=lambda c: (rank.get(c.mutant, len(rank)), c.mutant))
    document = {
        "catch": [
            {
                "mutant": c.mutant,
                "scenario": c.scenario,
                "ref": os.path.relpath(c.ref, path.parent) if _is_file(c.ref) else c.ref,
                "overrides": list(c.overrides),
                "seed": c.seed,
                "fired": c.fired,
                "runs": c.runs,
            }
            for c in rows
        ]
    }
    body = dumps(document) if rows else ""
    path.write_text(_HEADER.format(spec=spec_name) + ("\n" + body if body else ""))
