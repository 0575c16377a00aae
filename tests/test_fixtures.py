"""The GitHub fixtures in ``tests/fixtures/github`` stand alone.

The trimmed OpenAPI description holds exactly the operations the fake GitHub routes (plus the
documented-but-unserved ones ``trim_openapi.py`` lists with a reason), routes each of their
requests to that very operation, resolves every ``$ref`` inside itself, and gives every served
operation a response schema that really checks bodies; every fixture file is accounted for in
``SOURCES.md``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from openapi_schema_validator import OAS30Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

from tests.conftest import GITHUB_FIXTURES, ROOT
from tests.fakes.github_api import ENDPOINTS
from tests.fakes.github_routes import ROUTES
from tests.fakes.openapi_check import (
    _GREEDY_PARAMS,
    SPEC_PATH,
    GitHubValidator,
    OpenAPI,
    load_openapi,
)

METHODS = ("get", "put", "post", "delete", "patch")
TRIM_SCRIPT = GITHUB_FIXTURES / "trim_openapi.py"


def _trim_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trim_openapi", TRIM_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


trim = _trim_module()


@pytest.fixture(scope="module")
def openapi() -> OpenAPI:
    return load_openapi()


def kept_operations(spec: dict[str, Any]) -> set[tuple[str, str]]:
    return {(m.upper(), t) for t, item in spec["paths"].items() for m in METHODS if m in item}


def sample_paths(template: str) -> list[str]:
    """Concrete request paths for ``template``: every parameter ``x1``; when its last segment is
    a parameter that may hold slashes (``path``, ``ref``, ``basehead``), also ``a/b`` there."""
    plain = re.sub(r"\{\w+\}", "x1", template)
    last = re.fullmatch(r"(.*/)\{(\w+)\}", template)
    if last and last.group(2) in _GREEDY_PARAMS:
        return [plain, re.sub(r"\{\w+\}", "x1", last.group(1)) + "a/b"]
    return [plain]


def iter_refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from iter_refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from iter_refs(item)


def resolve(document: Any, ref: str) -> Any:
    """The value at local JSON pointer ``#/...`` in ``document`` (KeyError/IndexError if none)."""
    if not ref.startswith("#/"):
        raise KeyError(f"not a local reference: {ref}")
    node = document
    for token in ref[2:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node


def test_the_fake_loads_the_description_from_the_repository() -> None:
    assert ENDPOINTS  # the endpoint modules are imported, so ROUTES is complete
    assert SPEC_PATH == GITHUB_FIXTURES / "openapi" / "api.github.com.json"
    assert SPEC_PATH.resolve().is_relative_to(ROOT)
    assert GITHUB_FIXTURES.resolve().is_relative_to(ROOT / "tests")


def test_every_kept_operation_is_routed_by_the_fake(openapi: OpenAPI) -> None:
    kept = kept_operations(openapi.spec)
    routed = set(ROUTES)
    unserved = set(trim.DOCUMENTED_UNSERVED)
    assert len(routed) > 30
    assert routed <= kept, f"routes missing from the description: {sorted(routed - kept)}"
    assert kept - routed == unserved, "kept but not routed, and not listed in trim_openapi.py"
    assert not unserved & routed
    assert set(trim.SERVED) == routed, "trim_openapi.SERVED is out of date with the fake's routes"
    assert len(trim.KEPT) == len(set(trim.KEPT)) == len(kept)


def test_unserved_operations_are_kept_for_a_reason(openapi: OpenAPI) -> None:
    # Asked for by test_unimplemented_documented_endpoint_is_reported (it must be documented).
    assert trim.UNSERVED_FOR_TESTS == (("GET", "/repos/{owner}/{repo}/labels"),)
    # A routing guard is needed only if, without it, some request for it would reach a served
    # operation: the router tries candidates with more literal segments first.
    for method, template in trim.ROUTING_GUARDS:
        guard = openapi.operation(method, template)
        shadowed = [
            (m, t)
            for m, t in ROUTES
            if m == method
            and any(openapi.operation(m, t).pattern.match(p) for p in sample_paths(template))
        ]
        assert shadowed, f"{method} {template} shadows no served operation: drop the guard"
        for m, t in shadowed:
            assert guard.literal_segments > openapi.operation(m, t).literal_segments


def test_every_request_reaches_its_own_operation(openapi: OpenAPI) -> None:
    checked = 0
    for method, template in sorted(kept_operations(openapi.spec)):
        for path in sample_paths(template):
            found = openapi.match(method, path)
            assert found is not None, f"{method} {path} matches nothing"
            assert found.operation.template == template, (method, path, found.operation.template)
            checked += 1
    assert checked >= len(ROUTES)


def test_every_ref_resolves_inside_the_description(openapi: OpenAPI) -> None:
    refs = set(iter_refs(openapi.spec))
    assert len(refs) > 100
    unresolved = []
    for ref in sorted(refs):
        try:
            resolve(openapi.spec, ref)
        except (KeyError, IndexError, ValueError, TypeError):
            unresolved.append(ref)
    assert unresolved == []
    for kind, name in trim.LOOKED_UP:  # read by name, not through a $ref
        assert name in openapi.spec["components"][kind], (kind, name)


def test_every_served_answer_is_checked_against_a_schema(openapi: OpenAPI) -> None:
    checked = 0
    anything: list[tuple[str, str, str]] = []
    for method, template in ROUTES:
        op = openapi.operation(method, template)
        responses = openapi.spec["paths"][template][method.lower()]["responses"]
        for status, response in responses.items():
            if not status.startswith("2"):
                continue
            if "$ref" in response:
                response = resolve(openapi.spec, response["$ref"])
            if "application/json" not in response.get("content", {}):
                continue
            validator = openapi._validator(op, int(status))
            assert validator is not None, (method, template, status)
            if response["content"]["application/json"]["schema"] == {"type": "object"}:
                anything.append((method, template, status))  # GitHub documents any object
                assert validator.is_valid({}) and not validator.is_valid([])
                continue
            # An empty object is no GitHub resource (nor a list of them): a schema that resolves
            # and checks must say so.
            assert list(validator.iter_errors({})), (method, template, status)
            checked += 1
    assert checked >= len(ROUTES) - len(anything)
    # the only answer documented as any object: the 202 of a redelivery
    assert anything == [("POST", "/app/hook/deliveries/{delivery_id}/attempts", "202")]
    assert openapi.errors(openapi.operation("GET", "/app"), 401, {"message": 1}) != []


def test_every_fixture_file_is_accounted_for() -> None:
    sources = (GITHUB_FIXTURES / "SOURCES.md").read_text(encoding="utf-8")
    files = sorted(GITHUB_FIXTURES.glob("*/*.json"))
    assert len(files) > 30
    for file in files:
        assert file.name in sources or file.parent.name == "openapi", file
        json.loads(file.read_text(encoding="utf-8"))


@pytest.mark.skipif(
    not os.environ.get("GITHUB_OPENAPI_FULL"),
    reason="set GITHUB_OPENAPI_FULL to the full api.github.com.json to check the trimmed one",
)
def test_trimmed_description_is_what_the_script_makes(tmp_path: Path) -> None:
    out = tmp_path / "api.github.com.json"
    assert trim.main([os.environ["GITHUB_OPENAPI_FULL"], "-o", str(out)]) == 0
    assert out.read_bytes() == SPEC_PATH.read_bytes()


@pytest.mark.skipif(
    not os.environ.get("GITHUB_OPENAPI_FULL"),
    reason="set GITHUB_OPENAPI_FULL to the full api.github.com.json to check the written fixture",
)
def test_written_webhook_fixture_fits_its_schema() -> None:
    # workflow_run.completed.json is written from the webhook's schema (SOURCES.md), which the
    # trimmed description drops with the other x-webhooks: check it against the full one.
    full = json.loads(Path(os.environ["GITHUB_OPENAPI_FULL"]).read_text(encoding="utf-8"))
    registry: Registry[Any] = Registry().with_resource(
        "urn:gh", Resource.from_contents(full, default_specification=DRAFT4)
    )
    ref = full["x-webhooks"]["workflow-run-completed"]["post"]["requestBody"]["content"]
    schema = {"$ref": "urn:gh#" + ref["application/json"]["schema"]["$ref"].lstrip("#")}
    validator = GitHubValidator(
        schema, registry=registry, format_checker=OAS30Validator.FORMAT_CHECKER
    )
    payload = json.loads((GITHUB_FIXTURES / "webhooks" / "workflow_run.completed.json").read_text())
    assert [e.message for e in validator.iter_errors(payload)] == []
    payload["workflow_run"].pop("head_sha")
    assert list(validator.iter_errors(payload))  # the schema does check
