"""The CREATE-ONCE oracle (``_agent_creates``): pure checks on hand-made histories, and the
database count."""

from __future__ import annotations

import trio

from kelpie_agent.agent import Keys
from kelpie_agent.agent._codec import pack
from kelpie_agent.agent._conversations import ConversationRecord
from kelpie_dst.shims._storage import SimKVStore
from kelpie_dst.workloads._agent_creates import (
    CreateRecord,
    blind_attempt,
    check_created_once,
    stored_names,
)

ACKED = CreateRecord("conversation", "amb_a1_0", True, ("conv-1",))


def test_a_create_made_once_that_exists_once_under_its_id_holds() -> None:
    found = {("conversation", "amb_a1_0"): ["conv-1"]}
    assert check_created_once([ACKED], found, "listed") == []


def test_a_duplicate_is_caught_unless_an_attempt_got_no_answer() -> None:
    found = {("conversation", "amb_a1_0"): ["conv-1", "conv-2"]}
    assert check_created_once([ACKED], found, "listed") == [
        "conversation 'amb_a1_0' (listed): made once by the client, exists 2 times "
        "(every attempt did)"
    ]
    late = CreateRecord("conversation", "amb_a1_0", True, ("conv-1",), blind=1)
    assert check_created_once([late], found, "listed") == []  # the blind attempt landed late
    found3 = {("conversation", "amb_a1_0"): ["conv-1", "conv-2", "conv-3"]}
    assert len(check_created_once([late], found3, "listed")) == 1


def test_an_acknowledged_create_must_exist_under_the_id_the_client_got() -> None:
    assert check_created_once([ACKED], {}, "in the database") == [
        "conversation 'amb_a1_0' (in the database): acknowledged, but it does not exist"
    ]
    other = {("conversation", "amb_a1_0"): ["conv-9"]}
    assert check_created_once([ACKED], other, "listed") == [
        "conversation 'amb_a1_0' (listed): the client was given conv-1, which does not exist"
    ]
    failed = CreateRecord("tool", "amb_a1_1", False)
    assert check_created_once([failed], {}, "listed") == []  # never acknowledged: 0 is fine


def test_blind_attempts_are_those_without_an_http_answer() -> None:
    import httpx
    import letta_client

    counts: dict[str, int] = {}

    async def fail(error: BaseException) -> None:
        raise error

    async def main() -> None:
        request = httpx.Request("POST", "http://server-1/v1/tools/")
        response = httpx.Response(503, request=request)
        for error in (
            letta_client.APIStatusError("503", response=response, body=None),
            letta_client.APIConnectionError(request=request),
        ):
            try:
                await blind_attempt(counts, "amb_a1_0", fail(error))
            except Exception:
                pass

    trio.run(main)
    assert counts == {"amb_a1_0": 1}


def test_the_database_count_finds_every_copy() -> None:
    store = SimKVStore()
    conv = ConversationRecord("conv-1", "agent-1", summary="amb_a1_0")
    twin = ConversationRecord("conv-2", "agent-1", summary="amb_a1_0")
    unrelated = ConversationRecord("conv-3", "agent-1", summary="other")
    store._apply([(Keys.conversation(c.id), pack(c)) for c in (conv, twin, unrelated)])
    found = stored_names(store, {"amb_a1_0": "agent-1"})
    assert found == {("conversation", "amb_a1_0"): ["conv-1", "conv-2"]}
    assert len(check_created_once([ACKED], found, "in the database")) == 1


def test_the_database_count_finds_every_copy_of_an_archive() -> None:
    from kelpie_agent.agent._archives import ArchiveRecord, archive_key

    store = SimKVStore()
    made = [ArchiveRecord(f"archive-{n}", "amb_a1_4") for n in (1, 2)]
    link = (b"archiveagent/archive-1/agent-1", b"")  # an attachment, not an archive
    store._apply([*((archive_key(a.id), pack(a)) for a in made), link])
    found = stored_names(store, {"amb_a1_4": "agent-1"})
    assert found == {("archive", "amb_a1_4"): ["archive-1", "archive-2"]}
    acked = CreateRecord("archive", "amb_a1_4", True, ("archive-1",))
    assert len(check_created_once([acked], found, "in the database")) == 1
