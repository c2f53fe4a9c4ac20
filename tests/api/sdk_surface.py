"""The letta-client SDK's methods, found by introspection, and which of them Kelpie routes.

Every public method of every resource reachable from ``letta_client.Letta`` is listed with the
HTTP verb and path its source calls (``self._get("/v1/...")``, ``path_template(...)``), and
matched against the routes of Kelpie's app. Letta-Cloud-only resources are marked as such.

    .venv/bin/python -m tests.api.sdk_surface          # the summary
    .venv/bin/python -m tests.api.sdk_surface --table  # a markdown row per method

"Routed" means a route of the app answers that verb and path; whether the answer is right is
what the compatibility tests (``tests/api/test_letta_client*.py``) check, with strict response
validation.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
from collections.abc import Iterator

import attrs
import letta_client
from letta_client import Letta

__all__ = ["CLOUD_ONLY", "SdkMethod", "routed", "sdk_methods", "table_rows"]

# Resources that only Letta Cloud serves (templates, deployments, access tokens, ...).
CLOUD_ONLY = ("templates", "access_tokens", "environments")

_CALL = re.compile(r"self\._?(get|post|patch|put|delete)(?:_api_list)?\(\s*(.*?),", re.S)
_PATH = re.compile(r"""(?:path_template\(\s*)?f?["'](/v1/[^"']*)["']""")


@attrs.frozen
class SdkMethod:
    name: str  # e.g. agents.messages.list
    verb: str  # GET, POST, ...
    path: str  # Letta's path template, e.g. /v1/agents/{agent_id}/messages

    @property
    def cloud_only(self) -> bool:
        return self.name.split(".")[0] in CLOUD_ONLY


def _resources(obj: object, prefix: str) -> Iterator[tuple[str, object]]:
    cls = type(obj)
    for name, attr in sorted(vars(cls).items()):
        if name.startswith("_") or name in ("with_raw_response", "with_streaming_response"):
            continue
        if isinstance(attr, functools.cached_property):
            child = getattr(obj, name)
            if isinstance(child, letta_client._resource.SyncAPIResource):
                yield f"{prefix}{name}", child
                yield from _resources(child, f"{prefix}{name}.")


def sdk_methods() -> list[SdkMethod]:
    """Every public method of the sync SDK that makes one HTTP call, sorted by name."""
    client = Letta(base_url="http://sdk.invalid", api_key="x")
    found: list[SdkMethod] = []
    for rname, resource in [("", client), *_resources(client, "")]:
        for name, fn in sorted(vars(type(resource)).items()):
            if name.startswith("_") or not inspect.isfunction(fn):
                continue
            source = inspect.getsource(fn)
            call = _CALL.search(source)
            path = _PATH.search(source)
            if call is None or path is None:
                continue
            full = f"{rname}.{name}" if rname else name  # health is the client's own
            found.append(SdkMethod(full, call.group(1).upper(), path.group(1)))
    return sorted(found, key=lambda m: m.name)


def _pattern(path: str) -> re.Pattern[str]:
    parts = re.split(r"\{[^}]+\}", path.rstrip("/"))
    return re.compile("^" + "[^/]+".join(re.escape(p) for p in parts) + "/?$")


def routed(methods: list[SdkMethod]) -> dict[SdkMethod, bool]:
    """For each method: does a route of Kelpie's app (its OpenAPI schema) answer its verb and
    path? A concrete path is tried (``{x}`` becomes ``x-1``), as a request would be routed."""
    from kelpie_agent.api._app import shared_app

    paths = shared_app().openapi()["paths"]
    routes = [(_pattern(path), {verb.upper() for verb in ops}) for path, ops in paths.items()]
    out: dict[SdkMethod, bool] = {}
    for m in methods:
        concrete = re.sub(r"\{([^}]+)\}", lambda g: f"{g.group(1)}-1", m.path)
        # as Starlette: a route matching both path and verb wins over one matching the path
        out[m] = any(m.verb in verbs for pattern, verbs in routes if pattern.match(concrete))
    return out


def table_rows() -> list[str]:
    """The markdown table of every method (docs/http-api.md, "letta-client methods")."""
    methods = sdk_methods()
    table = routed(methods)
    rows = ["| SDK method | HTTP | Kelpie |", "|---|---|---|"]
    for m in methods:
        status = "Letta Cloud only" if m.cloud_only else ("yes" if table[m] else "no")
        rows.append(f"| `{m.name}` | `{m.verb} {m.path}` | {status} |")
    return rows


def main(argv: list[str]) -> int:
    methods = sdk_methods()
    table = routed(methods)
    if "--table" in argv:
        print("\n".join(table_rows()))
    ours = [m for m in methods if not m.cloud_only]
    ok = sum(table[m] for m in ours)
    print(
        f"letta-client {letta_client.__version__}: {len(methods)} methods, {len(ours)} not "
        f"Letta-Cloud-only; Kelpie routes {ok} of those {len(ours)}"
    )
    if "--missing" in argv:
        for m in ours:
            if not table[m]:
                print(f"  missing: {m.name}  {m.verb} {m.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
