"""docs/hypothesis.md stays in sync: each Python block is quoted verbatim from the example
module, or runs as it is."""

from __future__ import annotations

import re
from pathlib import Path

import kelpie_dst.examples.toy_kv_service as toy

ROOT = Path(__file__).resolve().parents[2]


def python_blocks() -> list[str]:
    text = (ROOT / "docs" / "hypothesis.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_every_python_block_is_quoted_from_the_example_or_runs() -> None:
    source = Path(toy.__file__).read_text()
    blocks = python_blocks()
    assert len(blocks) >= 8
    quoted = 0
    for block in blocks:
        if block in source:
            quoted += 1
            continue
        namespace: dict[str, object] = {}
        exec(compile(block, "docs/hypothesis.md", "exec"), namespace)
    assert quoted >= 6
