"""The agent_schedules scenario: scheduled messages under crashes, an outage, handoffs and
storage faults. It passes, is deterministic, and its oracle names each kind of broken run."""

from __future__ import annotations

from typing import Any

from attrs import evolve as attrs_evolve

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_schedules import Created, Fired, Log, check, expected

SHORT = ("workload.params.span=40", "workload.params.grace=40", "duration=40s")


def _run(seed: int) -> Any:
    return run_scenario(load_scenario("agent_schedules", SHORT), seed)


def test_a_short_run_passes_and_repeats_exactly() -> None:
    first, again, other = _run(2), _run(2), _run(3)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["schedules.fired"] > 0
    assert first.result.trace_hash == again.result.trace_hash != other.result.trace_hash


T0 = 1_767_225_600.0  # a minute boundary (2026-01-01 00:00 UTC)


def _fired(schedule_id: str, due: float, date: float, text: str) -> Fired:
    return Fired(
        "agent-1", schedule_id, due, date, text, f"sched-{schedule_id}-{round(due * 1e6):x}"
    )


def test_the_oracle_names_each_broken_run() -> None:
    every = Created("agent-1", "every", "* * * * *", None, "s-every", T0 + 60, T0 + 250, T0 + 251)
    once = Created("agent-1", "once", None, T0 + 10, "s-once", T0 + 10)
    lost = Created("agent-1", "lost", None, T0 + 20, "s-lost", T0 + 20)
    assert expected(every, T0 + 200) == [T0 + 60, T0 + 120, T0 + 180]
    log = Log(created=[every, once, lost], end=T0 + 400)
    log.fired = [
        _fired("s-every", T0 + 120, T0 + 121, "every"),
        _fired("s-every", T0 + 60, T0 + 61, "every"),  # out of order
        _fired("s-every", T0 + 300, T0 + 300, "every"),  # after its delete
        _fired("s-once", T0 + 10, T0 + 2, "once"),  # early
        _fired("s-other", T0 + 30, T0 + 30, "nobody"),
    ]
    log.duplicates.append("sched-s-once-1")
    log.pending.append(("agent-1", "s-stuck", T0 + 100))
    found = check(log, grace=60, tolerance=5)
    assert found == [
        "occurrence sched-s-once-1 stored twice",
        f"sched-s-once-{round((T0 + 10) * 1e6):x} fired early: stored at {T0 + 2:.3f}, due "
        f"{T0 + 10:.3f}",
        f"sched-s-other-{round((T0 + 30) * 1e6):x}: text 'nobody' was not scheduled for agent-1",
        f"schedule s-every fired out of order: {[T0 + 120, T0 + 60, T0 + 300]}",
        f"schedule s-every fired after its delete: due {[T0 + 300]}",
        f"schedule s-every (every) never sent due {[T0 + 180]}",
        f"schedule s-lost (lost) never sent due {[T0 + 20]}",
        f"schedule s-stuck of agent-1 still pending, due {T0 + 100:.3f}",
    ]
    healthy = Log(created=[once], end=T0 + 400, fired=[_fired("s-once", T0 + 10, T0 + 11, "once")])
    assert check(healthy, grace=60, tolerance=5) == []


def test_the_cron_model_is_independent_of_the_servers_and_agrees_with_it_when_right() -> None:
    from kelpie_agent.agent._cron import parse_cron
    from kelpie_dst.workloads._cron_model import cron_model

    for expression in (
        "* * * * *",
        "*/2 * * * *",
        "5,40 */3 * * *",
        "0 9-17 * * mon-fri",
        "30 0 1,15 * 0",
        "*/7 1 * jan 7",
    ):
        model, server = cron_model(expression), parse_cron(expression)
        t = T0 + 17.5
        for _ in range(12):
            nxt = model.next_after(t, horizon_minutes=60 * 24 * 20)
            assert nxt == server.next_after(t), (expression, t)
            assert model.fires_at(nxt) and not model.fires_at(nxt + 0.5)
            t = nxt
    assert not cron_model("*/2 * * * *").fires_at(T0 + 60)
    assert cron_model("*/2 * * * *").fires_at(T0 + 120)


