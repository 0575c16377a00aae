"""MLflow run history through the real ``mlflow`` tracking client.

Runs of one experiment (by name) are read page by page with ``search_runs``;
a run's commit is its ``mlflow.source.git.commit`` tag and its summary the
latest value of each metric; its tags are its user tag keys.  Start time, run
ids and a single state are filtered by the server; several states, tags, group
(a ``group`` tag), job type (a ``job_type`` tag) and the name regex here.
MLflow filter strings have no OR, so an incremental read is two searches: runs
started since a time, and the runs asked for by id.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from bot.core.history.runs import Progress, SourceRun, make_history, numeric_summary
from bot.core.history.sources import HistoryError, HistoryNotFound, HistoryUnavailable
from bot.core.models import History, Run, RunState, SourceSpec, as_utc

if TYPE_CHECKING:
    from mlflow.entities import Run as MlflowRun
    from mlflow.tracking import MlflowClient

COMMIT_TAG = "mlflow.source.git.commit"
STATES: dict[str, RunState] = {
    "FINISHED": "finished",
    "FAILED": "failed",
    "KILLED": "killed",
    "RUNNING": "running",
    "SCHEDULED": "running",
}
_ID_CHUNK = 100


def prepare_environment() -> None:
    """Turn off MLflow's telemetry and bound its HTTP retries; call before importing mlflow.

    MLflow reads these from the environment on every request; variables the
    operator already set are kept (``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` defaults
    to 7 with exponential backoff in MLflow itself: minutes during an outage).
    """
    defaults = {
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "true",
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": "19",
    }
    for var, value in defaults.items():
        os.environ.setdefault(var, value)


# --------------------------------------------------------------------------- pure


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def mlflow_filter(spec: SourceSpec, *, started_since: datetime | None = None) -> str:
    """The server-side part of ``spec`` as an MLflow search filter string."""
    clauses: list[str] = []
    statuses = [name for name, state in STATES.items() if state in spec.states]
    if len(statuses) == 1:  # MLflow compares status with '=' only; more are filtered here
        clauses.append(f"attributes.status = {_quote(statuses[0])}")
    for since in (spec.created_after, started_since):
        if since is not None:
            millis = int(as_utc(since).timestamp() * 1000)
            clauses.append(f"attributes.start_time >= {millis}")
    return " AND ".join(clauses)


def ids_filter(base: str, run_ids: Sequence[str]) -> str:
    """``base`` narrowed to the given run ids."""
    clause = f"attributes.run_id IN ({', '.join(_quote(i) for i in run_ids)})"
    return f"{base} AND {clause}" if base else clause


def wanted(spec: SourceSpec, status: str, name: str | None, tags: dict[str, str]) -> bool:
    """The client-side filters: states, tag keys, group and job-type tags, name regex."""
    if STATES.get(status, "crashed") not in spec.states:
        return False
    if spec.tags and not set(spec.tags) & set(tags):
        return False
    if spec.group and tags.get("group") != spec.group:
        return False
    if spec.job_type and tags.get("job_type") != spec.job_type:
        return False
    return not (spec.name_regex and not re.search(spec.name_regex, name or ""))


def source_run(
    run_id: str,
    name: str | None,
    status: str,
    start_time_ms: int,
    tags: dict[str, str],
    metrics: dict[str, float],
    summary_keys: dict[str, str],
) -> SourceRun:
    """Build a run from the fields of an MLflow run."""
    summary = numeric_summary(metrics, summary_keys)
    run = Run(
        id=run_id,
        name=name,
        created_at=datetime.fromtimestamp(start_time_ms / 1000, tz=UTC),
        state=STATES.get(status, "crashed"),
        commit=tags.get(COMMIT_TAG) or None,
        tags=tuple(sorted(k for k in tags if not k.startswith("mlflow."))),
        summary=summary.metrics,
    )
    return SourceRun(run, summary.non_numeric, summary.non_finite)


# --------------------------------------------------------------------------- adapter


class MlflowSource:
    """A ``HistorySource`` for ``SourceSpec(kind="mlflow")`` over the real MLflow client."""

    def __init__(self, *, tracking_uri: str | None = None, per_page: int = 1000) -> None:
        self.tracking_uri = tracking_uri
        self.per_page = per_page
        self._lock = threading.Lock()

    def fetch(self, spec: SourceSpec) -> History:
        """Every run of ``spec``'s experiment, sorted, with reading statistics."""
        return make_history(self.fetch_runs(spec), spec.describe())

    def fetch_runs(
        self,
        spec: SourceSpec,
        *,
        created_since: datetime | None = None,
        run_ids: Sequence[str] = (),
        progress: Progress | None = None,
    ) -> list[SourceRun]:
        """Runs of ``spec`` (all, or started since a time plus the given ids), deduplicated."""
        uri = spec.tracking_uri or self.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            raise HistoryNotFound(
                f"no MLflow tracking URI for {spec.describe()}: set 'tracking_uri' in the "
                "repository config or MLFLOW_TRACKING_URI on the server"
            )
        if not spec.experiment:
            raise HistoryNotFound("no MLflow experiment given: name it in the repository config")
        where = f"experiment {spec.experiment!r} at {uri}"
        prepare_environment()
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise HistoryUnavailable(
                f"{spec.describe()}: this server has no MLflow client; "
                "install threshold-bot with the 'mlflow' extra"
            ) from None

        with self._lock, self._translated(where):
            client = MlflowClient(tracking_uri=uri)
            experiment = client.get_experiment_by_name(spec.experiment)
            if experiment is None:
                raise HistoryNotFound(
                    f"MLflow {where} not found: check the experiment name in the repository config"
                )
            base = mlflow_filter(spec)
            filters = [base] if created_since is None and not run_ids else []
            if created_since is not None:
                filters.append(mlflow_filter(spec, started_since=created_since))
            filters += [
                ids_filter(base, run_ids[i : i + _ID_CHUNK])
                for i in range(0, len(run_ids), _ID_CHUNK)
            ]
            runs: dict[str, SourceRun] = {}
            for text in filters:
                for run in self._search(client, experiment.experiment_id, text):
                    item = _convert(run, spec)
                    if item is not None:
                        runs[item.run.id] = item
                    if progress is not None:
                        progress(len(runs), None)
        return list(runs.values())

    def _search(self, client: MlflowClient, experiment_id: str, text: str) -> Iterator[MlflowRun]:
        token: str | None = None
        while True:
            page = client.search_runs(
                [experiment_id],
                filter_string=text,
                max_results=self.per_page,
                order_by=["attributes.start_time ASC"],
                page_token=token,
            )
            yield from page
            token = page.token
            if not token:
                return

    @contextmanager
    def _translated(self, where: str) -> Iterator[None]:
        """Turn MLflow's exceptions into ``HistoryError``s naming the experiment."""
        from mlflow.exceptions import MlflowException
        from requests.exceptions import RequestException

        try:
            yield
        except HistoryError:
            raise
        except MlflowException as exc:
            code = getattr(exc, "error_code", "")
            if code == "RESOURCE_DOES_NOT_EXIST":
                raise HistoryNotFound(f"MLflow {where} not found") from exc
            if code in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
                raise HistoryUnavailable(
                    f"MLflow history unavailable for {where}: access denied; check "
                    "MLFLOW_TRACKING_TOKEN / MLFLOW_TRACKING_USERNAME on the server"
                ) from exc
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else code
            raise HistoryUnavailable(f"MLflow history unavailable for {where}: {first}") from exc
        except (RequestException, OSError) as exc:
            raise HistoryUnavailable(
                f"MLflow history unavailable for {where}: could not reach the server ({exc})"
            ) from exc


def _convert(run: Any, spec: SourceSpec) -> SourceRun | None:
    tags = dict(run.data.tags)
    name = run.info.run_name
    if not wanted(spec, run.info.status, name, tags):
        return None
    return source_run(
        run.info.run_id,
        name,
        run.info.status,
        run.info.start_time,
        tags,
        dict(run.data.metrics),
        dict(spec.summary_keys),
    )
