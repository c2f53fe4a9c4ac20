"""``routes`` adds routers' routes flat, serving and documenting what ``include_router`` would."""

from __future__ import annotations

import httpx
import pytest
from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException
from fastapi.routing import APIRoute
from pydantic import BaseModel

from kelpie_agent.api._app import shared_app
from kelpie_agent.api._routing import ERROR_RESPONSES, collection_route, routes


class Item(BaseModel):
    id: str
    size: int = 0


def _key(x_key: str | None = Header(default=None)) -> None:
    if x_key != "k":
        raise HTTPException(401, "no key")


def _routers() -> list[APIRouter]:
    items = APIRouter()

    async def list_items(limit: int = 10) -> list[Item]:
        """Every item.

        More text for the description."""
        return [Item(id=f"i{n}") for n in range(limit)]

    async def create_item(item: Item) -> Item:
        return item

    async def get_item(item_id: str) -> Item:
        return Item(id=item_id, size=len(item_id))

    async def hidden() -> dict[str, str]:
        return {"hidden": "yes"}

    collection_route(items, "/v1/items/", list_items, ["GET"], operation_id="list_items")
    items.add_api_route(
        "/v1/items/",
        create_item,
        methods=["POST"],
        status_code=201,
        tags=["items"],
        summary="Make one",
        responses=ERROR_RESPONSES,
    )
    items.add_api_route("/v1/items/{item_id}", get_item, methods=["GET"], deprecated=True)
    items.add_api_route("/v1/hidden", hidden, methods=["GET"], include_in_schema=False)
    other = APIRouter()

    async def search() -> dict[str, int]:
        return {"found": 0}

    other.add_api_route("/v1/items/search", search, methods=["GET"])  # after {item_id}
    return [items, other]


def _apps(deps: list[object]) -> tuple[FastAPI, FastAPI]:
    included, flat = FastAPI(redirect_slashes=False), FastAPI(redirect_slashes=False)
    for router in _routers():
        included.include_router(router, dependencies=deps)  # type: ignore[arg-type]
    routes(flat, _routers(), deps)  # type: ignore[arg-type]
    return included, flat


async def _answers(app: FastAPI, key: str | None) -> list[tuple[int, str]]:
    headers = {"x-key": key} if key else {}
    transport = httpx.ASGITransport(app=app)
    out = []
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        for method, path, body in (
            ("GET", "/v1/items/?limit=2", None),
            ("GET", "/v1/items", None),
            ("POST", "/v1/items/", {"id": "a", "size": 3}),
            ("POST", "/v1/items/", {"size": "big"}),
            ("GET", "/v1/items/search", None),
            ("GET", "/v1/hidden", None),
            ("DELETE", "/v1/items/x", None),
            ("GET", "/v1/nothing", None),
        ):
            got = await client.request(method, path, json=body, headers=headers)
            out.append((got.status_code, got.text))
    return out


@pytest.mark.parametrize("keyed", [False, True])
def test_flat_routes_have_the_included_routers_schema(keyed: bool) -> None:
    included, flat = _apps([Depends(_key)] if keyed else [])
    assert flat.openapi() == included.openapi()
    assert all(isinstance(r, APIRoute) for r in flat.router.routes[4:])  # after the docs'


@pytest.mark.trio
@pytest.mark.parametrize(("keyed", "key"), [(False, None), (True, "k"), (True, "wrong")])
async def test_flat_routes_answer_as_the_included_routers_do(keyed: bool, key: str | None) -> None:
    included, flat = _apps([Depends(_key)] if keyed else [])
    want = await _answers(included, key)
    assert await _answers(flat, key) == want
    if key == "wrong":
        assert {status for status, _ in want[:6]} == {401}
    else:  # the first match wins, as before: /v1/items/search is an item
        assert want[4] == (200, '{"id":"search","size":6}')
        assert [status for status, _ in want] == [200, 200, 201, 422, 200, 200, 405, 404]


def test_the_api_routes_are_flat() -> None:
    app = shared_app()
    api = [r for r in app.router.routes if getattr(r, "path", "").startswith("/v1/")]
    assert len(api) > 100
    assert all(isinstance(r, APIRoute) for r in api)
