"""A local fake of GitHub's REST API for the real PyGithub client.

``FakeGitHub`` serves HTTP on 127.0.0.1 (a free port) in a background thread. It authenticates
like GitHub (App JWT -> installation token), keeps state (``github_state``), answers with bodies
built from GitHub's examples (``github_shapes``), checks every JSON body against the OpenAPI
schema of the operation (``openapi_check``), records every call, and can inject failures::

    with FakeGitHub() as fake:
        repo = fake.add_repo("octo/ml", installation_id=7)
        pr = repo.open_pr(1, head="feature", head_files={"ci/nightly.sh": "..."})
        gh = fake.client(installation_id=7)
        assert gh.get_repo("octo/ml").get_pull(1).title == pr.title
        fake.check()  # no invalid response shapes, no unimplemented endpoints

GitHub Actions (``github_endpoints_actions``): ``Repo.add_workflow``, ``add_workflow_run`` and
``add_artifact`` arrange workflows, runs (of a fork too) and artifacts (zip bytes); a download
answers 302 to the artifact storage, this server under the host name ``localhost``, where a
request carrying credentials is reported by ``check`` (``leaks``).

Beyond failures (``fail_next``), tests can take a permission away from an installation
(``deny``), set the rate limit the responses report (``rate_remaining``, ``rate_cost``; per
installation ``installation_rates``),
delay a response after its request took effect (``hold_next``), and shorten the life of the
installation tokens it hands out (``state.token_lifetime``, an hour as on GitHub).

Conditional requests as GitHub answers them: a GET answered 200 with a JSON body carries a weak
``ETag`` (``W/"<sha256 of the body>"``) and GitHub's ``Cache-Control``/``Vary``; a GET whose
``If-None-Match`` holds the ETag its answer would have gets ``304 Not Modified`` with no body
(and no ``Link``: a client keeps what it needs of the first answer), recorded in ``calls``
with status 304, and, as GitHub says, not counted against the rate limit (``rate_cost``).
"""

from __future__ import annotations

import email.utils
import functools
import hashlib
import json
import re
import threading
import time
import traceback
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import Message
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from github import Auth, Github, GithubIntegration, GithubRetry

from bot.adapters.github.app import GitHubApp
from tests.fakes import (
    github_endpoints_actions,
    github_endpoints_checks,
    github_endpoints_git,
    github_endpoints_hooks,
    github_endpoints_issues,
    github_endpoints_pulls,
)
from tests.fakes.github_routes import BLOB_PREFIX, ROUTES, Api, ApiError, Reply, Request, Route
from tests.fakes.github_shapes import API, Shapes, retarget
from tests.fakes.github_state import GitHubState, HookDelivery, Repo
from tests.fakes.openapi_check import SPEC_PATH, load_openapi

ENDPOINTS = (  # importing them registers their routes
    github_endpoints_pulls,
    github_endpoints_issues,
    github_endpoints_git,
    github_endpoints_checks,
    github_endpoints_hooks,
    github_endpoints_actions,
)
Headers = Mapping[str, str] | Message  # http.server hands over an email Message
# What GitHub sends with an authenticated GET besides its ETag
CACHE_HEADERS = {
    "Cache-Control": "private, max-age=60, s-maxage=60",
    "Vary": "Accept, Authorization, Cookie, X-GitHub-OTP, Accept-Encoding",
}
SECONDARY_RATE_LIMIT = (
    "You have exceeded a secondary rate limit and have been temporarily blocked from content "
    "creation. Please retry your request again later."
)


