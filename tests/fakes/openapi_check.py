"""Route requests to GitHub's REST operations and check responses against their OpenAPI schemas.

The description (``tests/fixtures/github/openapi/api.github.com.json``: GitHub's, trimmed to the
operations the fake routes by ``trim_openapi.py`` there) is registered under ``urn:gh`` so that
every ``#/components/...`` reference resolves inside it; validators are built lazily and cached
per operation and status.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import _keywords, validators
from jsonschema.exceptions import ValidationError, best_match
from jsonschema.protocols import Validator
from openapi_schema_validator import OAS30Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "github"
SPEC_PATH = FIXTURES / "openapi" / "api.github.com.json"

# Trailing path parameters that may contain slashes (file paths, refs, "base...head").
_GREEDY_PARAMS = {"path", "ref", "basehead"}
_METHODS = ("get", "post", "put", "patch", "delete")


def _nullable_enum(validator: Validator, enums: Any, instance: Any, schema: Any) -> Any:
    """``enum`` that admits null when the schema is ``nullable``: GitHub's description has ~100
    nullable enums (check-run ``conclusion``, issue ``state_reason``) without null in the list,
    and GitHub answers null for them (OAS 3.0.3 would need null listed)."""
    if instance is None and schema.get("nullable") is True:
        return
    yield from _keywords.enum(validator, enums, instance, schema)


GitHubValidator = validators.extend(OAS30Validator, {"enum": _nullable_enum})


@dataclass(frozen=True)
class Operation:
    """One documented REST operation: method, path template and its description."""

    method: str
    template: str
    operation_id: str
    pattern: re.Pattern[str]
    literal_segments: int


@dataclass(frozen=True)
class Match:
    """An operation matched by a concrete request path, with its decoded path parameters."""

    operation: Operation
    params: dict[str, str]


def _compile(template: str) -> tuple[re.Pattern[str], int]:
    segments = template.strip("/").split("/")
    parts: list[str] = []
    literal = 0
    for index, segment in enumerate(segments):
        names = re.findall(r"\{(\w+)\}", segment)
        if not names:
            parts.append(re.escape(segment))
            literal += 1
            continue
        regex = ""
        for piece in re.split(r"(\{\w+\})", segment):
            if piece.startswith("{"):
                name = piece[1:-1]
                last = index == len(segments) - 1
                body = ".+" if last and name in _GREEDY_PARAMS else "[^/]+"
                regex += f"(?P<{name}>{body})"
            else:
                regex += re.escape(piece)
        parts.append(regex)
    return re.compile("^/" + "/".join(parts) + "$"), literal


class OpenAPI:
    """GitHub's OpenAPI description: operation lookup and response validation."""

    def __init__(self, spec_path: Path = SPEC_PATH) -> None:
        with spec_path.open(encoding="utf-8") as handle:
            self.spec: dict[str, Any] = json.load(handle)
        resource = Resource.from_contents(self.spec, default_specification=DRAFT4)
        self.registry: Registry[Any] = Registry().with_resource("urn:gh", resource)
        self._by_first: dict[tuple[str, str], list[Operation]] = {}
        for template, item in self.spec["paths"].items():
            for method in _METHODS:
                if method not in item:
                    continue
                pattern, literal = _compile(template)
                op = Operation(
                    method.upper(), template, item[method]["operationId"], pattern, literal
                )
                key = (method.upper(), template.strip("/").split("/")[0])
                self._by_first.setdefault(key, []).append(op)
        for ops in self._by_first.values():
            # Most literal segments first; then fewer parameters, so that the current
            # ".../compare/{basehead}" wins over the older alias ".../compare/{base}...{head}".
            ops.sort(
                key=lambda op: (-op.literal_segments, op.template.count("{"), -len(op.template))
            )
        self._validators: dict[tuple[str, str, str], Validator | None] = {}
        self._lock = threading.Lock()

    def match(self, method: str, path: str) -> Match | None:
        """The documented operation for ``method path`` (raw, percent-encoded path), if any."""
        first = path.strip("/").split("/")[0]
        for op in self._by_first.get((method.upper(), first), []):
            found = op.pattern.match(path)
            if found:
                params = {k: urllib.parse.unquote(v) for k, v in found.groupdict().items()}
                return Match(op, params)
        return None

    def operation(self, method: str, template: str) -> Operation:
        """The operation documented for ``method`` on ``template`` (KeyError if undocumented)."""
        for op in self._by_first.get((method.upper(), template.strip("/").split("/")[0]), []):
            if op.template == template:
                return op
        raise KeyError(f"{method} {template} is not in GitHub's OpenAPI description")

    def _schema_pointer(self, op: Operation, status: int, media: str) -> str | None:
        responses = self.spec["paths"][op.template][op.method.lower()]["responses"]
        escaped = op.template.replace("~", "~0").replace("/", "~1")
        base = f"/paths/{escaped}/{op.method.lower()}/responses/{status}"
        response = responses.get(str(status))
        if response is None:
            # Undocumented error statuses (401, 403 rate limits, 5xx, check-run 422s) carry
            # GitHub's generic error bodies.
            if status < 400:
                return None
            name = "validation-error" if status == 422 else "basic-error"
            return f"/components/schemas/{name}"
        if "$ref" in response:
            base = response["$ref"].lstrip("#")
            response = self.spec["components"]["responses"][base.rsplit("/", 1)[1]]
        if media not in response.get("content", {}):
            return None
        return f"{base}/content/{media.replace('/', '~1')}/schema"

    def _validator(
        self, op: Operation, status: int, media: str = "application/json"
    ) -> Validator | None:
        key = (op.method, op.template, f"{status} {media}")
        with self._lock:
            if key not in self._validators:
                pointer = self._schema_pointer(op, status, media)
                self._validators[key] = (
                    None
                    if pointer is None
                    else GitHubValidator(
                        {"$ref": f"urn:gh#{pointer}"},
                        registry=self.registry,
                        format_checker=OAS30Validator.FORMAT_CHECKER,
                    )
                )
            return self._validators[key]

    def _request_validator(self, op: Operation) -> Validator | None:
        key = (op.method, op.template, "request")
        with self._lock:
            if key not in self._validators:
                operation = self.spec["paths"][op.template][op.method.lower()]
                content = operation.get("requestBody", {}).get("content", {})
                escaped = op.template.replace("~", "~0").replace("/", "~1")
                pointer = f"/paths/{escaped}/{op.method.lower()}/requestBody/content/"
                pointer += "application~1json/schema"
                self._validators[key] = (
                    GitHubValidator(
                        {"$ref": f"urn:gh#{pointer}"},
                        registry=self.registry,
                        format_checker=OAS30Validator.FORMAT_CHECKER,
                    )
                    if "application/json" in content
                    else None
                )
            return self._validators[key]

    def request_problem(self, op: Operation, body: Any) -> str | None:
        """GitHub's 422 message for a request body that breaks the operation's schema, if any
        (the description encodes limits such as check-run actions <= 3, label <= 20 chars)."""
        validator = self._request_validator(op)
        if validator is None or body is None:
            return None
        errors = list(validator.iter_errors(body))
        if not errors:
            return None
        # Among alternatives (e.g. "completed needs a conclusion") a missing field explains best.
        missing = [e for top in errors for e in top.context or [] if e.validator == "required"]
        return "Invalid request.\n\n" + _describe(missing[0] if missing else best_match(errors))

    def errors(
        self, op: Operation, status: int, body: Any, media: str = "application/json"
    ) -> list[str]:
        """Messages for every way ``body`` differs from the schema of ``op`` at ``status`` for
        the media type ``media`` (a custom one such as ``application/vnd.github.object`` has
        its own schema)."""
        validator = self._validator(op, status, media)
        if validator is None:
            return [] if body is None else [f"{op.operation_id} {status}: undocumented JSON body"]
        messages = []
        for error in validator.iter_errors(body):
            if error.validator == "oneOf" and not error.context:
                # Valid under several alternatives: an ambiguity of the description (type-less
                # branches such as content-symlink also accept a directory listing; basic-error
                # and rule-violation-error both fit an error body), not a wrong shape.
                continue
            if error.context:  # anyOf/oneOf: say why the closest alternative failed
                error = best_match(error.context)
            where = "/".join(str(p) for p in error.absolute_path) or "<root>"
            messages.append(f"{op.operation_id} {status} at {where}: {error.message[:300]}")
        return messages


def _describe(error: ValidationError) -> str:
    """A short, GitHub-like sentence for a request validation error (never echoing the value)."""
    field = "/".join(str(p) for p in error.absolute_path) or "body"
    limit = error.validator_value
    if error.validator == "maxLength":
        return f"{field} is too long (maximum is {limit} characters)."
    if error.validator == "maxItems":
        return f"{field} has too many items (maximum is {limit})."
    if error.validator == "required":
        missing = next((name for name in limit if name not in error.instance), field)
        return f"{missing} wasn't supplied."
    if error.validator == "enum":
        return f"{error.instance!r} is not a member of {field}: {limit}."
    if error.validator == "type":
        return f"{field} is not of type {limit}."
    return f"{field}: {error.message[:200]}"


@functools.cache
def load_openapi(spec_path: Path = SPEC_PATH) -> OpenAPI:
    """The parsed description, loaded once per process."""
    return OpenAPI(spec_path)
