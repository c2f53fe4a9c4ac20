"""What a prompt says about each memory block (description, limit, read-only) is what storage
holds (``_prompt_fields``, judged by the fresh-prompt hook)."""

from __future__ import annotations

import attrs

from kelpie_agent.agent import Block
from kelpie_agent.agent._prompt import render_memory
from kelpie_dst.workloads._prompt_fields import (
    BlockFields,
    check_block_fields,
    shown_fields,
)

PERSONA = Block(id="b-1", label="persona", value="I am kelp.", limit=40, description="Who I am.")
NOTES = Block(id="b-2", label="notes", value="tide 海", limit=90, read_only=True)


def _stored(*blocks: Block) -> dict[str, BlockFields]:
    return {b.label: BlockFields(b.description, b.limit, b.read_only) for b in blocks}


def test_a_prompt_rendered_from_the_stored_blocks_passes() -> None:
    shown = shown_fields("system\n\n" + render_memory([PERSONA, NOTES]))
    assert shown is not None and set(shown) == {"persona", "notes"}
    assert shown["notes"] == BlockFields("", 90, True, 6, "tide 海")
    assert check_block_fields(shown, _stored(PERSONA, NOTES), "a0") == []
    assert shown_fields("no memory here") is None


def test_a_field_other_than_the_stored_one_is_named() -> None:
    stored = _stored(PERSONA, NOTES)
    for wrong, field in (
        (attrs.evolve(PERSONA, limit=2000), "chars_limit"),
        (attrs.evolve(NOTES, read_only=False), "read_only"),
        (attrs.evolve(PERSONA, description="Notes."), "description"),
    ):
        others = [b for b in (PERSONA, NOTES) if b.label != wrong.label]
        shown = shown_fields(render_memory([wrong, *others]))
        assert shown is not None
        [problem] = check_block_fields(shown, stored, "a0")
        assert f"block {wrong.label}'s {field}" in problem


def test_chars_current_counts_the_value_shown_and_unstored_blocks_are_skipped() -> None:
    text = render_memory([PERSONA]).replace("chars_current=10", "chars_current=11")
    shown = shown_fields(text)
    assert shown is not None
    [problem] = check_block_fields(shown, {}, "a0")
    assert "chars_current=11 for a value of 10 characters" in problem
