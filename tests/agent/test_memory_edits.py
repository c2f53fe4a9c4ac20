"""Each memory tool's exact semantics and error messages (docs/tools/*.md)."""

from __future__ import annotations

import pytest

from kelpie_agent.agent import Block
from kelpie_agent.agent._memory_edits import (
    EDIT_SUCCESS,
    READ_ONLY_ERROR,
    ToolError,
    append,
    apply_edit,
    insert,
    missing_block,
    replace_all,
    replace_once,
)


def test_core_memory_append_joins_with_a_newline_even_onto_an_empty_block() -> None:
    assert append("Name: Ada", "Likes kelp") == "Name: Ada\nLikes kelp"
    assert append("", "first") == "\nfirst"


def test_core_memory_replace_replaces_every_occurrence() -> None:
    assert replace_all("a b a", "human", "a", "x") == "x b x"
    assert replace_all("keep this", "human", "keep ", "") == "this"


def test_core_memory_replace_names_the_missing_content_and_the_block() -> None:
    with pytest.raises(ToolError) as caught:
        replace_all("Name: Ada", "human", "Bob", "Eve")
    assert caught.value.message == "Old content 'Bob' not found in memory block 'human'"
    assert caught.value.kind == "ValueError"
    with pytest.raises(ToolError, match="old_content must not be empty"):
        replace_all("x", "human", "", "y")


def test_memory_replace_needs_exactly_one_occurrence() -> None:
    assert replace_once("one\ntwo\nthree", "notes", "two", "2") == "one\n2\nthree"
    with pytest.raises(ToolError) as zero:
        replace_once("one\ntwo", "notes", "four", "4")
    assert zero.value.message == (
        "No replacement was performed, old_string `four` did not appear verbatim in memory "
        "block with label `notes`."
    )


def test_memory_replace_quotes_the_line_numbers_of_every_occurrence() -> None:
    value = "apple\nbanana\napple pie\ncherry\napple"
    with pytest.raises(ToolError) as many:
        replace_once(value, "fruit", "apple", "pear")
    assert many.value.message == (
        "No replacement was performed. Multiple occurrences of old_string `apple` in lines "
        "[1, 3, 5]. Please ensure it is unique."
    )


def test_memory_replace_of_text_spanning_lines_quotes_where_each_occurrence_starts() -> None:
    value = "a\nb\nx\na\nb"
    with pytest.raises(ToolError, match=r"in lines \[1, 4\]"):
        replace_once(value, "notes", "a\nb", "c")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (0, "new\none\ntwo"),
        (1, "one\nnew\ntwo"),
        (2, "one\ntwo\nnew"),
        (-1, "one\ntwo\nnew"),
    ],
)
def test_memory_insert_goes_after_line_n(line: int, expected: str) -> None:
    assert insert("one\ntwo", "new", line) == expected


def test_memory_insert_out_of_range_is_an_error_naming_the_valid_range() -> None:
    for bad in (3, -2, 99):
        with pytest.raises(ToolError) as caught:
            insert("one\ntwo", "new", bad)
        assert caught.value.message == (
            f"Invalid `insert_line` parameter: {bad}. It should be within the range of lines of "
            "the memory block: [0, 2], or -1 to append to the end of the memory block."
        )


def test_memory_insert_of_several_lines_keeps_them_together() -> None:
    assert insert("a\nd", "b\nc", 1) == "a\nb\nc\nd"


def test_every_edit_fails_on_a_read_only_block_with_lettas_message() -> None:
    block = Block(id="block-1", label="persona", value="fixed", read_only=True)
    with pytest.raises(ToolError) as caught:
        apply_edit(block, "changed", 1.0)
    assert (
        caught.value.message
        == READ_ONLY_ERROR
        == ("Error This block is read-only and cannot be edited.")
    )


def test_an_edit_over_the_limit_fails_and_says_by_how_much() -> None:
    block = Block(id="block-1", label="human", value="abc", limit=5)
    assert apply_edit(block, "abcde", 2.0).value == "abcde"
    with pytest.raises(ToolError) as caught:
        apply_edit(block, "abcdef", 2.0)
    assert caught.value.message == "Edit failed: Exceeds 5 character limit (requested 6)."


def test_a_missing_label_lists_the_available_sections() -> None:
    error = missing_block("pets", ["persona", "human"])
    assert error.message == "Block field pets does not exist (available sections = persona, human)"
    assert error.kind == "KeyError"


def test_the_success_message_is_lettas() -> None:
    assert EDIT_SUCCESS("human").startswith(
        "The core memory block with label `human` has been edited."
    )
