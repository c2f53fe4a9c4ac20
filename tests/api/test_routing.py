"""``routes`` adds routers' routes flat, serving and documenting what ``include_router`` would."""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.routing import Match

from kelpie_agent.api._app import shared_app
from kelpie_agent.api._routing import (
    ERROR_RESPONSES,
    IndexedRoutes,
    _RouteIndex,
    collection_route,
    index_routes,
    routes,
)


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


def _full_scan(app: FastAPI, method: str, path: str) -> tuple[str, object]:
    """What the router's own loop picks for ``method path``: the first FULL match, else the
    first PARTIAL one (a 405), else nothing (a 404)."""
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    partial = None
    for route in app.router.routes:
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return "full", route
        if match == Match.PARTIAL and partial is None:
            partial = route
    return ("partial", partial) if partial is not None else ("none", None)


def _indexed(app: FastAPI, method: str, path: str) -> tuple[str, object]:
    """The same choice made over the index's group for ``path``."""
    stack = app.router.middleware_stack
    assert isinstance(stack, IndexedRoutes)
    index = _RouteIndex(app.router)
    assert index.usable
    group = index.router(path)
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    partial = None
    for route in group.routes if group is not None else ():
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return "full", route
        if match == Match.PARTIAL and partial is None:
            partial = route
    return ("partial", partial) if partial is not None else ("none", None)


def test_the_route_index_picks_what_the_full_scan_picks() -> None:
    """Every route's own path (parameters filled in, with and without a trailing slash, one
    segment more and less), with every method, picks the same route (or 405 or 404) through
    the index as through all the routes in order."""
    app = shared_app()
    paths = {"/", "", "/v1", "/v1/", "/v1/nothing", "/v1/agents/search", "/v1/agents/a//b"}
    for route in app.router.routes:
        path = re.sub(r"\{[^}]+\}", "x1", getattr(route, "path_format", "/"))
        paths |= {path, path + "/", path.rstrip("/"), path + "/extra", path.rsplit("/", 1)[0]}
        paths.add(re.sub(r"\{[^}]+\}", "search", getattr(route, "path_format", "/")))
    methods = ("GET", "POST", "PATCH", "PUT", "DELETE", "HEAD")
    checked = 0
    for path in sorted(paths):
        for method in methods:
            assert _indexed(app, method, path) == _full_scan(app, method, path), (method, path)
            checked += 1
    assert checked > 1000


@pytest.mark.trio
async def test_a_router_the_index_cannot_describe_dispatches_as_before() -> None:
    """A mounted app (or a ``path`` parameter) turns the index off: every request goes to the
    router's own loop."""
    app = FastAPI(redirect_slashes=False)

    async def anything(rest: str) -> dict[str, str]:
        return {"rest": rest}

    app.add_api_route("/files/{rest:path}", anything, methods=["GET"])
    index_routes(app)
    assert not _RouteIndex(app.router).usable
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        got = await client.get("/files/a/b/c")
        assert (got.status_code, got.json()) == (200, {"rest": "a/b/c"})
        assert (await client.get("/nothing")).status_code == 404
