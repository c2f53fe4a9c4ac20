"""The agent index sorts by the ``created_at`` the API shows (found by ``create_burst``,
session 10): the index key's microseconds are the shown ones, for every float time."""

from __future__ import annotations

import random

from kelpie_agent.api._models_common import epoch_datetime
from kelpie_agent.service._records import index_key, shown_micros


def _shown(epoch: float) -> int:
    moment = epoch_datetime(epoch)
    return int(moment.timestamp()) * 1_000_000 + moment.microsecond


def test_the_index_keys_the_microseconds_the_api_shows() -> None:
    rng = random.Random(7)
    times = [1_767_225_600 + rng.random() * 100 for _ in range(20_000)]
    # one of the times round(t * 1e6) got wrong (the product rounds up, the shown time down)
    times.append(1767225697.4596386)
    assert round(1767225697.4596386 * 1_000_000) != _shown(1767225697.4596386)
    for t in times:
        assert shown_micros(t) == _shown(t)


def test_agents_created_within_a_microsecond_list_in_the_shown_order() -> None:
    """Two agents whose shown created_at differ by one microsecond: the later one's id sorts
    first, so an index that disagreed with the shown time put it first."""
    rng = random.Random(11)
    checked = 0
    for _ in range(20_000):
        t1 = 1_767_225_600 + rng.random() * 100
        t2 = t1 + rng.random() * 2e-6
        if _shown(t1) >= _shown(t2):
            continue
        checked += 1
        assert index_key(t1, "agent-z") < index_key(t2, "agent-a"), (t1, t2)
    assert checked > 1000
