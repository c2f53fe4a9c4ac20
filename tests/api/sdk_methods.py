"""The methods of letta-client, found by introspection, with the HTTP request each one sends.

Every public method of every resource of ``letta_client.Letta`` (and ``health``) is called once
with placeholder arguments (``id-1`` for strings) through an ``httpx.MockTransport`` that
records the request and answers 418; the first request's method and path is the method's
route. ``routed(app)`` says which of them the app has a route for (method and path), which is
what the enumeration test and ``python -m tests.api.sdk_methods`` report.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any

import httpx
from starlette.routing import Match

__all__ = ["CLOUD_ONLY", "SdkMethod", "routed", "sdk_methods"]

# Letta Cloud only (no self-hosted server has them): client-side access tokens, environments
# and templates.
CLOUD_ONLY = ("access_tokens.", "environments.", "templates.")
SdkMethod = tuple[str, str, str]  # (qualified name, HTTP method, path with id-1 for ids)


def _placeholder(annotation: str) -> Any:
    if "bool" in annotation:
        return True
    if "int" in annotation and "str" not in annotation:
        return 1
    if any(kind in annotation for kind in ("Iterable", "List", "Sequence")):
        return []
    if "FileTypes" in annotation:
        return ("a.txt", b"hi", "text/plain")
    return "id-1"


def _walk(obj: Any, prefix: str, seen: set[int]) -> list[tuple[str, Callable[..., Any]]]:
    from letta_client._resource import SyncAPIResource

    out: list[tuple[str, Callable[..., Any]]] = []
    for name in sorted(dir(type(obj))):
        if name.startswith("_") or name in ("with_raw_response", "with_streaming_response"):
            continue
        attr = getattr(type(obj), name, None)
        if inspect.isfunction(attr):
            if isinstance(obj, SyncAPIResource):
                out.append((prefix + name, getattr(obj, name)))
            continue
        try:
            sub = getattr(obj, name)
        except Exception:  # a property that needs configuration
            continue
        if isinstance(sub, SyncAPIResource) and id(sub) not in seen:
            seen.add(id(sub))
            out += _walk(sub, f"{prefix}{name}.", seen)
    return out


def sdk_methods(*, cloud: bool = False) -> list[SdkMethod]:
    """Every SDK method with the request it sends (without Cloud-only ones unless ``cloud``)."""
    from letta_client import Letta

    sent: list[tuple[str, str]] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append((request.method, request.url.path))
        return httpx.Response(418, json={"detail": "recorded"})

    http = httpx.Client(transport=httpx.MockTransport(record))
    client = Letta(base_url="http://sdk.test", http_client=http, max_retries=0)
    methods = [*_walk(client, "", set()), ("health", client.health)]
    out: list[SdkMethod] = []
    for name, fn in methods:
        if not cloud and name.startswith(CLOUD_ONLY):
            continue
        kwargs = {
            p.name: _placeholder(str(p.annotation))
            for p in inspect.signature(fn).parameters.values()
            if p.default is inspect.Parameter.empty
            and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        }
        sent.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                fn(**kwargs)
            except Exception:  # the 418 (or a client-side check before any request)
                pass
        method, path = sent[0] if sent else ("", "")
        out.append((name, method, path))
    http.close()
    return out


def routed(app: Any, methods: list[SdkMethod]) -> dict[str, bool]:
    """For each method: does ``app`` (a FastAPI/Starlette app) route its method and path?"""
    out: dict[str, bool] = {}
    for name, method, path in methods:
        scope = {"type": "http", "method": method, "path": path}
        out[name] = any(route.matches(scope)[0] == Match.FULL for route in app.routes)
    return out


if __name__ == "__main__":
    from kelpie_agent.api._app import shared_app

    found = sdk_methods()
    table = routed(shared_app(), found)
    for name, method, path in found:
        print(f"{'yes' if table[name] else ' - '}  {name:40} {method:6} {path}")
    print(f"{sum(table.values())} of {len(found)} non-Cloud SDK methods have a route")
