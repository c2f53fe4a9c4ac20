"""One set of routes per process: every ``create_app`` shares the FastAPI app and each request
reaches the service (and key, observer) of the app it was sent to."""

from __future__ import annotations

import httpx
import pytest

from kelpie_agent.api import create_app
from kelpie_agent.service import NotFoundError


class _Service:
    """Stands in for AgentService: each agent read names the service that answered."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def get_agent(self, agent_id: str) -> None:
        raise NotFoundError("agent", agent_id, f"{self.name} has no {agent_id}")


async def _get(app: object, path: str, key: str | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        return await client.get(path, headers=headers)


def test_apps_share_one_fastapi_app_per_version_and_auth() -> None:
    one, two = create_app(_Service("one")), create_app(_Service("two"))  # type: ignore[arg-type]
    assert one.fastapi is two.fastapi
    keyed = create_app(_Service("three"), api_key="k")  # type: ignore[arg-type]
    assert keyed.fastapi is not one.fastapi
    assert keyed.fastapi is create_app(_Service("four"), api_key="other").fastapi  # type: ignore[arg-type]
    assert create_app(_Service("five"), version="9.9").fastapi is not one.fastapi  # type: ignore[arg-type]
    assert "HTTPBearer" in str(keyed.openapi()["components"]["securitySchemes"])
    assert "securitySchemes" not in one.openapi().get("components", {})


@pytest.mark.trio
async def test_each_request_reaches_the_service_of_its_app() -> None:
    one, two = create_app(_Service("one")), create_app(_Service("two"))  # type: ignore[arg-type]
    for _ in range(2):  # interleaved, on the same shared routes
        assert (await _get(one, "/v1/agents/a-1")).json()["detail"] == "one has no a-1"
        assert (await _get(two, "/v1/agents/a-1")).json()["detail"] == "two has no a-1"


@pytest.mark.trio
async def test_each_app_checks_its_own_key() -> None:
    alpha = create_app(_Service("alpha"), api_key="key-a")  # type: ignore[arg-type]
    beta = create_app(_Service("beta"), api_key="key-b")  # type: ignore[arg-type]
    assert (await _get(alpha, "/v1/agents/x", "key-a")).status_code == 404
    assert (await _get(alpha, "/v1/agents/x", "key-b")).status_code == 401
    assert (await _get(beta, "/v1/agents/x", "key-b")).status_code == 404
    assert (await _get(beta, "/v1/agents/x", "key-a")).status_code == 401
    assert (await _get(beta, "/v1/agents/x")).status_code == 401
    assert (await _get(beta, "/v1/health/")).status_code == 200
