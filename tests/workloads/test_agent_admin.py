"""The agent_admin scenario: renames, shared archives and agent files under faults. It passes,
repeats its trace, and its checks name each kind of broken admin history."""

from __future__ import annotations

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_admin_checks import BlockShape, Final, Rename, check_admin


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_admin", ["workload.params.span=20"])
    first, again = run_scenario(scenario, 1), run_scenario(scenario, 1)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["admin.renames"] >= 1
    assert first.result.trace_hash == again.result.trace_hash


PERSONA = BlockShape("persona", "p", 400, True)
HUMAN = BlockShape("human", "h", 300, False)


def _good() -> tuple[list[Rename], dict[str, list[str]], dict[str, list[str]], Final]:
    renames = [
        Rename("a1", "n1", ("t1",), "ok"),
        Rename("a1", "n2", ("t2",), "ok"),
        Rename("a2", "m1", ("u1",), "ok"),
        Rename("a2", "m2", ("u2",), "unknown"),  # may have landed: a2 is not judged
    ]
    final = Final(
        names={"a1": ("n2", ("t2",)), "a2": ("m2", ("u2",))},
        by_name={"n2": ["a1"], "m1": []},
        by_tags={"t2": ["a1"]},
        passages={"a1": ["x", "y"]},
        blocks={"b1": [HUMAN, PERSONA]},
    )
    return renames, {"arch": ["x", "y"]}, {"arch": ["a1"]}, final


def test_a_consistent_history_passes() -> None:
    renames, archived, attached, final = _good()
    imports = {"b1": ("a1", [PERSONA, HUMAN])}
    assert check_admin(renames, archived, attached, imports, final) == []


def test_stale_lists_lost_passages_and_a_lossy_file_are_named() -> None:
    renames, archived, attached, final = _good()
    final.names["a1"] = ("n1", ("t1",))
    final.by_name["n2"] = []
    final.by_tags["t2"] = []
    final.passages["a1"] = ["x"]
    final.blocks["b1"] = [HUMAN, BlockShape("persona", "p", 400, False)]
    imports = {"b1": ("a1", [PERSONA, HUMAN])}
    found = check_admin(renames, archived, attached, imports, final)
    assert found == [
        "a1 was renamed n2 ['t2'], but shows ('n1', ('t1',))",
        "the agents list by name 'n2' misses a1",
        "the agents list by tag 't2' misses a1",
        "a1 lists no passage ['y'] of its archive arch",
        f"b1, imported from a1's file, has blocks {[HUMAN, BlockShape('persona', 'p', 400, False)]}"
        f", not {[HUMAN, PERSONA]}",
    ]


def test_a_search_that_filters_after_ranking_is_named() -> None:
    from kelpie_dst.workloads._agent_admin_checks import check_searches

    final = Final(
        tagged={("a1", "red"): ["x", "y", "z", "w"], ("a1", "blue"): ["v"]},
        found={("a1", "red"): [("x", ("red",)), ("y", ("red",)), ("z", ("red",))]},
    )
    final.found[("a1", "blue")] = [("v", ("blue",))]
    assert check_searches(final, 3) == []
    final.found[("a1", "red")] = [("x", ("red",))]  # ranked first, then filtered
    final.found[("a1", "blue")] = [("v", ("blue",)), ("x", ("red",))]
    assert check_searches(final, 3) == [
        "a1's search with tag 'blue' returned ['x'], untagged",
        "a1's search with tag 'blue' (top_k 3) returned 2 hits; it lists 1 passages with that tag",
        "a1's search with tag 'red' (top_k 3) returned 1 hits; it lists 4 passages with that tag",
    ]
