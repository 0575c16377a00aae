"""W&B run history through the real ``wandb`` public API client.

Fast path only: ``lazy=False`` with a large ``per_page`` (summaries arrive with
the page, never one request per run), ``api.flush()`` before each read, an
explicit entity, and server-side MongoDB-style filters.  wandb's transport
retries (429/5xx, ``Retry-After``) are capped so an outage becomes a clear
``HistoryUnavailable`` within a bounded time.  wandb writes nothing outside a
private temp dir and reports nothing home (see ``prepare_environment``).
Per-step series (``SourceSpec.series``) are read with ``Run.scan_history`` per run and
metric, paged, over the run's last ``MAX_REMOTE_STEPS`` steps (``fetch_series``).
Errors are told in our own words (wandb's text, which may quote W&B's response,
is logged at WARNING).
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from bot.adapters.history.wandb_series import quiet_scan_cleanup, run_series
from bot.core import deadline
from bot.core.history.runs import Progress, SourceRun, make_history, numeric_summary
from bot.core.history.series import (
    MAX_REMOTE_STEPS,
    MAX_SERIES_RUNS,
    RunSeries,
    attach,
    newest_finished,
    requested,
)
from bot.core.history.sources import BadHistory, HistoryError, HistoryNotFound, HistoryUnavailable
from bot.core.models import History, Run, RunState, SourceSpec, as_utc

if TYPE_CHECKING:
    import wandb

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.wandb.ai"

# W&B run states and the state each one counts as here
STATES: dict[str, RunState] = {
    "finished": "finished",
    "failed": "failed",
    "crashed": "crashed",
    "killed": "killed",
    "preempted": "killed",
    "running": "running",
    "pending": "running",
    "preempting": "running",
}
ALL_STATES: frozenset[str] = frozenset(STATES.values())

_DIR_VARS = ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR")
_QUIET_VARS = {
    "WANDB_ERROR_REPORTING": "false",  # wandb-core starts with --no-observability
    "WANDB_SILENT": "true",
    "WANDB_MODE": "offline",  # affects only wandb.init(); the public API still works
    "WANDB_DISABLE_CODE": "true",
    "WANDB_DISABLE_GIT": "true",
}
_ENV_LOCK = threading.Lock()
_private_dir: str | None = None


def prepare_environment() -> str:
    """Confine wandb to a private temp dir and silence its reporting (idempotent).

    Variables the operator already set are kept.  Returns the private dir.
    """
    global _private_dir
    with _ENV_LOCK:
        if _private_dir is None:
            _private_dir = tempfile.mkdtemp(prefix="threshold-bot-wandb-")
            atexit.register(shutil.rmtree, _private_dir, True)
        for var in _DIR_VARS:
            os.environ.setdefault(var, _private_dir)
        for var, value in _QUIET_VARS.items():
            os.environ.setdefault(var, value)
        quiet_scan_cleanup()
        return _private_dir


# --------------------------------------------------------------------------- pure


def wandb_time(value: datetime) -> str:
    """A datetime as W&B filters expect it: ISO 8601 in UTC without a zone."""
    return as_utc(value).replace(tzinfo=None).isoformat()


def wandb_filters(
    spec: SourceSpec, *, created_since: datetime | None = None, run_ids: Sequence[str] = ()
) -> dict[str, Any]:
    """The MongoDB-style W&B filter for ``spec``, optionally narrowed for an incremental sync.

    ``created_since`` and ``run_ids`` are OR-ed: runs created since the newest cached
    one, plus the cached runs that were still running, in a single query.
    """
    clauses: list[dict[str, Any]] = []
    if set(spec.states) != ALL_STATES:
        wanted = sorted(name for name, state in STATES.items() if state in spec.states)
        clauses.append({"state": {"$in": wanted}})
    if spec.tags:
        clauses.append({"tags": {"$in": list(spec.tags)}})
    if spec.group:
        clauses.append({"group": spec.group})
    if spec.job_type:
        clauses.append({"jobType": spec.job_type})
    if spec.name_regex:
        clauses.append({"display_name": {"$regex": spec.name_regex}})
    if spec.created_after:
        clauses.append({"created_at": {"$gte": wandb_time(spec.created_after)}})
    narrow: list[dict[str, Any]] = []
    if created_since is not None:
        narrow.append({"created_at": {"$gte": wandb_time(created_since)}})
    if run_ids:
        narrow.append({"name": {"$in": list(run_ids)}})
    if narrow:
        clauses.append(narrow[0] if len(narrow) == 1 else {"$or": narrow})
    if not clauses:
        return {}
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def source_run(attrs: Mapping[str, Any], summary_keys: Mapping[str, str]) -> SourceRun:
    """Build a run from W&B run attributes (``id`` is W&B's short run id)."""
    summary = numeric_summary(attrs.get("summary") or {}, summary_keys)
    try:
        run = Run(
            id=attrs["id"],
            name=attrs.get("name"),
            created_at=attrs["created_at"],
            state=STATES.get(str(attrs.get("state")), "crashed"),
            commit=attrs.get("commit") or None,
            tags=tuple(attrs.get("tags") or ()),
            summary=summary.metrics,
        )
    except KeyError as exc:
        raise BadHistory(f"W&B run {attrs.get('id')!r} is malformed: no {exc.args[0]}") from exc
    except ValidationError as exc:  # name the fields only: the values are W&B's data
        fields = ", ".join(sorted({".".join(map(str, e["loc"])) for e in exc.errors()}))
        raise BadHistory(f"W&B run {attrs.get('id')!r} is malformed: bad {fields}") from exc
    return SourceRun(
        run,
        summary.non_numeric,
        summary.non_finite,
        summary.flattened,
        summary.numeric_strings,
        summary.not_numbers,
    )


def failure_reason(message: str, timeout: float) -> str:
    """A user-facing reason for a wandb transport failure message, in our own words.

    The message may quote W&B's response (internal host names, data): it is searched for a
    status or a cause, never repeated.
    """
    lowered = message.lower()
    if re.search(r"\b(401|403)\b", message) or "not logged in" in lowered:
        return "W&B rejected the API key; check WANDB_API_KEY on the server"
    if re.search(r"\b429\b", message):
        return "W&B kept rate-limiting us (HTTP 429) after retries; try again later"
    status = re.search(r"\bHTTP (5\d\d)\b", message)
    if status:
        return f"W&B kept failing (HTTP {status.group(1)}) after retries; try again later"
    if "did not respond in time" in lowered or "timeout" in lowered or "deadline" in lowered:
        return f"W&B did not answer within {timeout:g} s; try again later"
    if "connection refused" in lowered or "no such host" in lowered or "dial tcp" in lowered:
        return "could not connect to the W&B server; check WANDB_BASE_URL"
    status = re.search(r"\bHTTP (\d{3})\b", message)
    if status:
        return f"W&B answered HTTP {status.group(1)}"
    return "the W&B request failed (details in the App's log)"


def with_entity(spec: SourceSpec, default_entity: str | None) -> SourceSpec:
    """A W&B ``spec`` with ``default_entity`` (``WANDB_ENTITY``) filled in when it names none."""
    if spec.kind != "wandb" or spec.entity or not default_entity:
        return spec
    return spec.model_copy(update={"entity": default_entity})


# --------------------------------------------------------------------------- adapter


class WandbSource:
    """A ``HistorySource`` for ``SourceSpec(kind="wandb")`` over the real wandb client.

    ``timeout`` bounds each request in seconds (wandb's ``Api(timeout=)`` and the
    per-attempt HTTP timeout); ``retries`` and ``retry_wait`` (min, max seconds of
    backoff) cap wandb-core's retries of 429/5xx, which by default are 20 tries
    with 2-60 s waits.  Defaults give up on a persistent 5xx after ~8 s per page.
    One ``wandb.Api`` is made on first use and reused (one ``Viewer`` request).
    ``history_page`` steps are read per history request; ``series_runs`` bounds how many
    runs ``fetch`` reads series of, ``series_steps`` how many last steps of each.
    """

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None = None,
        default_entity: str | None = None,
        timeout: int = 19,
        per_page: int = 1000,
        retries: int = 3,
        retry_wait: tuple[float, float] = (1.0, 8.0),
        history_page: int = 1000,
        series_runs: int = MAX_SERIES_RUNS,
        series_steps: int = MAX_REMOTE_STEPS,
    ) -> None:
        self.api_key = api_key
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.default_entity = default_entity
        self.timeout = timeout
        self.per_page = per_page
        self.retries = retries
        # wandb-core ignores waits under one second (it falls back to 2-60 s)
        self.retry_wait = (max(1.0, retry_wait[0]), max(1.0, retry_wait[1]))
        self.history_page = history_page
        self.series_runs = series_runs
        self.series_steps = series_steps
        self._api: wandb.Api | None = None
        self._lock = threading.Lock()

    def fetch(self, spec: SourceSpec) -> History:
        """Every run of ``spec``, sorted, with reading statistics, and the series of
        ``spec.series`` for the newest ``series_runs`` finished runs."""
        runs, duplicates = self._read(spec, None, (), None)
        history = make_history(runs, spec.describe(), duplicates=duplicates)
        if not requested(spec):
            return history
        targets = newest_finished(history.runs, self.series_runs)
        wanted = dict.fromkeys(targets, requested(spec))
        return attach(history, dict(self.fetch_series(spec, wanted)))

    def fetch_series(
        self, spec: SourceSpec, wanted: Mapping[str, Sequence[str]]
    ) -> Iterator[tuple[str, RunSeries]]:
        """The series of the listed metrics of each run of ``wanted`` (in its order), read
        with ``scan_history``: a metric's key is its ``summary_keys`` entry, else its name.
        Runs W&B no longer has are left out; the job's deadline is checked per run."""
        entity, project = self._path(spec)
        where = f"{entity}/{project} at {self.base_url}"
        prepare_environment()
        ids = list(wanted)
        for start in range(0, len(ids), self.per_page):
            chunk = ids[start : start + self.per_page]
            with self._lock, self._translated(where):
                api = self._client()
                api.flush()  # type: ignore[no-untyped-call]
                api.settings["entity"] = entity
                found = {
                    run.id: run
                    for run in api.runs(
                        f"{entity}/{project}",
                        filters={"name": {"$in": chunk}},
                        per_page=self.per_page,
                        lazy=True,
                    )
                }
            for run_id in chunk:
                if run_id not in found:
                    continue
                deadline.check(f"reading the per-step history of W&B run {run_id}")
                keys = {m: spec.summary_keys.get(m, m) for m in wanted[run_id]}
                with self._lock, self._translated(where):
                    series = run_series(found[run_id], keys, self.history_page, self.series_steps)
                yield run_id, series

    def fetch_runs(
        self,
        spec: SourceSpec,
        *,
        created_since: datetime | None = None,
        run_ids: Sequence[str] = (),
        progress: Progress | None = None,
    ) -> list[SourceRun]:
        """Runs of ``spec`` (all, or created since a time plus the given ids), deduplicated."""
        return self._read(spec, created_since, run_ids, progress)[0]

    def _read(
        self,
        spec: SourceSpec,
        created_since: datetime | None,
        run_ids: Sequence[str],
        progress: Progress | None,
    ) -> tuple[list[SourceRun], int]:
        entity, project = self._path(spec)
        filters = wandb_filters(spec, created_since=created_since, run_ids=run_ids)
        where = f"{entity}/{project} at {self.base_url}"
        prepare_environment()  # before wandb is first imported
        with self._lock, self._translated(where):
            api = self._client()
            # Api caches a Runs iterator per (path, filters, order): start afresh
            api.flush()  # type: ignore[no-untyped-call]
            # runs() resolves the default entity even for an ENTITY/PROJECT path: an
            # explicit one saves a GetDefaultEntity query
            api.settings["entity"] = entity
            pages = api.runs(
                f"{entity}/{project}", filters=filters, per_page=self.per_page, lazy=False
            )
            runs: dict[str, SourceRun] = {}
            read = 0
            for run in pages:
                read += 1
                runs[run.id] = source_run(_attrs(run), spec.summary_keys)  # last copy wins
                if progress is not None:
                    progress(read, len(pages))
        return list(runs.values()), read - len(runs)

    def _path(self, spec: SourceSpec) -> tuple[str, str]:
        entity = spec.entity or self.default_entity
        if not spec.project:
            raise HistoryNotFound("no W&B project given: name it in the repository config")
        if not entity:
            raise HistoryNotFound(
                f"no W&B entity given for project {spec.project!r}: set 'entity' in the "
                "repository config or WANDB_ENTITY on the server"
            )
        return entity, spec.project

    def _client(self) -> wandb.Api:
        if self._api is None:
            if not self.api_key:
                raise HistoryUnavailable(
                    f"no W&B API key configured for {self.base_url}: "
                    "set WANDB_API_KEY on the server"
                )
            import wandb

            with _ENV_LOCK:  # Api copies wandb's global settings when it is created
                wandb.setup(
                    wandb.Settings(
                        x_graphql_retry_max=self.retries,
                        x_graphql_retry_wait_min_seconds=self.retry_wait[0],
                        x_graphql_retry_wait_max_seconds=self.retry_wait[1],
                        x_graphql_timeout_seconds=float(self.timeout),
                    )
                )
                overrides = {"base_url": self.base_url}
                if self.default_entity:
                    overrides["entity"] = self.default_entity
                self._api = wandb.Api(
                    overrides=overrides, api_key=self.api_key, timeout=self.timeout
                )
        return self._api

    @contextmanager
    def _translated(self, where: str) -> Iterator[None]:
        """Turn wandb's exceptions into ``HistoryError``s naming the project."""
        from wandb.errors import AuthenticationError, CommError, UsageError
        from wandb.sdk.lib.service.service_connection import WandbApiFailedError

        try:
            yield
        except HistoryError:
            raise
        except AuthenticationError as exc:
            log.warning("W&B %s: %s", where, exc)
            # wandb wraps every failure of the key check in AuthenticationError: an outage
            # (5xx, 429, a timeout) during it is an outage, not a rejected key
            reason = failure_reason(_message(exc), self.timeout)
            if reason.startswith(("the W&B request failed", "W&B answered HTTP")):
                reason = "W&B rejected the API key; check WANDB_API_KEY on the server"
            raise HistoryUnavailable(f"W&B history unavailable for {where}: {reason}") from exc
        except (WandbApiFailedError, CommError, UsageError) as exc:
            log.warning("W&B %s: %s", where, _message(exc))
            reason = failure_reason(_message(exc), self.timeout)
            raise HistoryUnavailable(f"W&B history unavailable for {where}: {reason}") from exc
        except ValueError as exc:
            if "could not find project" not in str(exc).lower():
                raise
            raise HistoryNotFound(
                f"W&B project {where} not found: check the entity and project (the repository "
                "config, or the project named in the threshold script) and that the server's "
                "API key can read it"
            ) from exc


def _message(exc: Exception) -> str:
    """The error's message, led by the HTTP status wandb-core reports apart from it.

    wandb-core puts only the response body's message in a non-retried failure
    (a 401 reads "injected fault" or "permission denied"); the status is in
    ``exc.response.http_status`` (0 when none).
    """
    status = getattr(getattr(exc, "response", None), "http_status", 0)
    return f"HTTP {status}: {exc}" if isinstance(status, int) and status > 0 else str(exc)


def _attrs(run: Any) -> dict[str, Any]:
    """The attributes of a ``wandb.apis.public.Run`` that a ``Run`` is built from."""
    return {
        "id": run.id,
        "name": run.name,
        "created_at": run.created_at,
        "state": run.state,
        "commit": run.commit,
        "tags": run.tags,
        "summary": run.summary_metrics,
    }
