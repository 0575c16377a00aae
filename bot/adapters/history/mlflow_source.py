"""MLflow run history through the real ``mlflow`` tracking client.

Runs of one experiment (by name) are read page by page with ``search_runs``;
a run's commit is its ``mlflow.source.git.commit`` tag and its summary the
latest value of each metric; its tags are its user tag keys.  Start time, run
ids and a single state are filtered by the server; several states, tags, group
(a ``group`` tag), job type (a ``job_type`` tag) and the name regex here.
MLflow filter strings have no OR, so an incremental read is two searches: runs
started since a time, and the runs asked for by id.

Trust boundary (docs/security.md): only http(s) servers of the operator's allow-list
are read (``MLFLOW_TRACKING_URI`` plus ``MLFLOW_ALLOWED_URIS``), through a REST store
built here with explicit credentials: the token goes to ``MLFLOW_TRACKING_URI`` only.
Errors are told in our own words (``mlflow_errors``); MLflow's text is logged.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from bot.adapters.extras import require
from bot.adapters.history.mlflow_errors import failure_reason, shown
from bot.core.access import SourcePolicy, normalise_uri
from bot.core.history.names import name_filter
from bot.core.history.runs import Progress, SourceRun, make_history, numeric_summary
from bot.core.history.sources import (
    HistoryError,
    HistoryNotFound,
    HistoryUnavailable,
    SourceRefused,
)
from bot.core.models import History, Run, RunState, SourceSpec, as_utc

if TYPE_CHECKING:
    from mlflow.entities import Run as MlflowRun
    from mlflow.store.tracking.rest_store import RestStore
    from mlflow.utils.rest_utils import MlflowHostCreds

log = logging.getLogger(__name__)

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
    return not (spec.name_regex and not name_filter(spec.name_regex)(name or ""))


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
    return SourceRun(run, summary.non_numeric, summary.non_finite, not_numbers=summary.not_numbers)


# --------------------------------------------------------------------------- adapter


class MlflowSource:
    """A ``HistorySource`` for ``SourceSpec(kind="mlflow")`` over the real MLflow client.

    ``tracking_uri`` is the operator's server (``MLFLOW_TRACKING_URI``): specs naming no
    server read it, and it alone receives ``token`` (``MLFLOW_TRACKING_TOKEN``) and the
    other credentials MLflow reads from the environment (basic auth, client certificate,
    auth plugin).  ``allowed`` are more servers a spec may name (``MLFLOW_ALLOWED_URIS``);
    they get no credentials.  Any other server, or a URI that is not http(s), is refused
    with ``SourceRefused`` before any request.
    """

    def __init__(
        self,
        *,
        tracking_uri: str | None = None,
        token: str | None = None,
        allowed: Sequence[str] = (),
        per_page: int = 1000,
    ) -> None:
        self.tracking_uri = tracking_uri
        self.policy = SourcePolicy(mlflow_default=tracking_uri, mlflow_uris=tuple(allowed))
        self.per_page = per_page
        self._token = token
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
        url, own = self._server(spec)
        if not spec.experiment:
            raise HistoryNotFound("no MLflow experiment given: name it in the repository config")
        where = f"experiment {spec.experiment!r} at {shown(url)}"
        prepare_environment()
        require("mlflow")  # the mlflow extra: said before anything else is tried

        with self._lock, self._translated(where, own):
            store = self._store(url, own)
            name = spec.experiment
            experiment = store.get_experiment_by_name(name)  # type: ignore[no-untyped-call]
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
                for run in self._search(store, experiment.experiment_id, text):
                    item = _convert(run, spec)
                    if item is not None:
                        runs[item.run.id] = item
                    if progress is not None:
                        progress(len(runs), None)
        return list(runs.values())

    def _server(self, spec: SourceSpec) -> tuple[str, bool]:
        """The URL to read ``spec`` at, spelled as the operator listed it, and whether it
        is the operator's own server.  ``HistoryNotFound`` without any, ``SourceRefused``
        when the allow-list refuses it."""
        uri = spec.tracking_uri or self.tracking_uri
        if not uri:
            raise HistoryNotFound(
                f"no MLflow tracking URI for {spec.describe()}: set 'tracking_uri' in the "
                "repository config or MLFLOW_TRACKING_URI on the server"
            )
        refusal = self.policy.refusal(spec, installation_id=None, owner=None)
        if refusal is not None:
            raise SourceRefused(f"not read from {shown(uri)}: {refusal}")
        listed = (*self.policy.mlflow_uris, self.tracking_uri)
        servers = {normalise_uri(u): u for u in listed if u}
        target = normalise_uri(uri)
        own = self.tracking_uri is not None and target == normalise_uri(self.tracking_uri)
        return servers[target], own

    def _store(self, url: str, own: bool) -> RestStore:
        """MLflow's REST store for ``url`` with explicit credentials: the operator's for its
        own server, none for another (MLflow's default client would send the environment's
        MLFLOW_TRACKING_TOKEN to every server)."""
        from mlflow.store.tracking.rest_store import RestStore
        from mlflow.utils.credentials import get_default_host_creds
        from mlflow.utils.rest_utils import MlflowHostCreds

        creds: MlflowHostCreds = get_default_host_creds(url)  # type: ignore[no-untyped-call]
        if own:  # basic auth, client certificate, auth plugin: as MLflow reads them
            creds.token = self._token  # the settings' token, whatever MLflow read
        else:  # TLS options only
            creds = MlflowHostCreds(  # type: ignore[no-untyped-call]
                url,
                ignore_tls_verification=creds.ignore_tls_verification,
                server_cert_path=creds.server_cert_path,
            )
        return RestStore(lambda: creds)  # type: ignore[no-untyped-call]

    def _search(self, store: RestStore, experiment_id: str, text: str) -> Iterator[MlflowRun]:
        from mlflow.entities import ViewType

        token: str | None = None
        while True:
            page = store.search_runs(  # type: ignore[no-untyped-call]
                [experiment_id],
                filter_string=text,
                run_view_type=ViewType.ACTIVE_ONLY,
                max_results=self.per_page,
                order_by=["attributes.start_time ASC"],
                page_token=token,
            )
            yield from page
            token = page.token
            if not token:
                return

    @contextmanager
    def _translated(self, where: str, own: bool) -> Iterator[None]:
        """Turn MLflow's exceptions into ``HistoryError``s in our words; log MLflow's."""
        from mlflow.exceptions import MlflowException
        from requests.exceptions import RequestException

        try:
            yield
        except HistoryError:
            raise
        except (MlflowException, RequestException, OSError) as exc:
            log.warning("MLflow %s failed: %s", where, exc)
            if getattr(exc, "error_code", "") == "RESOURCE_DOES_NOT_EXIST":
                raise HistoryNotFound(f"MLflow {where} not found") from exc
            reason = failure_reason(exc, own_server=own)
            raise HistoryUnavailable(f"MLflow history unavailable for {where}: {reason}") from exc


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
