"""A local fake of the W&B GraphQL API, driven in tests by the real ``wandb.Api``.

graphql-core executes the client's real query documents against a hand-written
subset of the W&B schema, so only the selected fields are returned (which keeps
the client's lazy-loading logic honest).  Runs live in a mutable in-memory
store; MongoDB-style run filters are evaluated here as the W&B server does.
Faults (401, 429 / 5xx with ``Retry-After``, page overlaps that duplicate
runs) can be injected, and every request is counted.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from graphql import GraphQLError, GraphQLResolveInfo, build_schema, graphql_sync

from tests.fakes import wandb_history
from tests.fakes.local_http import serving

API_KEY = "fake-" + "0123456789abcdef" * 3  # shaped like a real key: [\w-]{40,}

SDL = """
scalar JSONString
scalar JSON
scalar DateTime

type Query {
  viewer: User
  project(name: String!, entityName: String): Project
}

type User {
  id: ID!
  name: String
  username: String
  email: String
  entity: String
  flags: JSONString
  teams: TeamConnection
}

type TeamConnection { edges: [TeamEdge!]! }
type TeamEdge { node: Team! }
type Team { name: String! }

type Project {
  id: ID!
  internalId: ID!
  name: String!
  entityName: String!
  readOnly: Boolean
  runCount(filters: JSONString): Int!
  runs(filters: JSONString, after: String, first: Int, order: String): RunConnection!
  run(name: String!): Run
}

type RunConnection {
  edges: [RunEdge!]!
  pageInfo: PageInfo!
}

type RunEdge { node: Run!  cursor: String! }
type PageInfo { endCursor: String  hasNextPage: Boolean! }

