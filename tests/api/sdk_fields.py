"""Every parameter letta-client can send, found by introspection, and what Kelpie does with it.

For each SDK method Kelpie routes (``sdk_surface``), the keyword parameters of the method are
read from its signature and placed where its source sends them: the query (the dict given to
``query=maybe_transform``), a header (``strip_not_given``) or the body (everything else; path
parameters are left out). ``sdk_fields.toml`` classifies every one of them:

- ``honoured``: Kelpie's route declares it (its OpenAPI schema) and it takes effect as in
  Letta; the method's ``tests`` (``file.py::test_name``) call it and their source names it;
- ``refused``: a 422 whose one-line detail names it (``query.<name>`` or ``body.<name>``);
- ``cloud_only``: meaningful on Letta Cloud only (projects, templates, deployments); refused
  the same way.

``test_sdk_fields.py`` fails on a parameter the table does not classify (so an SDK upgrade
cannot add silently ignored fields), on a classification that is stale, and sends every
refused parameter to the app to see the 422 name it.

    .venv/bin/python -m tests.api.sdk_fields           # counts, and what is unclassified
    .venv/bin/python -m tests.api.sdk_fields --table   # the docs/http-api.md table
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
import tomllib
import typing
from pathlib import Path
from typing import Any

import attrs
from letta_client import Letta

from .sdk_surface import SdkMethod, _pattern, _resources, routed, sdk_methods

__all__ = [
    "CLASSES",
    "TABLE",
    "SdkParam",
    "classification",
    "declared",
    "doc_rows",
    "sdk_params",
]

TABLE = Path(__file__).with_name("sdk_fields.toml")
CLASSES = ("honoured", "refused", "cloud_only")
_SKIP = {"self", "extra_headers", "extra_query", "extra_body", "timeout"}
_PAIRS = re.compile(r'"([^"]+)":\s*(\w+)')


@attrs.frozen
class SdkParam:
    method: SdkMethod
    name: str  # the SDK's keyword, e.g. body_requires_approval
    where: str  # "query", "body" or "header"
    wire: str  # the name sent, e.g. requires_approval

    @property
    def key(self) -> str:
        return f"{self.where}.{self.wire}"


_PARAMS_TYPE = re.compile(r"\b(\w+_params)\.(\w+Params)\b")


def _aliases(fn: Any, source: str) -> dict[str, str]:
    """The wire names of the params TypedDicts ``fn`` transforms its arguments with, where
    they differ (``PropertyInfo(alias=...)``: ``metadata`` is sent as ``metadata_``)."""
    out: dict[str, str] = {}
    for module, name in _PARAMS_TYPE.findall(source):
        cls = getattr(fn.__globals__.get(module), name, None)
        if cls is None:
            continue
        for key, hint in typing.get_type_hints(cls, include_extras=True).items():
            while typing.get_origin(hint) in (typing.Required, typing.NotRequired):
                hint = typing.get_args(hint)[0]  # Required[Annotated[..., PropertyInfo]]
            for extra in getattr(hint, "__metadata__", ()):
                alias = getattr(extra, "alias", None)
                if alias:
                    out[key] = alias
    return out


def _pairs(source: str, pattern: str) -> dict[str, str]:
    found = re.search(pattern, source, re.S)
    return {var: wire for wire, var in _PAIRS.findall(found.group(1))} if found else {}


@functools.cache
def sdk_params() -> tuple[SdkParam, ...]:
    """The parameters of every SDK method Kelpie routes (Letta-Cloud-only resources left out),
    in method order."""
    client = Letta(base_url="http://sdk.invalid", api_key="x")
    resources: dict[str, Any] = {"": client, **dict(_resources(client, ""))}
    methods = [m for m, ok in routed(sdk_methods()).items() if ok and not m.cloud_only]
    out: list[SdkParam] = []
    for m in sorted(methods, key=lambda m: m.name):
        owner, _, name = m.name.rpartition(".")
        fn = vars(type(resources[owner]))[name]
        source = inspect.getsource(fn)
        query = _pairs(source, r"query=(?:await )?(?:async_)?maybe_transform\(\s*\{(.*?)\}")
        headers = _pairs(source, r"strip_not_given\(\s*\{(.*?)\}")
        every = {var: wire for wire, var in _PAIRS.findall(source)}
        aliases = _aliases(fn, source)
        in_path = set(re.findall(r"\{(\w+)\}", m.path))
        for pname, param in inspect.signature(fn).parameters.items():
            if pname in _SKIP or pname in in_path or param.kind is not param.KEYWORD_ONLY:
                continue
            if pname in query:
                out.append(SdkParam(m, pname, "query", aliases.get(pname, query[pname])))
            elif pname in headers:
                out.append(SdkParam(m, pname, "header", headers[pname].lower()))
            else:
                wire = every.get(pname, pname)
                out.append(SdkParam(m, pname, "body", aliases.get(wire, wire)))
    return tuple(out)


@functools.cache
def _spec() -> dict[str, Any]:
    from kelpie_agent.api._app import shared_app

    return shared_app().openapi()


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = _spec()["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def declared(method: SdkMethod) -> frozenset[str]:
    """What Kelpie's route for ``method`` reads, as ``query.x``/``header.x``/``body.x``."""
    concrete = re.sub(r"\{([^}]+)\}", lambda g: f"{g.group(1)}-1", method.path)
    for path, ops in _spec()["paths"].items():
        op = ops.get(method.verb.lower())
        if op is None or not _pattern(path).match(concrete):
            continue
        out = {
            f"{p['in']}.{p['name'].lower() if p['in'] == 'header' else p['name']}"
            for p in op.get("parameters", [])
        }
        for content in (op.get("requestBody") or {}).get("content", {}).values():
            schema = _resolve(content["schema"])
            for alt in [schema, *schema.get("anyOf", []), *schema.get("oneOf", [])]:
                out |= {f"body.{name}" for name in _resolve(alt).get("properties", {})}
        return frozenset(out)
    raise LookupError(f"no route for {method.verb} {method.path}")


