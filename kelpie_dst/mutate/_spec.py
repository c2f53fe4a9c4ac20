"""Mutant spec files: planted bugs kept as small text edits of a source tree.

A spec is TOML::

    root = "../.."                 # the tree the edits apply to (relative to this file)

    [defaults]
    workload = "kelpie_dst.workloads.agents:agents"  # the default scenario set: every
    scenarios = []                 # scenario on the search path with this workload (or these)
    seeds = 100                    # seeds per scenario

    [[mutant]]
    name = "checkpoint-after-tool-result"
    breaks = "a crash between a tool's result and its checkpoint runs the tool again"
    category = "agent/checkpoint"

    [[mutant.edit]]
    file = "kelpie_agent/agent/_calls.py"
    find = "..."                   # must occur exactly once in the file
    replace = "..."

Errors are one line naming the file and the field (a :class:`~kelpie_dst.UsageError`, exit 64).
A mutant whose ``find`` does not occur exactly once *no longer applies*; :meth:`Mutant.check`
raises :class:`MutantStale` naming the mutant, the file and the snippet.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from .._errors import UsageError
from ..scenario._schema import Doc, ScenarioError

__all__ = ["Defaults", "Edit", "Mutant", "MutantSpec", "MutantStale", "load_spec", "snippet"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
AGENT_WORKLOAD = "kelpie_dst.workloads.agents:agents"


class MutantStale(UsageError):
    """A mutant's edit no longer applies to the tree (its ``find`` is not there exactly once)."""


def snippet(text: str, width: int = 60) -> str:
    """A one-line preview of a code snippet, for error messages."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= width else flat[: width - 3] + "...")


@attrs.frozen
class Edit:
    """Replace the one occurrence of ``find`` in ``file`` (relative to the spec's root)."""

    file: str
    find: str
    replace: str

    @property
    def top(self) -> str:
        """The top-level package (or module file) the file belongs to."""
        return Path(self.file).parts[0]

    @property
    def module(self) -> str | None:
        """The dotted module the file is, or None for a file that is not Python source."""
        path = Path(self.file)
        if path.suffix != ".py":
            return None
        parts = list(path.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)


@attrs.frozen
class Mutant:
    name: str
    breaks: str
    category: str
    edits: tuple[Edit, ...]

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.file for e in self.edits))

    @property
    def tops(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.top for e in self.edits))

    def apply(self, sources: Mapping[str, str]) -> dict[str, str]:
        """The edited text of each file, from the original texts; :class:`MutantStale` when
        an edit's ``find`` is not in its file exactly once (checked against the text as the
        earlier edits of this mutant left it)."""
        texts = {file: sources[file] for file in self.files}
        for edit in self.edits:
            text = texts[edit.file]
            count = text.count(edit.find)
            if count != 1:
                where = "does not occur" if count == 0 else f"occurs {count} times"
                raise MutantStale(
                    f"mutant {self.name!r} no longer applies: in {edit.file}, "
                    f"{snippet(edit.find)} {where} (it must occur exactly once)"
                )
            texts[edit.file] = text.replace(edit.find, edit.replace)
        return texts

    def check(self, root: Path) -> dict[str, str]:
        """:meth:`apply` to the files under ``root``."""
        sources = {}
        for file in self.files:
            try:
                sources[file] = (root / file).read_text()
            except OSError as error:
                raise MutantStale(
                    f"mutant {self.name!r} no longer applies: cannot read {file}: {error.strerror}"
                ) from None
        return self.apply(sources)


@attrs.frozen
class Defaults:
    workload: str = AGENT_WORKLOAD
    scenarios: tuple[str, ...] = ()
    seeds: int = 100


@attrs.frozen
class MutantSpec:
    path: Path
    root: Path
    defaults: Defaults
    mutants: tuple[Mutant, ...]

    @property
    def caught_path(self) -> Path:
        """Where ``--record`` keeps the catches: ``<spec>_caught.toml`` next to the spec."""
        return self.path.with_name(f"{self.path.stem}_caught.toml")

    def select(self, names: Sequence[str]) -> tuple[Mutant, ...]:
        """The mutants named (in spec order), or all of them; unknown names are an error."""
        if not names:
            return self.mutants
        known = {m.name for m in self.mutants}
        for name in names:
            if name not in known:
                raise UsageError(
                    f"{self.path}: no mutant named {name!r} (known: {', '.join(sorted(known))})"
                )
        return tuple(m for m in self.mutants if m.name in names)

    def by_name(self, name: str) -> Mutant:
        return self.select([name])[0]


def load_spec(path: str | Path) -> MutantSpec:
    """Read and validate a spec file (one-line errors naming the file and the field)."""
    file = Path(path)
    source = str(path)
    try:
        data = tomllib.loads(file.read_text())
    except OSError as error:
        raise UsageError(f"{source}: cannot read the mutant spec: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(source, "", f"invalid TOML: {error}") from None
    doc = Doc(data, "", source, frozenset())
    doc.only(("root", "defaults", "mutant"))
    root = (file.parent / doc.text("root", ".")).resolve()
    if not root.is_dir():
        doc.fail("root", f"{str(root)!r} is not a directory")
    defaults = _defaults(doc.sub("defaults"))
    raw = doc.raw("mutant", [])
    if not isinstance(raw, list) or not raw:
        doc.fail("mutant", "expected at least one [[mutant]] table")
    mutants: list[Mutant] = []
    for index, item in enumerate(raw):
        where = f"mutant[{index}]"
        if not isinstance(item, dict):
            doc.fail(where, "expected a table")
        mutant = _mutant(Doc(item, where, source, frozenset()), root)
        if any(m.name == mutant.name for m in mutants):
            doc.fail(f"{where}.name", f"mutant {mutant.name!r} is defined twice")
        mutants.append(mutant)
    return MutantSpec(file, root, defaults, tuple(mutants))


def _defaults(doc: Doc) -> Defaults:
    doc.only(("workload", "scenarios", "seeds"))
    return Defaults(
        workload=doc.text("workload", AGENT_WORKLOAD),
        scenarios=doc.str_list("scenarios", ()),
        seeds=doc.integer("seeds", 100, minimum=1),
    )


def _mutant(doc: Doc, root: Path) -> Mutant:
    doc.only(("name", "breaks", "category", "edit"))
    name = doc.text("name")
    if not _NAME.match(name):
        doc.fail("name", f"{name!r} must be lowercase letters, digits, '-', '_' or '.'")
    breaks = doc.text("breaks")
    if not breaks.strip() or "\n" in breaks.strip():
        doc.fail("breaks", "must be one line saying which user-visible property breaks")
    category = doc.text("category")
    raw = doc.raw("edit")
    if not isinstance(raw, list) or not raw:
        doc.fail("edit", "expected at least one [[mutant.edit]] table")
    edits = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            doc.fail(f"edit[{index}]", "expected a table")
        edits.append(_edit(Doc(item, doc.field(f"edit[{index}]"), doc.source, frozenset()), root))
    return Mutant(name, breaks.strip(), category, tuple(edits))


def _edit(doc: Doc, root: Path) -> Edit:
    doc.only(("file", "find", "replace"))
    file = doc.text("file")
    path = Path(file)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        doc.fail("file", f"{file!r} must be a path inside the root, like pkg/module.py")
    if not (root / path).is_file():
        doc.fail("file", f"no file {file!r} under {str(root)!r}")
    find = doc.text("find")
    if not find:
        doc.fail("find", "must not be empty")
    replace = doc.text("replace")
    if replace == find:
        doc.fail("replace", "is the same as find: the edit changes nothing")
    return Edit(path.as_posix(), find, replace)
