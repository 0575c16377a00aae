"""MLflow trust boundary: which servers the real MLflow client reads, with which credentials,
and what of their answers reaches a review.  Recording listeners on 127.0.0.1 stand in for
the operator's server, a second allowed server and an attacker's server."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.adapters.history.mlflow_source import MlflowSource, prepare_environment
from bot.adapters.history.sync import mlflow_source
from bot.adapters.settings import Settings
from bot.core.history.sources import HistoryUnavailable, SourceRefused
from bot.core.models import SourceSpec
from tests.fakes.mlflow_listener import Failure, MlflowListener, listen, mlflow_run

pytestmark = pytest.mark.servers

prepare_environment()
pytest.importorskip("mlflow.store.tracking.rest_store", reason="mlflow is not installed")

TOKEN = "operator-token-0123456789"
MARKER = "internal-host-10.0.0.5 secret"
RUNS = [
    mlflow_run(f"r{i}", 1_780_000_000_000 + i * 3_600_000, {"acc": 0.5 + i / 10}) for i in range(3)
]
SPEC = SourceSpec(kind="mlflow", experiment="gsm8k")


@pytest.fixture()
def operator() -> Iterator[tuple[MlflowListener, str]]:
    """The operator's MLflow server (MLFLOW_TRACKING_URI), serving RUNS."""
    listener = MlflowListener(runs=list(RUNS))
    with listen(listener) as url:
        yield listener, url


@pytest.fixture()
def other() -> Iterator[tuple[MlflowListener, str]]:
    """Another server, serving RUNS: allowed or not, depending on the test."""
    listener = MlflowListener(runs=list(RUNS))
    with listen(listener) as url:
        yield listener, url


@pytest.fixture()
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Every MLflow credential set in the environment, as an operator would; no retries."""
    for var in ("MLFLOW_TRACKING_URI", "MLFLOW_ALLOWED_URIS", "WANDB_ENTITIES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    return monkeypatch


def settings_source(env: pytest.MonkeyPatch, tracking: str, allowed: str = "") -> MlflowSource:
    """The App's MLflow source, built from the environment as ``serve`` builds it."""
    env.setenv("MLFLOW_TRACKING_URI", tracking)
    env.setenv("MLFLOW_ALLOWED_URIS", allowed)
    return mlflow_source(Settings(_env_file=None))  # type: ignore[call-arg]


def test_the_token_reaches_the_operators_server(
    env: pytest.MonkeyPatch, operator: tuple[MlflowListener, str]
) -> None:
    listener, url = operator
    history = settings_source(env, url).fetch(SPEC)
    assert [r.id for r in history.runs] == [run["info"]["run_id"] for run in RUNS]
    assert listener.received  # get-by-name, then a search
    assert {r.headers.get("authorization") for r in listener.received} == {f"Bearer {TOKEN}"}


def test_another_allowed_server_gets_no_credentials(
    env: pytest.MonkeyPatch,
    operator: tuple[MlflowListener, str],
    other: tuple[MlflowListener, str],
) -> None:
    env.setenv("MLFLOW_TRACKING_USERNAME", "operator")  # basic auth is a credential too
    env.setenv("MLFLOW_TRACKING_PASSWORD", "operator-password")
    (mine, my_url), (theirs, their_url) = operator, other
    source = settings_source(env, my_url, allowed=f"https://elsewhere.invalid, {their_url}/")
    history = source.fetch(SPEC.model_copy(update={"tracking_uri": their_url}))
    assert len(history.runs) == len(RUNS)
    assert theirs.received and mine.received == []
    assert [r.headers.get("authorization") for r in theirs.received] == [None] * len(
        theirs.received
    )
    assert all(TOKEN not in str(r.headers) for r in theirs.received)


def test_the_operators_server_named_in_the_config_gets_the_credentials(
    env: pytest.MonkeyPatch, operator: tuple[MlflowListener, str]
) -> None:
    listener, url = operator
    spelled = url.replace("http://", "HTTP://") + "/"  # the same server, spelled differently
    settings_source(env, url).fetch(SPEC.model_copy(update={"tracking_uri": spelled}))
    assert {r.headers.get("authorization") for r in listener.received} == {f"Bearer {TOKEN}"}


