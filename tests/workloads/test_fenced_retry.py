"""A send retried with its otid is answered only by the agent's owner (Dlead19-1).

agent_chaos seed 300929 found it: a clock jump let an old activation of an agent live on
after another node took the agent over. A retried send reached the old one, which found the
send's run (running on the new owner) by its otid record and answered with the half-done
run: stop reason ``error``, one step, where the run later finished with two. Reading the
retried run under the lease's fence makes the old activation give way instead, and the
service retries the send on the owner."""

from __future__ import annotations

from pathlib import Path

from kelpie_dst._trace import read_trace
from kelpie_dst.scenario import load_scenario, run_scenario


def test_agent_chaos_seed_300929_retry_reaches_the_owner(tmp_path: Path) -> None:
    trace = tmp_path / "trace.bin"
    run = run_scenario(load_scenario("agent_chaos"), 300929, trace_file=trace)
    assert run.result.failure is None, run.result.failure.describe()
    # The case happened: a retried send found its run, and the fence turned a deposed
    # activation away (it would have answered with the unfinished run).
    fenced = [
        e
        for e in read_trace(trace)
        if e.fields.get("message") == "service.retry"
        and e.fields.get("request") == "SendMessage"
        and "was lost (now held by" in str(e.fields.get("error"))
    ]
    assert fenced, "no retried send met the fence: the seed no longer reaches the case"
