"""The pure checks of the contract walker's probes (``contract_probes``, apiW session 26):
each passes what a correct server leaves and names what a planted slip leaves."""

from __future__ import annotations

from kelpie_dst.workloads._contract_probes_checks import (
    CancelSeen,
    DeleteSeen,
    ProbeLog,
    RankSeen,
    SizeSeen,
    check_cancels,
    check_file_deletes,
    check_internal_errors,
    check_ranks,
)


def test_a_500_is_named_with_where_it_was_answered() -> None:
    assert check_internal_errors([]) == []
    (problem,) = check_internal_errors(["server-1: GET /v1/x: ValueError: top_k"])
    assert "500" in problem and "GET /v1/x" in problem


def test_a_cancel_that_reaches_another_thread_is_named() -> None:
    log = ProbeLog()
    log.cancels.append(CancelSeen("conv-1", 0, 0, "run-1", "end_turn"))
    log.cancels.append(CancelSeen("conv-2", 0, None, "run-2", None))  # nothing known
    assert check_cancels(log) == []
    log.cancels.append(CancelSeen("conv-3", 0, 1, "run-3", "cancelled"))
    asked, ended = check_cancels(log)
    assert "asked 1 run(s)" in asked and "conv-3" in asked
    assert "run-3" in ended and "cancelled" in ended


def test_a_long_passage_ranked_below_others_is_named() -> None:
    log = ProbeLog()
    log.ranks.append(RankSeen("search", "p-long", ("p-long", "p-2")))
    log.sizes.append(SizeSeen("top_k=0", 0, ()))
    log.sizes.append(SizeSeen("top_k=1", 1, ("p-long",)))
    assert check_ranks(log) == []
    log.ranks.append(RankSeen("global search", "p-long", ("p-2", "p-long")))
    log.ranks.append(RankSeen("empty search", "p-long", ()))
    log.sizes.append(SizeSeen("top_k=1 again", 1, ()))
    first, empty, size = check_ranks(log)
    assert "[p-2, p-long] first" in first
    assert "[nothing] first" in empty
    assert "answered 0 hit(s), want 1" in size


def test_a_file_still_there_after_its_delete_is_named() -> None:
    log = ProbeLog()
    log.deletes.append(DeleteSeen("file a", 404, False))
    log.deletes.append(DeleteSeen("file b", 0, None))  # no answer: not judged
    assert check_file_deletes(log) == []
    log.deletes.append(DeleteSeen("file c", 200, True))
    found, listed = check_file_deletes(log)
    assert "file c" in found and "200" in found
    assert "still listed at once" in listed