def make_app_key() -> tuple[str, rsa.RSAPublicKey]:
    """A fresh RSA key pair for a GitHub App: (private key PEM, public key)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    return pem, key.public_key()


def etag_of(payload: bytes) -> str:
    """The weak ETag of a response body, as GitHub sends them: ``W/"<hex digest>"``."""
    return f'W/"{hashlib.sha256(payload).hexdigest()}"'


def not_modified(if_none_match: str | None, etag: str) -> bool:
    """Whether an ``If-None-Match`` header (tags separated by commas, or ``*``) holds
    ``etag``, compared weakly (``W/`` ignored) as RFC 9110 asks of ``If-None-Match``."""
    if not if_none_match:
        return False
    tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
    return "*" in tags or etag.removeprefix("W/") in tags


@functools.cache
def _default_key() -> tuple[str, rsa.RSAPublicKey]:
    return make_app_key()


@functools.cache
def _loaded_key(private_pem: str) -> Any:
    # Parsing a PEM re-validates the RSA key (~0.1 s); do it once per key, not once per JWT.
    return serialization.load_pem_private_key(
        private_pem.encode(), password=None, unsafe_skip_rsa_key_validation=True
    )


class Call(NamedTuple):
    """One recorded request and the status it got."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    status: int


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    remaining: int
    headers: dict[str, str]
    body: Any
    landed: bool = False