def test_a_server_whose_cron_skips_minutes_is_caught() -> None:
    """The schedule's occurrences come from the oracle's own cron model: a server that computes
    every other minute for ``* * * * *`` (and starts on a minute its cron does not name for
    ``*/2``) fails, although its history agrees with its own arithmetic."""
    every = Created("agent-1", "every", "* * * * *", None, "s-every", T0 + 60)
    even = Created("agent-1", "even", "*/2 * * * *", None, "s-even", T0 + 180)
    log = Log(created=[every, even], end=T0 + 400)
    log.fired = [
        _fired("s-every", T0 + 60, T0 + 61, "every"),
        _fired("s-every", T0 + 180, T0 + 181, "every"),  # every other minute
        _fired("s-every", T0 + 300, T0 + 301, "every"),
        _fired("s-even", T0 + 180, T0 + 181, "even"),  # an odd minute
        _fired("s-even", T0 + 300, T0 + 301, "even"),
    ]
    found = check(log, grace=60, tolerance=5)
    assert found == [
        f"schedule s-even (*/2 * * * *) fired for {[T0 + 180, T0 + 300]}",
        f"schedule s-every (every) never sent due {[T0 + 120, T0 + 240]}",
        f"schedule s-even (*/2 * * * *) first due at {T0 + 180}, a minute its cron does not name",
        f"schedule s-even (even) never sent due {[T0 + 240]}",
    ]


def test_a_recurring_schedules_first_due_is_its_crons_next_minute_after_creation() -> None:
    """The server's first due time of a recurring schedule is checked against when the client
    created it: a cron that skips a minute is caught on the very first occurrence, before any
    fires (most recurring schedules of the scenario are deleted within a minute or two)."""

    def made(first: float, sent: float, acked: float) -> Log:
        c = Created("agent-1", "every", "* * * * *", None, "s-1", first, sent=sent, acked=acked)
        return Log(created=[c], end=first - 1)  # deleted before it ever fired

    assert check(made(T0 + 60, T0 + 10, T0 + 11), grace=60, tolerance=5) == []
    # created at :10 to :58: acked + tolerance crosses into the next minute, so :120 is fine too
    assert check(made(T0 + 120, T0 + 10, T0 + 58), grace=60, tolerance=5) == []
    assert check(made(T0 + 120, T0 + 10, T0 + 11), grace=60, tolerance=5) == [
        f"schedule s-1 (* * * * *) created between {T0 + 10:.3f} and {T0 + 11:.3f} is first "
        f"due at {T0 + 120}, not its cron's next minute ({T0 + 60} to {T0 + 60})"
    ]


def test_a_recurring_schedule_that_stays_at_an_occurrence_it_sent_is_caught() -> None:
    """The schedule listed before the final deletes must be past every occurrence it sent
    (cron-next-at-or-after: a next time "at or after" leaves it at the one it sent)."""
    every = Created("agent-1", "every", "* * * * *", None, "s-every", T0 + 60)
    fired = [_fired("s-every", T0 + 60, T0 + 60.5, "every")]
    moved = Log(created=[every], end=T0 + 400, fired=fired)
    moved.listed = [("agent-1", "s-every", T0 + 180, T0 + 150)]
    assert not any("listed as next due" in p for p in check(moved, 60.0, 5.0))
    stuck = Log(created=[every], end=T0 + 400, fired=fired)
    stuck.listed = [("agent-1", "s-every", T0 + 60, T0 + 150)]
    assert any("listed as next due" in p for p in check(stuck, 60.0, 5.0))
    # an occurrence stored after the read began (within the tolerance) is no evidence
    recent = Log(created=[every], end=T0 + 400, fired=fired)
    recent.listed = [("agent-1", "s-every", T0 + 60, T0 + 62)]
    assert not any("listed as next due" in p for p in check(recent, 60.0, 5.0))


def test_punctual_names_a_late_fire_and_allows_for_a_busy_agent() -> None:
    from kelpie_dst.workloads._agent_schedules import check_punctual

    late = _fired("s-late", T0 + 60, T0 + 70, "late")
    busy = attrs_evolve(_fired("s-busy", T0 + 60, T0 + 70, "busy"), after=T0 + 65)
    on_time = _fired("s-ok", T0 + 60, T0 + 67, "ok")
    log = Log(fired=[late, busy, on_time], end=T0 + 400)
    [problem] = check_punctual(log, 8.0)
    assert problem.startswith(f"{late.otid} fired late") and "(10.0 s)" in problem
    assert check_punctual(log, 0.0) == []  # off


def test_the_punctual_scenario_passes_and_repeats_exactly() -> None:
    scenario = load_scenario("agent_schedules_punctual")
    assert scenario.workload.params["punctual"] == 8.0
    first, again = run_scenario(scenario, 1), run_scenario(scenario, 1)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["schedules.fired"] > 0
    assert first.result.trace_hash == again.result.trace_hash
