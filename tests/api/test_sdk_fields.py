"""The audit of issue #17's rule: every parameter letta-client can send is classified in
``sdk_fields.toml`` (honoured, refused, Letta Cloud only), the classification matches what the
routes declare, the honoured ones are named by the tests listed as proof, and every refused
one, sent through the real SDK, is a 422 whose one-line detail names it."""

from __future__ import annotations

import ast
import functools
import inspect
import re
from pathlib import Path
from typing import Any

import httpx
import letta_client
import pytest
from letta_client import AsyncLetta

from .harness import BASE, api
from .sdk_fields import CLASSES, SdkParam, class_of, classification, declared, doc_rows, sdk_params
from .test_letta_client import GUARDS

DOC = Path(__file__).resolve().parents[2] / "docs" / "http-api.md"
TESTS = Path(__file__).resolve().parent


def test_every_sdk_parameter_is_classified_once() -> None:
    unclassified = [f"{p.method.name} {p.name}" for p in sdk_params() if class_of(p) is None]
    assert not unclassified, f"classify in tests/api/sdk_fields.toml: {unclassified}"
    known = {(p.method.name, p.name) for p in sdk_params()}
    stale = [
        f"{method} {name}"
        for method, entry in classification().items()
        for cls in (*CLASSES, "untested")
        for name in entry.get(cls, [])
        if (method, name) not in known
    ]
    assert not stale, f"not parameters of letta-client's methods: {stale}"


@functools.cache
def _test_sources() -> dict[str, str]:
    out: dict[str, str] = {}
    for path in sorted(TESTS.glob("test_*.py")):
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                out[f"{path.name}::{node.name}"] = ast.get_source_segment(text, node) or ""
    return out


def test_honoured_parameters_are_declared_and_named_by_their_tests() -> None:
    problems = []
    for p in sdk_params():
        entry = classification()[p.method.name]
        if class_of(p) != "honoured":
            if p.name in entry.get("untested", []):
                problems.append(f"{p.method.name} {p.name}: untested but not honoured")
            continue
        if p.key not in declared(p.method):
            problems.append(f"{p.method.name} {p.name}: honoured but the route has no {p.key}")
        if p.name in entry.get("untested", []):
            continue
        sources = [_test_sources().get(name) for name in entry.get("tests", [])]
        if None in sources:
            problems.append(f"{p.method.name}: a listed test does not exist: {entry['tests']}")
        elif not any(re.search(rf"\b{re.escape(p.name)}\b", s or "") for s in sources):
            problems.append(f"{p.method.name} {p.name}: none of {entry.get('tests')} names it")
    assert not problems, "\n".join(problems)


def test_request_fields_table_matches_the_classification() -> None:
    text = DOC.read_text()
    start = text.index("<!-- fields-table -->\n") + len("<!-- fields-table -->\n")
    documented = text[start : text.index("<!-- /fields-table -->")].strip().splitlines()
    assert documented == doc_rows(), "regenerate: python -m tests.api.sdk_fields --table"


# -- every refused parameter, through the SDK ----------------------------------------------------
def _sample(annotation: Any) -> Any:
    """A value of the parameter's type (the SDK sends it as given)."""
    text = str(annotation)
    if "bool" in text:
        return True
    if "Iterable" in text or "List" in text or "Sequence" in text:
        return ["x"]
    if "int" in text or "float" in text:
        return 1
    if "Dict" in text or "Param" in text or "object" in text:
        return {}
    return "x"


def _call(client: AsyncLetta, p: SdkParam, value: Any, given: dict[str, Any]) -> Any:
    owner = client
    *path, name = p.method.name.split(".")
    for part in path:
        owner = getattr(owner, part)
    fn = getattr(owner, name)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for pname, param in inspect.signature(fn).parameters.items():
        if param.kind is param.POSITIONAL_OR_KEYWORD:
            args.append(f"{pname}-1")
        elif pname in given:  # the table's "args": valid values of the other parameters
            kwargs[pname] = given[pname]
        elif param.default is inspect.Parameter.empty and pname != p.name:
            kwargs[pname] = b"{}" if pname == "file" else _sample(param.annotation)
    kwargs[p.name] = value
    return fn(*args, **kwargs)


async def _refusals() -> list[str]:
    problems = []
    async with api() as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(base_url=BASE, http_client=http, max_retries=0)
        for p in sdk_params():
            if class_of(p) not in ("refused", "cloud_only"):
                continue
            entry = classification()[p.method.name]
            owner = client
            for part in p.method.name.split(".")[:-1]:
                owner = getattr(owner, part)
            annotation = inspect.signature(getattr(owner, p.method.name.split(".")[-1]))
            value = entry.get("values", {}).get(
                p.name, _sample(annotation.parameters[p.name].annotation)
            )
            try:
                result = _call(client, p, value, entry.get("args", {}))
                if inspect.isawaitable(result):
                    await result
                problems.append(f"{p.method.name} {p.name}={value!r}: accepted")
            except letta_client.UnprocessableEntityError as error:
                detail = error.body.get("detail", "") if isinstance(error.body, dict) else ""
                if p.key not in detail.split(";")[0]:
                    problems.append(f"{p.method.name} {p.name}: 422 names not {p.key}: {detail}")
            except letta_client.APIStatusError as error:
                problems.append(f"{p.method.name} {p.name}: {error.status_code}, not 422")
        await http.aclose()
    return problems


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the SDK marks some refused ones
@pytest.mark.dst(seeds=1, **GUARDS)
async def test_every_refused_parameter_is_a_422_naming_it() -> None:
    problems = await _refusals()
    assert not problems, "\n".join(problems)
