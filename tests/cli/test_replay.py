"""`kelpie-dst replay TOKEN`: reproduces the run and checks the trace hash."""

from __future__ import annotations

import pytest

from kelpie_dst.scenario import ReplayToken

from .helpers import QUALITY, cli, subprocess_cli


def _failing_token(capsys: pytest.CaptureFixture[str]) -> ReplayToken:
    out = cli(capsys, "run", str(QUALITY / "duplicate_deposit.toml"), "--seed", "2")
    assert out.code == 1
    return ReplayToken.decode(out.out.splitlines()[-1].split()[-1])


def test_replay_in_a_fresh_process_reproduces_the_failure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    token = _failing_token(capsys)
    out = subprocess_cli("replay", token.encode())
    assert out.code == 1, out
    lines = out.out.splitlines()
    assert lines[0].startswith("kelpie-dst: replaying scenario canary_duplicate_deposit (")
    assert f"reproduced: same trace hash {token.trace_hash}" in out.out
    assert lines[-2].startswith(f"seed=2 trace_hash={token.trace_hash} ")
    assert lines[-1] == token.replay_line()


def test_a_different_hash_is_reported_as_nondeterminism(
    capsys: pytest.CaptureFixture[str],
) -> None:
    token = _failing_token(capsys)
    wrong = ReplayToken(token.scenario, token.seed, token.overrides, "f" * 32)
    out = cli(capsys, "replay", wrong.encode())
    assert out.code == 4
    assert "NONDETERMINISM: the replay's trace hash " in out.out
    assert f"differs from the recorded {'f' * 32}" in out.out


def test_a_token_with_overrides_and_no_hash(capsys: pytest.CaptureFixture[str]) -> None:
    token = ReplayToken("kv_linearizability", 9, ("workload.params.ops=2",))
    out = cli(capsys, "replay", token.encode())
    assert out.code == 0
    assert "overrides: workload.params.ops=2" in out.out and "reproduced" not in out.out