type Run {
  id: ID!
  name: String!
  projectId: Int!
  displayName: String
  sweepName: String
  state: String!
  tags: [String!]!
  config: JSONString
  group: String
  jobType: String
  commit: String
  readOnly: Boolean
  createdAt: DateTime!
  heartbeatAt: DateTime
  description: String
  notes: String
  systemMetrics: JSONString
  summaryMetrics: JSONString
  historyLineCount: Int
  historyKeys: JSON
  user: User
"""
SDL += wandb_history.RUN_FIELDS + "}\n" + wandb_history.SDL  # Run's history fields, types

SCHEMA = build_schema(SDL)

# the W&B filter names of run attributes, and the key of each in a stored run
_FIELDS = {
    "name": "name",
    "display_name": "displayName",
    "displayName": "displayName",
    "state": "state",
    "tags": "tags",
    "group": "group",
    "jobType": "jobType",
    "job_type": "jobType",
    "created_at": "createdAt",
    "createdAt": "createdAt",
    "commit": "commit",
}


def wandb_time(value: datetime) -> str:
    """Format a datetime as W&B does: ISO 8601 in UTC without a zone suffix."""
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="seconds")


@dataclass
class FakeRun:
    """One run as the fake server stores it."""

    name: str  # the short run id (``run.id`` in the client)
    created_at: datetime
    state: str = "finished"
    display_name: str | None = None
    tags: list[str] = field(default_factory=list)
    group: str | None = None
    job_type: str | None = None
    commit: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)  # rows, each with its _step
    history_asked: list[tuple[str, ...]] = field(default_factory=list)  # keys of each page read

    def node(self, project_id: int) -> dict[str, Any]:
        """The GraphQL object of this run (JSON fields as strings, like W&B)."""
        return {
            "id": base64.b64encode(f"Run:v1:{self.name}".encode()).decode(),
            "name": self.name,
            "projectId": project_id,
            "displayName": self.display_name or self.name,
            "sweepName": None,
            "state": self.state,
            "tags": list(self.tags),
            "config": json.dumps(self.config),
            "group": self.group,
            "jobType": self.job_type,
            "commit": self.commit,
            "readOnly": False,
            "createdAt": wandb_time(self.created_at),
            "heartbeatAt": wandb_time(self.created_at),
            "description": None,
            "notes": None,
            "systemMetrics": "{}",
            "summaryMetrics": json.dumps(self.summary),
            "historyLineCount": len(self.history),
            "historyKeys": wandb_history.history_keys(self.history),
            "parquetHistory": lambda _info, **_a: wandb_history.parquet_history(),
            "sampledHistory": lambda _info, **a: wandb_history.sampled_history(
                self.history, a["specs"], self.history_asked
            ),
            "user": {"id": "1", "name": "CI", "username": "ci"},
        }

    def field_value(self, key: str) -> Any:
        """A stored attribute by its GraphQL name, for filter evaluation."""
        return {
            "name": self.name,
            "displayName": self.display_name or self.name,
            "state": self.state,
            "tags": self.tags,
            "group": self.group,
            "jobType": self.job_type,
            "createdAt": self.created_at.astimezone(UTC).replace(tzinfo=None),
            "commit": self.commit,
        }[key]


NIGHTLY_START = datetime(2026, 7, 1, 8, 0, tzinfo=UTC)
NIGHTLY_STATES = ("finished", "finished", "finished", "failed", "running", "crashed")


def nightly_run(i: int, **changes: Any) -> FakeRun:
    """Run ``i`` of a synthetic hourly CI series; every attribute derives from ``i``."""
    run = FakeRun(
        name=f"run{i:05d}",
        created_at=NIGHTLY_START + timedelta(hours=i),
        state=NIGHTLY_STATES[i % len(NIGHTLY_STATES)],
        display_name=f"nightly_{i}" if i % 3 else f"adhoc_{i}",
        tags=["nightly"] if i % 2 else ["manual"],
        group="gsm8k" if i % 4 else "math",
        job_type="eval" if i % 5 else "train",
        commit=f"{i:040x}",
        summary={"eval": {"acc": 0.5 + i / 1000}, "tokens": 200 + i, "_step": i},
    )
    for key, value in changes.items():
        setattr(run, key, value)
    return run


def _coerce(value: Any, like: Any) -> Any:
    if isinstance(like, datetime) and isinstance(value, str):
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed
    return value


def _compare(actual: Any, op: str, operand: Any) -> bool:
    values = actual if isinstance(actual, list) else [actual]
    if op == "$in":
        return any(v in operand for v in values)
    if op == "$nin":
        return not any(v in operand for v in values)
    if op == "$ne":
        return operand not in values
    if op == "$regex":
        return any(isinstance(v, str) and re.search(operand, v) for v in values)
    if op == "$exists":
        return (actual is not None) == bool(operand)
    checks = {
        "$eq": lambda a, b: a == b,
        "$gt": lambda a, b: a > b,
        "$gte": lambda a, b: a >= b,
        "$lt": lambda a, b: a < b,
        "$lte": lambda a, b: a <= b,
    }
    if op not in checks:
        raise GraphQLError(f"unsupported filter operator {op}")
    return any(v is not None and checks[op](v, _coerce(operand, v)) for v in values)


def matches(run: FakeRun, query: Mapping[str, Any]) -> bool:
    """Evaluate a MongoDB-style W&B run filter against one run."""
    for key, cond in query.items():
        if key == "$and":
            if not all(matches(run, sub) for sub in cond):
                return False
        elif key == "$or":
            if not any(matches(run, sub) for sub in cond):
                return False
        else:
            if key not in _FIELDS:
                raise GraphQLError(f"unsupported filter field {key}")
            actual = run.field_value(_FIELDS[key])
            ops = cond if isinstance(cond, dict) else {"$eq": cond}
            if not all(_compare(actual, op, operand) for op, operand in ops.items()):
                return False
    return True


@dataclass
class Fault:
    """An injected HTTP failure for the next matching requests."""

    status: int
    count: int
    retry_after: float | None = None
    operation: str | None = None  # only requests of this operation, e.g. "Runs"
    after: int = 0  # let this many matching requests through first
    message: str = "injected fault"  # the error message of the response body


class FakeWandb:
    """State of the fake W&B server: projects, runs, faults and request counts."""

    def __init__(self, api_key: str = API_KEY) -> None:
        self.api_key = api_key
        self.projects: dict[tuple[str, str], dict[str, FakeRun]] = {}
        self.requests: Counter[str] = Counter()
        self.projects_asked: Counter[tuple[str, str]] = Counter()  # (entity, project) queried
        self.page_overlap = 0  # repeat this many runs of the previous page (duplicates)
        self.faults: list[Fault] = []
        self.lock = threading.Lock()

    # ------------------------------------------------------------------ store
    def add_project(self, entity: str, project: str) -> None:
        """Create an empty project."""
        with self.lock:
            self.projects.setdefault((entity, project), {})

    def add_run(self, entity: str, project: str, run: FakeRun) -> None:
        """Add (or replace) a run in a project, creating the project if needed."""
        with self.lock:
            self.projects.setdefault((entity, project), {})[run.name] = run

    def update_run(self, entity: str, project: str, name: str, **changes: Any) -> None:
        """Change attributes of a stored run (e.g. ``state``, ``summary``)."""
        with self.lock:
            run = self.projects[(entity, project)][name]
            for key, value in changes.items():
                setattr(run, key, value)

    def delete_run(self, entity: str, project: str, name: str) -> None:
        """Remove a run, as deleting it in the W&B UI does."""
        with self.lock:
            del self.projects[(entity, project)][name]

    def fail(
        self,
        status: int,
        count: int = 1,
        retry_after: float | None = None,
        operation: str | None = None,
        after: int = 0,
        message: str = "injected fault",
    ) -> None:
        """Answer ``count`` requests of ``operation`` with ``status``, after ``after`` good ones."""
        with self.lock:
            self.faults.append(Fault(status, count, retry_after, operation, after, message))

    @property
    def total_requests(self) -> int:
        """Every HTTP request received, failed ones included."""
        return sum(self.requests.values())

    # ------------------------------------------------------------------ GraphQL
    def _take_fault(self, operation: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.count > 0 and fault.operation in (None, operation):
                    if fault.after > 0:
                        fault.after -= 1
                        continue
                    fault.count -= 1
                    return fault
        return None

    def _project(self, _info: GraphQLResolveInfo, **args: Any) -> Any:
        entity = args.get("entityName") or ""
        key = (entity, args["name"])
        with self.lock:
            self.projects_asked[key] += 1
        if key not in self.projects:
            return None
        project_id = sorted(self.projects).index(key) + 1
        return {
            "id": f"UHJvamVjdDo{project_id}",
            "internalId": str(project_id),
            "name": args["name"],
            "entityName": entity,
            "readOnly": False,
            "runCount": lambda _info, **a: len(self._select(key, a.get("filters"))),
            "runs": lambda _info, **a: self._runs(key, project_id, a),
            "run": lambda _info, **a: self._run(key, project_id, a["name"]),
        }

    def _run(self, key: tuple[str, str], project_id: int, name: str) -> Any:
        with self.lock:
            run = self.projects[key].get(name)
        return None if run is None else run.node(project_id)

    def _select(self, key: tuple[str, str], filters: str | None) -> list[FakeRun]:
        query = json.loads(filters) if filters else {}
        with self.lock:
            runs = [r for r in self.projects[key].values() if matches(r, query)]
        return sorted(runs, key=lambda r: (r.created_at, r.name))

    def _runs(self, key: tuple[str, str], project_id: int, args: dict[str, Any]) -> Any:
        runs = self._select(key, args.get("filters"))
        if (args.get("order") or "+created_at").startswith("-"):
            runs.reverse()
        start = 0
        if args.get("after"):
            start = int(base64.b64decode(args["after"]).decode().split(":")[1]) + 1
            start = max(0, start - self.page_overlap)
        first = args.get("first") or 50
        page = runs[start : start + first]
        edges = [
            {
                "node": run.node(project_id),
                "cursor": base64.b64encode(f"offset:{start + i}".encode()).decode(),
            }
            for i, run in enumerate(page)
        ]
        return {
            "edges": edges,
            "pageInfo": {
                "endCursor": edges[-1]["cursor"] if edges else None,
                "hasNextPage": start + first < len(runs),
            },
        }

    def execute(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Execute one GraphQL request body and return the response object."""
        root = {
            "viewer": {
                "id": "VXNlcjox",
                "name": "CI",
                "username": "ci",
                "email": "ci@example.invalid",
                "entity": "ci",
                "flags": "{}",
                "teams": {"edges": []},
            },
            "project": self._project,
        }
        result = graphql_sync(
            SCHEMA,
            body["query"],
            root_value=root,
            variable_values=body.get("variables") or {},
            operation_name=body.get("operationName") or None,
        )
        out: dict[str, Any] = {"data": result.data}
        if result.errors:
            out["errors"] = [{"message": e.message} for e in result.errors]
        return out

    # ------------------------------------------------------------------ HTTP
    def handle(self, headers: Mapping[str, str], raw: bytes) -> tuple[int, dict[str, str], bytes]:
        """Answer one ``POST /graphql``: status, extra headers and JSON body."""
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, {}, b'{"errors":[{"message":"bad JSON"}]}'
        operation = body.get("operationName") or _operation_name(body.get("query", ""))
        with self.lock:
            self.requests[operation] += 1
        fault = self._take_fault(operation)
        if fault is not None:
            extra = {} if fault.retry_after is None else {"Retry-After": f"{fault.retry_after:g}"}
            answer = json.dumps({"errors": [{"message": fault.message}]}).encode()
            return fault.status, extra, answer
        if _api_key(headers.get("Authorization", "")) != self.api_key:
            return 401, {}, b'{"errors":[{"message":"user is not logged in"}]}'
        return 200, {}, json.dumps(self.execute(body)).encode()


def _operation_name(query: str) -> str:
    match = re.search(r"\b(?:query|mutation)\s+(\w+)", query)
    return match.group(1) if match else "anonymous"


def _api_key(authorization: str) -> str | None:
    if not authorization.startswith("Basic "):
        return None
    user, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
    return password if user == "api" else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.split("?")[0] != "/graphql":
            self._send(404, {}, b"{}")
            return
        status, extra, body = self.server.fake.handle(dict(self.headers), raw)
        self._send(status, extra, body)

    def _send(self, status: int, extra: Mapping[str, str], body: bytes) -> None:
        lines = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}"]
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in extra.items()]
        # headers and body in one write: two small writes cost ~40 ms of Nagle delay
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeWandb) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake


@contextmanager
def serve(fake: FakeWandb) -> Iterator[str]:
    """Serve ``fake`` on 127.0.0.1 (free port) and yield its base URL."""
    with serving(_Server(fake)) as url:
        yield url
