"""Unit checks of the API's helpers: pagination rules (the service's pager), error
classification, validation messages, and the storable-input checks of request bodies."""

from __future__ import annotations

import math

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from kelpie_agent.actors import ActorUnavailableError
from kelpie_agent.agent import (
    AgentExistsError,
    AgentNotFoundError,
    AgentStorageError,
    BlockNotFoundError,
    InvalidRequestError,
)
from kelpie_agent.api import create_app
from kelpie_agent.api._errors import classify, validation_detail
from kelpie_agent.api._models_agents import AgentCreate
from kelpie_agent.api._models_messages import MessageRequest
from kelpie_agent.service import InvalidError, NotFoundError, ServiceError, UnavailableError
from kelpie_agent.service._types import paginate

IDS = [f"x{i}" for i in range(10)]


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def _page(*, order: str, **kw: object) -> list[str]:
    """The one pager (the service's), as the routes call it."""
    return paginate(IDS, lambda x: x, kind="item", descending=order == "desc", **kw)  # type: ignore[arg-type]


def test_pages_follow_the_requested_order_and_cursors_are_relative_to_it() -> None:
    assert _page(after=None, before=None, limit=3, order="asc") == ["x0", "x1", "x2"]
    assert _page(after=None, before=None, limit=3, order="desc") == ["x9", "x8", "x7"]
    assert _page(after="x7", before=None, limit=3, order="desc") == ["x6", "x5", "x4"]
    assert _page(after="x2", before=None, limit=3, order="asc") == ["x3", "x4", "x5"]
    # only `before`: the items closest to it, still in the requested order
    assert _page(after=None, before="x5", limit=2, order="asc") == ["x3", "x4"]
    assert _page(after=None, before="x5", limit=2, order="desc") == ["x7", "x6"]
    assert _page(after="x1", before="x5", limit=10, order="asc") == ["x2", "x3", "x4"]
    assert _page(after="x9", before=None, limit=3, order="asc") == []
    with pytest.raises(NotFoundError) as caught:
        _page(after="nope", before=None, limit=3, order="asc")
    assert caught.value.status == 404 and caught.value.detail == "after: item 'nope' not found"


@given(
    limit=st.integers(1, 12),
    order=st.sampled_from(["asc", "desc"]),
    backwards=st.booleans(),
)
def test_sdk_style_iteration_visits_every_item_once_and_stops(
    limit: int, order: str, backwards: bool
) -> None:
    """What SyncArrayPage does: the next page has after=<last id>, or, when the first request
    had ``before``, before=<first id>."""
    ordered = IDS if order == "asc" else IDS[::-1]
    cursor = {"before": ordered[-1]} if backwards else {}
    pages: list[list[str]] = []
    for _ in range(50):
        items = _page(
            after=cursor.get("after"), before=cursor.get("before"), limit=limit, order=order
        )
        if not items:
            break
        pages.append(items)
        cursor = {"before": items[0]} if backwards else {"after": items[-1]}
    else:
        raise AssertionError("iteration did not stop")
    if backwards:
        seen = [x for items in reversed(pages) for x in items]
        assert seen == ordered[:-1]
    else:
        assert [x for items in pages for x in items] == ordered


def test_errors_map_to_status_codes_and_retry_hints() -> None:
    assert classify(AgentNotFoundError("agent-1")) == (404, "agent 'agent-1' not found", False)
    assert classify(BlockNotFoundError("no block 'x'"))[0] == 404
    assert classify(AgentExistsError("exists"))[0] == 409
    assert classify(InvalidRequestError("bad\nthing")) == (400, "bad thing", False)
    assert classify(AgentStorageError("gave up"))[::2] == (503, True)
    assert classify(ActorUnavailableError("busy"))[::2] == (503, True)
    assert classify(InvalidError("memory_blocks[1].label", "bad")) == (
        422,
        "memory_blocks[1].label: bad",
        False,
    )
    assert classify(ServiceError("no key", status=401)) == (401, "no key", False)
    assert classify(UnavailableError("storage down")) == (503, "storage down", True)
    # an unknown outcome: the SDK may resend the same body only if the request is idempotent
    unknown = UnavailableError("lease lost mid-send", outcome_unknown=True, retryable=False)
    assert classify(unknown) == (503, "lease lost mid-send", False)
    same_otid = UnavailableError("lease lost mid-send", outcome_unknown=True, retryable=True)
    assert classify(same_otid) == (503, "lease lost mid-send", True)
    assert classify(ExceptionGroup("g", [AgentNotFoundError("a")]))[0] == 404
    status, detail, retry = classify(ZeroDivisionError("boom"))
    assert (status, retry) == (500, False) and "boom" not in detail


def test_validation_errors_read_as_one_line_naming_the_field() -> None:
    with pytest.raises(ValidationError) as caught:
        MessageRequest.model_validate({"messages": [{"role": "robot", "content": "hi"}]})
    detail, listed = validation_detail(
        [{**e, "loc": ("body", *e["loc"])} for e in caught.value.errors()]
    )
    assert detail.startswith("body.messages[0].role: Input should be")
    assert "\n" not in detail and listed[0]["loc"] == ["body", "messages", 0, "role"]


@pytest.mark.parametrize(
    "body, problem",
    [
        ({}, "exactly one of 'messages' and 'input'"),
        ({"input": "a", "messages": [{"role": "user", "content": "b"}]}, "exactly one"),
        ({"messages": []}, "must not be empty"),
        ({"input": "\ud800"}, "lone surrogate"),
        ({"input": "x", "max_steps": 0}, "greater than or equal to 1"),
    ],
)
def test_message_requests_are_checked(body: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError) as caught:
        MessageRequest.model_validate(body)
    assert problem in str(caught.value)


@pytest.mark.parametrize(
    "metadata, problem",
    [
        ({"x": math.nan}, "at x: number must be finite"),  # (the 422 says body.metadata.x)
        ({"x": 2**64}, "at x: integer out of the 64-bit range"),
        ({"x": _nested(40)}, "nested deeper than 32"),
        ({"\udc00": 1}, "lone surrogate"),
    ],
)
def test_bodies_storage_could_not_keep_are_refused(
    metadata: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        AgentCreate.model_validate({"name": "a", "metadata": metadata})
    assert problem in str(caught.value)


def test_stream_only_options_need_streaming() -> None:
    assert MessageRequest.model_validate({"input": "x"}).stream_only_problem() is None
    assert "stream_tokens" in str(
        MessageRequest.model_validate({"input": "x", "stream_tokens": True}).stream_only_problem()
    )
    assert "include_pings" in str(
        MessageRequest.model_validate({"input": "x", "include_pings": False}).stream_only_problem()
    )
    ok = MessageRequest.model_validate({"input": "x", "include_pings": True})
    assert ok.stream_only_problem() is None


class _BrokenService:
    """Stands in for AgentService: every agent read hits a bug."""

    async def get_agent(self, agent_id: str) -> None:
        raise ZeroDivisionError("a bug")


@pytest.mark.trio
async def test_a_bug_is_a_json_500_without_details_and_the_observer_hears_it() -> None:
    heard: list[tuple[str, dict[str, object]]] = []
    app = create_app(_BrokenService(), observer=lambda kind, **f: heard.append((kind, f)))  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=True)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.get("/v1/agents/agent-1")
    assert response.status_code == 500
    assert response.json() == {"detail": "internal error (ZeroDivisionError); see the server log"}
    assert response.headers["x-should-retry"] == "false"
    assert heard and heard[0][0] == "api.error" and "a bug" in str(heard[0][1]["error"])
