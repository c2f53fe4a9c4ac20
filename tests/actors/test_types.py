"""Addresses, options and lease records: validation with clear one-line errors."""

from __future__ import annotations

import pytest

from kelpie_agent.actors import (
    ActorError,
    ActorId,
    ActorStoppedError,
    ActorUnavailableError,
    Dispatcher,
    DispatcherOptions,
    LeaseLostError,
    UnknownActorKindError,
)
from kelpie_agent.actors._lease import LEASE, OWNER, actor_key, parse_actor_key
from kelpie_agent.errors import KelpieError
from kelpie_agent.ports import system_ports
from kelpie_dst.shims import SimKV

from .actors import Counter, Journal


def CounterFactory(aid: ActorId) -> Counter:
    return Counter(aid, Journal())


def test_actor_ids_are_values_with_a_checked_kind_and_id() -> None:
    assert ActorId("agent", "agent-1") == ActorId("agent", "agent-1")
    assert str(ActorId("agent", "a/b")) == "agent/a/b"
    assert len({ActorId("a", "1"), ActorId("a", "1"), ActorId("a", "2")}) == 2
    with pytest.raises(ValueError, match=r"ActorId\.kind must be 1-64 characters"):
        ActorId("bad/kind", "x")
    with pytest.raises(ValueError, match=r"ActorId\.id must be a non-empty string"):
        ActorId("agent", "")
    with pytest.raises(ValueError, match="at most 900 UTF-8 bytes"):
        ActorId("agent", "x" * 901)


def test_lease_keys_round_trip_even_for_ids_with_slashes() -> None:
    aid = ActorId("agent", "team/a/ü")
    assert parse_actor_key(OWNER, actor_key(OWNER, aid)) == aid
    assert actor_key(OWNER, aid) != actor_key(LEASE, aid)
    assert parse_actor_key(OWNER, b"actors/owner/no-slash") is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"lease_duration": 0}, "lease_duration must be a positive number of seconds, got 0"),
        ({"idle_timeout": float("inf")}, "idle_timeout must be a positive number"),
        ({"poll_interval": True}, "poll_interval must be a positive number"),
        ({"lease_duration": 5, "lease_margin": 5}, "lease_margin \\(5\\) must be less than"),
        ({"renew_every": 25}, "renew_every \\(25\\) must be less than lease_duration - "),
    ],
)
def test_bad_options_are_refused_in_one_line(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        DispatcherOptions(**options)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_a_dispatcher_refuses_a_bad_node_id_or_kind() -> None:
    kv, ports = SimKV(), system_ports()
    with pytest.raises(ValueError, match="node_id must be a non-empty string"):
        Dispatcher(kv, ports, node_id="", factories={})
    with pytest.raises(ValueError, match=r"ActorId\.kind"):
        Dispatcher(kv, ports, node_id="n", factories={"no spaces": CounterFactory})


def test_errors_share_one_root_and_say_whether_to_retry() -> None:
    for error in (LeaseLostError, ActorUnavailableError, ActorStoppedError):
        assert issubclass(error, ActorError) and error.retryable
    assert issubclass(ActorError, KelpieError)
    assert issubclass(UnknownActorKindError, ValueError) and not UnknownActorKindError.retryable