def test_an_unlisted_server_is_refused_before_any_request(
    env: pytest.MonkeyPatch,
    operator: tuple[MlflowListener, str],
    other: tuple[MlflowListener, str],
) -> None:
    (mine, my_url), (attacker, attacker_url) = operator, other
    spec = SPEC.model_copy(update={"tracking_uri": attacker_url})
    with pytest.raises(SourceRefused, match="MLFLOW_ALLOWED_URIS") as err:
        settings_source(env, my_url).fetch(spec)
    assert f"not read from {attacker_url}" in str(err.value)
    assert attacker.received == [] and mine.received == []


@pytest.mark.parametrize("scheme", ["sqlite", "file", "postgresql"])
def test_database_and_file_uris_are_refused_and_nothing_is_created(
    env: pytest.MonkeyPatch,
    operator: tuple[MlflowListener, str],
    tmp_path: Path,
    scheme: str,
) -> None:
    listener, url = operator
    target = f"{scheme}:///{tmp_path / 'x.db'}"
    spec = SPEC.model_copy(update={"tracking_uri": target})
    with pytest.raises(SourceRefused, match=r"must be http\(s\)"):
        settings_source(env, url, allowed=target).fetch(spec)  # listing one does not help
    with pytest.raises(SourceRefused, match=r"must be http\(s\)"):
        settings_source(env, target).fetch(SPEC)  # nor making it the operator's server
    assert list(tmp_path.iterdir()) == [] and listener.received == []


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (Failure(418, f"proxy error at {MARKER}"), "answered HTTP 418"),
        (Failure(502, f"<html>bad gateway {MARKER}</html>", "text/html"), "HTTP 502 (after"),
        (
            Failure(
                400,
                f'{{"error_code": "INVALID_PARAMETER_VALUE", "message": "{MARKER}"}}',
                "application/json",
            ),
            "answered with error INVALID_PARAMETER_VALUE",
        ),
        (Failure(401, MARKER), "access denied (UNAUTHENTICATED); check MLFLOW_TRACKING_TOKEN"),
    ],
)
def test_error_texts_of_the_server_are_not_repeated(
    env: pytest.MonkeyPatch,
    operator: tuple[MlflowListener, str],
    caplog: pytest.LogCaptureFixture,
    failure: Failure,
    expected: str,
) -> None:
    listener, url = operator
    listener.failure = failure
    with caplog.at_level(logging.WARNING), pytest.raises(HistoryUnavailable) as err:
        settings_source(env, url).fetch(SPEC)
    message = str(err.value)
    assert expected in message and "experiment 'gsm8k'" in message
    assert MARKER not in message and "10.0.0.5" not in message
    if failure.status != 502:  # a retried status: MLflow keeps no body
        assert MARKER in caplog.text  # the operator still sees what the server said


def test_another_server_refusing_access_is_not_told_to_check_the_token(
    env: pytest.MonkeyPatch,
    operator: tuple[MlflowListener, str],
    other: tuple[MlflowListener, str],
) -> None:
    (_, my_url), (theirs, their_url) = operator, other
    theirs.failure = Failure(403, MARKER)
    spec = SPEC.model_copy(update={"tracking_uri": their_url})
    with pytest.raises(HistoryUnavailable) as err:
        settings_source(env, my_url, allowed=their_url).fetch(spec)
    assert "credentials only to MLFLOW_TRACKING_URI" in str(err.value)
    assert "PERMISSION_DENIED" in str(err.value) and MARKER not in str(err.value)


def test_an_unreachable_server_is_told_without_the_transport_text(
    env: pytest.MonkeyPatch, operator: tuple[MlflowListener, str]
) -> None:
    _, url = operator
    with listen(MlflowListener()) as gone:
        pass  # closed: nothing listens there any more
    with pytest.raises(HistoryUnavailable) as err:
        settings_source(env, url, allowed=gone).fetch(
            SPEC.model_copy(update={"tracking_uri": gone})
        )
    message = str(err.value)
    assert "could not be reached (connection refused)" in message
    assert "Errno" not in message and "/api/2.0" not in message


def test_credentials_in_the_uri_are_not_shown(
    env: pytest.MonkeyPatch, operator: tuple[MlflowListener, str]
) -> None:
    listener, url = operator
    listener.failure = Failure(500, MARKER)
    with_user = url.replace("http://", "http://ops:hunter22@") + "?token=abc"
    with pytest.raises(HistoryUnavailable) as err:
        settings_source(env, with_user).fetch(SPEC)
    assert url in str(err.value) and "hunter22" not in str(err.value)
    assert "abc" not in str(err.value)
