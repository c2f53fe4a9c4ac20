"""bench/operator_probe.py's operators find the sites they promise, and only those."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _probe() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "operator_probe", ROOT / "bench" / "operator_probe.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOURCE = """\
async def f(self, txn, key):
    await txn.commit()
    self.cache.pop(key, None)
    self.state = "done"
    self.items[key] = 1
    del self.items[key]
    local = 3
    logger.info("kept")
    assert local == 3
    if local <= 3:
        return local
"""


def test_delete_finds_effects_and_skips_logging_locals_and_asserts() -> None:
    sites = _probe()._sites(SOURCE, {"delete"})
    deleted = {line for line, _, _, new, tag in sites if tag == "del" and new == "pass"}
    assert deleted == {2, 3, 4, 5, 6}


def test_boundary_finds_comparisons_outside_asserts() -> None:
    sites = _probe()._sites(SOURCE, {"boundary"})
    assert [(line, new, tag) for line, _, _, new, tag in sites] == [(10, "<", "lt")]