@dataclass
class Hold:
    """A response held back ``seconds`` after its request took effect; ``reached`` is set
    once the request has been handled (the state changed) and the delay begins."""

    method: str
    pattern: re.Pattern[str]
    seconds: float
    reached: threading.Event


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # keep-alive connections of a client must not block shutdown
    fake: FakeGitHub


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60
    server: _Server

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        status, headers, payload = self.server.fake.handle(
            self.command, self.path, self.headers, raw
        )
        lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        # One send for head and body: separate small writes cost ~40 ms each (Nagle).
        try:
            self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload)
        except OSError:  # the client went away (killed while a response was held)
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log lines."""


class FakeGitHub:
    """GitHub's REST API for one App, served locally; see the module docstring."""

    def __init__(
        self,
        *,
        app_id: int = 4242,
        app_slug: str = "threshold-bot",
        private_key: str | None = None,
        public_key: rsa.RSAPublicKey | None = None,
        spec_path: Path = SPEC_PATH,
    ) -> None:
        if public_key is None:
            if private_key is not None:
                raise ValueError("give the public key that goes with private_key")
            private_key, public_key = _default_key()
        self.app_id = app_id
        self.private_key = private_key  # PEM, for clients; None when only the public key is known
        self.public_key = public_key
        self.openapi = load_openapi(spec_path)
        self.state = GitHubState(app_id, app_slug)
        self.calls: list[Call] = []
        self.schema_errors: list[str] = []
        self.unimplemented: list[str] = []
        self.server_errors: list[str] = []
        self.leaks: list[str] = []  # credentials sent to the artifact storage host
        self._faults: list[Fault] = []
        self._holds: list[Hold] = []
        self.rate_remaining = 4999  # X-RateLimit-Remaining of the next response
        self.rate_cost = 0  # subtracted per installation-token request (0: a constant)
        # per installation, as GitHub counts: its own X-RateLimit-Remaining (else the above)
        self.installation_rates: dict[int, int] = {}
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.shapes = Shapes(self.state, self.base_url)
        self.api = Api(self.state, self.shapes, self.base_url)
        self._thread: threading.Thread | None = None
        for method, template in ROUTES:
            self.openapi.operation(method, template)  # every route is a documented operation

    def github_app(self, **options: Any) -> GitHubApp:
        """The App's own client for this fake (no write spacing, no backoff); ``options`` are
        more ``GitHubApp`` keyword arguments (``max_file_bytes``, ``retries``…)."""
        if self.private_key is None:
            raise ValueError("this fake knows only the App's public key")
        return GitHubApp(
            self.app_id,
            self.private_key,
            base_url=self.base_url,
            throttle=False,
            backoff=0,
            **options,
        )

    # ----- lifecycle --------------------------------------------------------------------------
    def start(self) -> FakeGitHub:
        """Serve in a background thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ----- arranging state --------------------------------------------------------------------
    def add_repo(self, full_name: str, **kwargs: Any) -> Repo:
        """Create a repository (see ``GitHubState.add_repo`` for the options)."""
        return self.state.add_repo(full_name, **kwargs)

    def repo(self, full_name: str) -> Repo:
        return self.state.repos[full_name]

    # ----- clients ----------------------------------------------------------------------------
    def app_auth(self) -> Auth.AppAuth:
        """PyGithub App credentials matching this fake (signing with the pre-parsed key)."""
        if self.private_key is None:
            raise ValueError("this fake was given only a public key")
        key = _loaded_key(self.private_key)
        return Auth.AppAuth(
            self.app_id, sign_func=lambda payload: jwt.encode(payload, key, algorithm="RS256")
        )

    def client_options(self, retry: GithubRetry | int | None = None) -> dict[str, Any]:
        """Keyword arguments for ``Github``/``GithubIntegration`` that suit tests: no pacing
        delays, and retries without back-off."""
        return {
            "base_url": self.base_url,
            "seconds_between_requests": 0,
            "seconds_between_writes": 0,
            "retry": retry if retry is not None else GithubRetry(total=3, backoff_factor=0),
            "timeout": 30,
        }

    def integration(self, retry: GithubRetry | int | None = None) -> GithubIntegration:
        """A PyGithub ``GithubIntegration`` authenticated as the App."""
        return GithubIntegration(auth=self.app_auth(), **self.client_options(retry))

    def client(self, installation_id: int = 1, retry: GithubRetry | int | None = None) -> Github:
        """A PyGithub ``Github`` acting as an installation (token fetched through the App JWT)."""
        return self.integration(retry).get_github_for_installation(installation_id)

    # ----- webhook deliveries ------------------------------------------------------------------
    def deliver(self, body: bytes, headers: dict[str, str]) -> HookDelivery:
        """Send a delivery to the App's webhook (``state.webhook_url``) as GitHub does,
        recording the attempt and what the App answered (0: no answer); the App can list
        the attempts and have them redelivered (``github_endpoints_hooks``)."""
        return github_endpoints_hooks.send(self.state, body, headers)

    def deny(self, installation_id: int, permission: str) -> None:
        """Take ``permission`` (``issues`` or ``pull_requests``) from an installation: its
        writes needing it answer 403 "Resource not accessible by integration"."""
        with self.state.lock:
            self.state.denied.setdefault(installation_id, set()).add(permission)

    # ----- recording and checks ---------------------------------------------------------------
    def requests(
        self, method: str | None = None, path: str | None = None, *, repo: str | None = None
    ) -> list[Call]:
        """Recorded calls with this method and exact path (None matches any), and only those
        under ``/repos/{repo}`` when ``repo`` is given."""
        prefix = f"/repos/{repo}"
        return [
            call
            for call in list(self.calls)
            if method in (None, call.method)
            and path in (None, call.path)
            and (repo is None or call.path == prefix or call.path.startswith(prefix + "/"))
        ]

    def check(self) -> None:
        """Fail when a response broke its schema, an endpoint is missing, or a handler crashed."""
        problems = (
            [f"schema: {e}" for e in self.schema_errors]
            + [f"unimplemented: {e}" for e in self.unimplemented]
            + [f"server error: {e}" for e in self.server_errors]
            + [f"credential leak: {e}" for e in self.leaks]
        )
        if problems:
            raise AssertionError("fake GitHub problems:\n" + "\n".join(problems))

    # ----- fault injection --------------------------------------------------------------------
    def fail_next(
        self,
        method: str,
        path_regex: str,
        status: int = 502,
        times: int = 1,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        *,
        landed: bool = False,
    ) -> None:
        """Answer the next ``times`` requests matching ``method`` and ``path_regex`` (searched in
        the path) with ``status`` instead of handling them; with ``landed``, handle them first
        (their changes take effect: a write that failed but landed)."""
        if body is None:
            message = HTTPStatus(status).phrase
            body = Shapes.error(status, "Server Error" if status >= 500 else message)
        with self.state.lock:
            self._faults.append(
                Fault(
                    method,
                    re.compile(path_regex),
                    status,
                    times,
                    dict(headers or {}),
                    body,
                    landed,
                )
            )

    def secondary_rate_limit(
        self, method: str, path_regex: str, times: int = 1, retry_after: int | None = 0
    ) -> None:
        """Answer like GitHub's secondary rate limit: 403, its message, and ``Retry-After``."""
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        body = Shapes.error(403, SECONDARY_RATE_LIMIT)
        self.fail_next(method, path_regex, 403, times, headers, body)

    def hold_next(self, method: str, path_regex: str, seconds: float) -> Hold:
        """Handle the next request matching ``method`` and ``path_regex`` as usual (its changes
        take effect at once), then wait ``seconds`` before answering, without holding the
        state lock: a test can kill the client meanwhile (wait on ``Hold.reached``)."""
        hold = Hold(method, re.compile(path_regex), seconds, threading.Event())
        with self.state.lock:
            self._holds.append(hold)
        return hold

    def cancel_holds(self) -> None:
        """Forget the holds not taken yet: every response is answered at once again."""
        with self.state.lock:
            self._holds.clear()

    def _take_hold(self, method: str, path: str) -> Hold | None:
        for hold in self._holds:
            if hold.method == method and hold.pattern.search(path):
                self._holds.remove(hold)
                return hold
        return None

    def _take_fault(self, method: str, path: str) -> Fault | None:
        for fault in self._faults:
            if fault.method == method and fault.remaining > 0 and fault.pattern.search(path):
                fault.remaining -= 1
                return fault
        return None

    # ----- serving ---
    def _serve_blob(
        self, method: str, path: str, query: dict[str, str], headers: Headers
    ) -> tuple[int, dict[str, str], bytes]:
        """The artifact storage: an archive by the signed link a download handed out (no
        GitHub credentials: a request carrying them is recorded in ``leaks``)."""
        with self.state.lock:
            token = path.removeprefix(BLOB_PREFIX).split("/", 1)[0]
            artifact, expires = self.state.blob_links.get(token, (None, None))
            if headers.get("Authorization"):
                self.leaks.append(f"{method} {path} carried an Authorization header")
            if method != "GET" or artifact is None or expires is None:
                status, payload = 404, b"BlobNotFound"
            elif expires <= datetime.now(UTC):
                status, payload = 403, b"AuthenticationFailed: Signed expiry time has passed"
            else:
                status, payload = 200, artifact.data
            self.calls.append(Call(method, path, query, None, status))
        media = "application/zip" if status == 200 else "text/plain"
        out = {"Content-Type": media, "Content-Length": str(len(payload))}
        return status, out, payload

    # ----- serving ----------------------------------------------------------------------------
    def _authenticate(self, route: Route, headers: Headers) -> int | None:
        scheme, _, credential = (headers.get("Authorization") or "").partition(" ")
        if route.auth == "jwt":
            if scheme.lower() != "bearer":
                raise ApiError(401, "A JSON web token could not be decoded")
            try:
                claims = jwt.decode(
                    credential,
                    self.public_key,
                    algorithms=["RS256"],
                    options={"require": ["exp", "iat", "iss"]},
                )
            except jwt.PyJWTError as error:
                raise ApiError(401, f"A JSON web token could not be decoded: {error}") from None
            if str(claims["iss"]) != str(self.app_id):
                raise ApiError(401, "Integration not found")
            if int(claims["exp"]) - int(claims["iat"]) > 600:
                raise ApiError(401, "'Expiration time' claim ('exp') is too far in the future")
            return None
        if scheme.lower() not in ("token", "bearer"):
            raise ApiError(401, "Requires authentication")
        installation, expires = self.state.tokens.get(credential, (None, None))
        if installation is None or expires is None or expires <= datetime.now(UTC):
            raise ApiError(401, "Bad credentials")
        return installation

    def _dispatch(
        self, method: str, path: str, query: dict[str, str], headers: Headers, body: Any
    ) -> tuple[Reply, Any]:
        """The reply and the matched operation (None when GitHub documents no such path)."""
        fault = self._take_fault(method, path)
        match = self.openapi.match(method, path)
        operation = match.operation if match else None
        if fault is not None and not fault.landed:
            return Reply(fault.status, fault.body, dict(fault.headers)), operation
        if match is None:
            return Reply(404, Shapes.error(404, "Not Found")), None
        route = ROUTES.get((method, match.operation.template))
        if route is None:
            self.unimplemented.append(f"{method} {match.operation.template}")
            return Reply(404, Shapes.error(404, "Not Found (not implemented by the fake)")), None
        try:
            installation = self._authenticate(route, headers)
            problem = self.openapi.request_problem(match.operation, body)
            if problem is not None:
                raise ApiError(422, problem)
            accept = headers.get("Accept") or ""
            request = Request(method, path, match.params, query, body, installation, accept)
            reply = route.handler(self.api, request)
            if fault is not None:  # landed: handled, then answered with the fault
                return Reply(fault.status, fault.body, dict(fault.headers)), operation
            return reply, operation
        except ApiError as error:
            return Reply(
                error.status, Shapes.error(error.status, error.message, error.errors)
            ), operation

    def handle(
        self, method: str, raw_path: str, headers: Headers, raw_body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """Answer one HTTP request: (status, headers, body bytes)."""
        url = urllib.parse.urlsplit(raw_path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        if url.path.startswith(BLOB_PREFIX):
            return self._serve_blob(method, url.path, query, headers)
        body: Any = None
        with self.state.lock:
            try:
                body = json.loads(raw_body) if raw_body.strip() else None
                reply, operation = self._dispatch(method, url.path, query, headers, body)
            except json.JSONDecodeError:
                reply, operation = Reply(400, Shapes.error(400, "Problems parsing JSON")), None
            except Exception:
                self.server_errors.append(f"{method} {raw_path}: {traceback.format_exc()}")
                reply, operation = Reply(500, Shapes.error(500, "fake GitHub crashed")), None
            raw = isinstance(reply.body, bytes)  # the raw media type: no JSON to check
            if not raw:
                # Whatever a builder left pointing at api.github.com must point here (PyGithub
                # refuses to follow URLs on another host).
                reply.body = retarget(reply.body, [(API, self.base_url)])
            if operation is not None and reply.body is not None and not raw:
                errors = self.openapi.errors(operation, reply.status, reply.body, reply.media)
                if errors:
                    self.schema_errors.extend(errors)
                    reply = Reply(500, Shapes.error(500, "invalid response: " + errors[0]))
            if isinstance(reply.body, bytes):
                payload, media = reply.body, "github.v3; param=raw"
            else:
                payload = b"" if reply.body is None else json.dumps(reply.body).encode()
                param = reply.media.removeprefix("application/vnd.github.")
                media = "github.v3; " + ("" if param == reply.media else f"param={param}; ")
                media += "format=json"
            cache: dict[str, str] = {}
            if method == "GET" and reply.status == 200 and not isinstance(reply.body, bytes):
                cache = {**CACHE_HEADERS, "ETag": etag_of(payload)}
                if not_modified(headers.get("If-None-Match"), cache["ETag"]):
                    reply, payload = Reply(304, None), b""
            self.calls.append(Call(method, url.path, query, body, reply.status))
            remaining = self.rate_remaining
            token = (headers.get("Authorization") or "").partition(" ")[2]
            installation = self.state.tokens.get(token, (None, None))[0]
            cost = 0 if reply.status == 304 else self.rate_cost  # GitHub: a 304 is free
            if installation in self.installation_rates:
                remaining = self.installation_rates[installation]
                self.installation_rates[installation] = max(0, remaining - cost)
            elif token.startswith("ghs_"):  # an installation's request
                self.rate_remaining = max(0, remaining - cost)
            hold = self._take_hold(method, url.path)
        if hold is not None:
            hold.reached.set()
            time.sleep(hold.seconds)
        out = {
            "Date": email.utils.formatdate(usegmt=True),
            "Content-Type": f"{reply.media}; charset=utf-8",
            "Content-Length": str(len(payload)),
            "X-GitHub-Media-Type": media,
            "X-RateLimit-Limit": "5000",
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": str(int(datetime.now(UTC).timestamp()) + 3600),
            "X-GitHub-Request-Id": f"FAKE:{len(self.calls)}",
            **cache,
            **reply.headers,
        }
        if reply.status == 304:  # no body, so no length or type of one
            for name in ("Content-Type", "Content-Length", "X-GitHub-Media-Type"):
                del out[name]
        return reply.status, out, payload
