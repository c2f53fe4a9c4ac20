"""The mutation harness: planted bugs, kept as small edits in a spec file, each run against a
scenario set to measure which the scenarios catch, how fast, and by which invariant (see
docs/mutation.md and ``kelpie-dst mutate``)."""

from ._harness import Harness as Harness
from ._harness import MutantOutcome as MutantOutcome
from ._harness import Summary as Summary
from ._harness import Verification as Verification
from ._harness import interleave as interleave
from ._harness import scenario_set as scenario_set
from ._harness import summarise as summarise
from ._records import Catch as Catch
from ._records import fired_label as fired_label
from ._records import load_catches as load_catches
from ._records import save_catches as save_catches
from ._spec import Edit as Edit
from ._spec import Mutant as Mutant
from ._spec import MutantSpec as MutantSpec
from ._spec import MutantStale as MutantStale
from ._spec import load_spec as load_spec

__all__ = [
    "Catch",
    "Edit",
    "Harness",
    "Mutant",
    "MutantOutcome",
    "MutantSpec",
    "MutantStale",
    "Summary",
    "Verification",
    "fired_label",
    "interleave",
    "load_catches",
    "load_spec",
    "save_catches",
    "scenario_set",
    "summarise",
]
