"""``pip install threshold-bot`` as users and the Action do it: the wheel in a clean virtualenv,
with no extra, then with each extra alone (tests/clean_install.py builds and installs).

Every command runs as a whole process from the installed ``threshold-bot`` script, never from
the checkout: its ``--help``, a review of a history file, ``rebaseline --dry-run``,
``check-config`` and ``action`` against the local fake GitHub must work without any extra; a
command or source that needs one says which, in one line, with exit status 2.  Expected
reviews are computed by this checkout's own functions over the same files.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from subprocess import Popen

import pytest

from bot.adapters.extras import EXTRA_OF_MODULE
from bot.cli.commands import COMMANDS
from bot.cli.review import review_files
from bot.core.render.html_report import html_report
from bot.core.render.review import MARKER, render_comment, render_json
from demo.data import SCRIPT_PATH, write_example
from tests.clean_install import new_venv
from tests.fakes.github_api import FakeGitHub
from tests.fakes.wandb_server import API_KEY, FakeWandb, nightly_run, serve
from tests.services import Postgres, Redis
from tests.webhooks import fixture, patched

pytestmark = pytest.mark.servers

# what a plain install runs; the App's commands need the `app` extra (docs/cli.md)
PLAIN_COMMANDS = ("review", "rebaseline", "backtest", "drift", "export", "action", "check-config")
APP_COMMANDS = ("sync", "serve", "worker", "watch", "audit", "db")
EXTRAS = ("app", "wandb", "mlflow", "actions", "postgres", "redis")
REPO = "octo/ml"
HISTORY = "ci/history.jsonl"

Install = Callable[[str], Path]


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Install:
    """``install(extras)``: the ``bin`` of a virtualenv holding the wheel with ``extras``
    ("" for none), made on first use and kept for the module."""
    work = tmp_path_factory.mktemp("clean-install")
    made: dict[str, Path] = {}

    def installed(extras: str) -> Path:
        if extras not in made:
            requirement = f"{wheel}[{extras}]" if extras else str(wheel)
            made[extras] = new_venv(work / f"venv-{extras or 'plain'}", requirement)
        return made[extras]

    return installed


def run(
    bin_dir: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed ``threshold-bot`` with ``args``, in an environment of its own."""
    base = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(cwd or bin_dir.parent)}
    return subprocess.run(
        [str(bin_dir / "threshold-bot"), *args],
        env={**base, **(env or {})},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single line a failed command writes on stderr."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's history and nightly script before and after a threshold PR."""
    return write_example(tmp_path_factory.mktemp("example")).root


def test_the_commands_are_sorted_into_plain_and_app() -> None:
    assert sorted(PLAIN_COMMANDS + APP_COMMANDS) == sorted(COMMANDS)
    assert {extra for extra, _ in EXTRA_OF_MODULE.values()} == set(EXTRAS)


def test_plain_install_version_and_every_help(install: Install) -> None:
    plain = install("")
    shown = run(plain, "--version")
    assert (shown.returncode, shown.stdout) == (0, f"threshold-bot {version('threshold-bot')}\n")
    listing = run(plain, "--help")
    assert listing.returncode == 0, listing.stderr
    assert all(f"\n  {name} " in listing.stdout for name in COMMANDS)
    for name in PLAIN_COMMANDS:
        helped = run(plain, name, "--help")
        assert helped.returncode == 0, (name, helped.stderr)
        assert f"Usage: threshold-bot {name} " in helped.stdout
    for name in APP_COMMANDS:
        refused = run(plain, name, "--help")
        assert refused.returncode == 2, (name, refused.stdout)
        assert one_line(refused).startswith(f"threshold-bot: error: {name}: needs ")
        assert one_line(refused).endswith('pip install "threshold-bot[app]"')


def test_plain_install_reviews_a_history_file_as_the_checkout_does(
    install: Install, example: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = install("")
    files = ["--history", "history.jsonl", "--base", f"base/{SCRIPT_PATH}"]
    files += ["--file", f"head/{SCRIPT_PATH}"]
    monkeypatch.chdir(example)  # the same paths in the review as the command's
    expected = review_files(
        Path("history.jsonl"), Path("head") / SCRIPT_PATH, Path("base") / SCRIPT_PATH
    )
    markdown = run(plain, "review", *files, "--format", "markdown", cwd=example)
    assert markdown.returncode == 0, markdown.stderr
    options = "--history history.jsonl"
    assert markdown.stdout == render_comment(expected, app_mode=False, cli_options=options)
    as_json = run(plain, "review", *files, "--format", "json", cwd=example)
    assert json.loads(as_json.stdout) == json.loads(render_json(expected))
    table = run(plain, "review", *files, "--format", "table", cwd=example)
    assert table.returncode == 0, table.stderr
    assert all(gate.name in table.stdout for gate in expected.gates)
    # the report's template and scripts come from the installed wheel
    page = run(plain, "review", *files, "--format", "html", "--output", "review.html", cwd=example)
    assert page.returncode == 0, page.stderr
    title = f"threshold-bot review of head/{SCRIPT_PATH}"
    assert (example / "review.html").read_text(encoding="utf-8") == html_report(
        expected, title=title, cli_options=options
    )


def test_plain_install_rebaselines_and_checks_a_config(install: Install, example: Path) -> None:
    plain = install("")
    script = example / "head" / SCRIPT_PATH
    before = script.read_text(encoding="utf-8")
    dry = run(plain, "rebaseline", "--dry-run", "--history", "history.jsonl", "--file",
              f"head/{SCRIPT_PATH}", cwd=example)  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith(f"--- a/head/{SCRIPT_PATH}\n+++ b/head/{SCRIPT_PATH}\n")
    assert script.read_text(encoding="utf-8") == before  # a dry run writes nothing
    checkout = example / "head"
    config = checkout / ".github" / "threshold-bot.yml"
    config.parent.mkdir(exist_ok=True)
    config.write_text(f"files:\n  - {SCRIPT_PATH}\n", encoding="utf-8")
    checked = run(plain, "check-config", cwd=checkout)
    assert checked.returncode == 0, checked.stderr + checked.stdout
    assert SCRIPT_PATH in checked.stdout


def test_plain_install_runs_the_action_against_github(install: Install, example: Path) -> None:
    plain = install("")
    base, head = (
        (example / side / SCRIPT_PATH).read_text(encoding="utf-8") for side in ("base", "head")
    )
    history = (example / "history.jsonl").read_text(encoding="utf-8")
    with FakeGitHub(app_id=15368, app_slug="github-actions") as fake:
        repo = fake.add_repo(REPO, installation_id=9, files={SCRIPT_PATH: base, HISTORY: history})
        repo.open_pr(1, head="rebaseline", head_files={SCRIPT_PATH: head})
        workspace = example / "workspace"
        for path, text in ((SCRIPT_PATH, head), (HISTORY, history)):
            (workspace / path).parent.mkdir(parents=True, exist_ok=True)
            (workspace / path).write_text(text, encoding="utf-8")
        payload = patched(
            fixture("pull_request.opened"),
            {
                "number": 1,
                "pull_request.number": 1,
                "pull_request.base.sha": repo.head("main"),
                "repository.full_name": REPO,
            },
        )
        event = example / "event.json"
        event.write_text(json.dumps(payload), encoding="utf-8")
        summary, output = example / "summary.md", example / "output.txt"
        env = {
            "GITHUB_ACTIONS": "true",
            "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_API_URL": fake.base_url,
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_TOKEN": fake.integration().get_access_token(9).token,
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_OUTPUT": str(output),
            "GITHUB_WORKSPACE": str(workspace),
            "INPUT_FILES": SCRIPT_PATH,
            "INPUT_HISTORY": HISTORY,
            "INPUT_FAIL_ON": "action_required",
        }
        done = run(plain, "action", env=env, cwd=example)
        expected = review_files(
            workspace / HISTORY, workspace / SCRIPT_PATH, example / "base" / SCRIPT_PATH
        )
        assert done.returncode == (1 if expected.conclusion == "action_required" else 0)
        assert f"conclusion={expected.conclusion}\n" in output.read_text(encoding="utf-8")
        [comment] = [c.body for c in repo.comments(1)]
        assert comment.startswith(MARKER)
        assert comment == summary.read_text(encoding="utf-8")
        fake.check()


def test_plain_install_names_the_extra_a_source_needs(install: Install, example: Path) -> None:
    plain = install("")
    env = {"WANDB_API_KEY": API_KEY}
    wanted = run(plain, "review", "--wandb", "acme/nightly", "--file", f"head/{SCRIPT_PATH}",
                 env=env, cwd=example)  # fmt: skip
    assert wanted.returncode == 2
    assert one_line(wanted).endswith('pip install "threshold-bot[wandb]"')
    exported = run(plain, "export", "--mlflow", "nightly", "--tracking-uri",
                   "http://127.0.0.1:9", cwd=example)  # fmt: skip
    assert exported.returncode == 2
    assert one_line(exported).endswith('pip install "threshold-bot[mlflow]"')


def test_wandb_extra_reads_w_and_b(install: Install, example: Path) -> None:
    with_wandb = install("wandb")
    fake = FakeWandb()
    for i in range(12):
        fake.add_run("acme", "nightly", nightly_run(i))
    with serve(fake) as url:
        env = {"WANDB_API_KEY": API_KEY, "WANDB_BASE_URL": url}
        done = run(with_wandb, "export", "--wandb", "acme/nightly", env=env, cwd=example)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    logged = fake.projects[("acme", "nightly")].values()
    assert sorted(r["id"] for r in lines) == sorted(r.name for r in logged)
    # the base commands work beside the extra
    review = run(with_wandb, "review", "--history", "history.jsonl", "--file",
                 f"head/{SCRIPT_PATH}", "--format", "json", cwd=example)  # fmt: skip
    assert review.returncode == 0, review.stderr


def test_mlflow_extra_reads_an_mlflow_server(
    install: Install, mlflow_server: str, example: Path
) -> None:
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    with_mlflow = install("mlflow")
    client = MlflowClient(tracking_uri=mlflow_server)
    experiment = client.create_experiment("clean-install")
    logged = {}
    for i in range(4):
        run_id = client.create_run(
            experiment, start_time=1_780_000_000_000 + i * 3_600_000
        ).info.run_id
        client.log_batch(run_id, metrics=[Metric("eval/acc", 0.5 + i / 100, 0, 0)])
        client.set_terminated(run_id, status="FINISHED")
        logged[run_id] = 0.5 + i / 100
    done = run(with_mlflow, "export", "--mlflow", "clean-install", "--tracking-uri",
               mlflow_server, cwd=example)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert {r["id"]: r["summary"]["eval/acc"] for r in lines} == logged
    # the base commands work beside the extra
    review = run(with_mlflow, "review", "--history", "history.jsonl", "--file",
                 f"head/{SCRIPT_PATH}", "--format", "json", cwd=example)  # fmt: skip
    assert review.returncode == 0, review.stderr


def test_app_extra_runs_the_store_and_names_the_queue_s_extra(
    install: Install, tmp_path: Path
) -> None:
    app = install("app")
    for name in APP_COMMANDS:
        assert run(app, name, "--help").returncode == 0, name
    store = f"sqlite:///{tmp_path / 'store.db'}"
    upgraded = run(app, "db", "upgrade", "--database-url", store, cwd=tmp_path)
    assert upgraded.returncode == 0, upgraded.stderr
    current = run(app, "db", "current", "--database-url", store, cwd=tmp_path)
    assert current.returncode == 0 and current.stdout.endswith(": up to date\n")
    postgres = run(app, "db", "upgrade", "--database-url",
                   "postgresql+psycopg://u@127.0.0.1:9/x", cwd=tmp_path)  # fmt: skip
    assert postgres.returncode == 2
    assert one_line(postgres).endswith('pip install "threshold-bot[postgres]"')
    env = _worker_env(tmp_path, store, redis_url="redis://127.0.0.1:9/0")
    redis = run(app, "worker", env=env, cwd=tmp_path)
    assert redis.returncode == 2
    [record] = [json.loads(line) for line in redis.stderr.splitlines()]  # the App logs JSON
    assert record["msg"].startswith("threshold-bot: error: worker: needs the Redis client")
    assert record["msg"].endswith('pip install "threshold-bot[redis]"')


def test_postgres_extra_upgrades_a_postgresql_store(
    install: Install, postgres: Postgres, tmp_path: Path
) -> None:
    with_postgres = install("postgres")
    name = postgres.create_database("clean")
    try:
        url = postgres.url(name)
        upgraded = run(with_postgres, "db", "upgrade", "--database-url", url, cwd=tmp_path)
        assert upgraded.returncode == 0, upgraded.stderr
        current = run(with_postgres, "db", "current", "--database-url", url, cwd=tmp_path)
        assert current.stdout.endswith(": up to date\n"), current.stderr
    finally:
        postgres.drop_database(name)


def test_redis_extra_runs_a_worker_on_redis(
    install: Install, redis_server: Redis, tmp_path: Path
) -> None:
    with_redis = install("redis")
    store = f"sqlite:///{tmp_path / 'store.db'}"
    assert run(with_redis, "db", "upgrade", "--database-url", store, cwd=tmp_path).returncode == 0
    env = _worker_env(tmp_path, store, redis_url=redis_server.url)
    with _started(with_redis, env, tmp_path) as (process, log):
        assert _wait_for(log, "worker running"), log.read_text(encoding="utf-8")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0


def _worker_env(tmp_path: Path, store: str, *, redis_url: str) -> dict[str, str]:
    """The settings a worker needs: the App's id and key, its store, ``REDIS_URL``."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return {
        "APP_ID": "1",
        "PRIVATE_KEY": pem,
        "GITHUB_API_URL": "http://127.0.0.1:9",  # never the internet (nothing listens)
        "DATABASE_URL": store,
        "REDIS_URL": redis_url,
    }


@contextmanager
def _started(bin_dir: Path, env: dict[str, str], cwd: Path) -> Iterator[tuple[Popen[bytes], Path]]:
    """``threshold-bot worker`` running in the background, its log in a file; killed at the end."""
    log = cwd / "worker.log"
    base = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(cwd)}
    with log.open("wb") as handle:
        process = Popen(
            [str(bin_dir / "threshold-bot"), "worker"],
            env={**base, **env},
            cwd=cwd,
            stdout=handle,
            stderr=handle,
        )
        try:
            yield process, log
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


def _wait_for(log: Path, text: str, timeout: float = 60) -> bool:
    """Whether ``text`` appears in ``log`` within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(encoding="utf-8", errors="replace"):
            return True
        time.sleep(0.1)
    return False