@functools.cache
def classification() -> dict[str, dict[str, Any]]:
    """``sdk_fields.toml``: per method, ``honoured``/``refused``/``cloud_only`` lists of
    parameter names (the SDK's keywords), ``tests`` proving the honoured ones, and ``notes``."""
    return tomllib.loads(TABLE.read_text())


def class_of(param: SdkParam) -> str | None:
    entry = classification().get(param.method.name, {})
    found = [c for c in CLASSES if param.name in entry.get(c, [])]
    return found[0] if len(found) == 1 else None


def doc_rows() -> list[str]:
    """The markdown table of docs/http-api.md ("Request fields"): per method, its parameters
    by class."""
    rows = ["| SDK method | honoured | refused (422 naming it) | Letta Cloud only |"]
    rows.append("|---|---|---|---|")
    by_method: dict[str, dict[str, list[str]]] = {}
    for p in sdk_params():
        cls = class_of(p) or "UNCLASSIFIED"
        untested = p.name in classification().get(p.method.name, {}).get("untested", [])
        shown = f"`{p.name}`*" if cls == "honoured" and untested else f"`{p.name}`"
        by_method.setdefault(p.method.name, {}).setdefault(cls, []).append(shown)
    for name, classes in by_method.items():
        cells = [", ".join(classes.get(c, [])) or "-" for c in CLASSES]
        rows.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return rows


def main(argv: list[str]) -> int:
    params = sdk_params()
    if "--table" in argv:
        print("\n".join(doc_rows()))
    counts = {c: 0 for c in (*CLASSES, None)}
    for p in params:
        counts[class_of(p)] += 1
    print(
        f"{len(params)} parameters: {counts['honoured']} honoured, {counts['refused']} refused, "
        f"{counts['cloud_only']} Letta Cloud only, {counts[None]} unclassified"
    )
    for p in params:
        if class_of(p) is None:
            said = "declared" if p.key in declared(p.method) else "not declared"
            print(f"  unclassified: {p.method.name} {p.name} ({p.key}, {said} by Kelpie)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
