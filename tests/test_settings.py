"""Settings from the environment and ``.env``; one-line errors; secrets kept out of logs."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.adapters.settings import Settings, SettingsError, load_settings
from bot.app import logs
from tests.conftest import ROOT
from tests.live import make_pem

pytestmark = pytest.mark.servers

NAMES = (
    "APP_ID",
    "PRIVATE_KEY",
    "PRIVATE_KEY_PATH",
    "WEBHOOK_SECRET",
    "DATABASE_URL",
    "REDIS_URL",
    "WORKERS",
    "GITHUB_API_URL",
    "QUEUE_PATH",
    "LOG_LEVEL",
    "MAX_FILE_BYTES",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env


@pytest.fixture(scope="module")
def pem() -> str:
    return make_pem()


def test_environment_names_of_the_contract(monkeypatch: pytest.MonkeyPatch, pem: str) -> None:
    monkeypatch.setenv("APP_ID", "123")
    monkeypatch.setenv("PRIVATE_KEY", pem.replace("\n", "\\n"))  # one-line form, as in .env files
    monkeypatch.setenv("WEBHOOK_SECRET", "new-secret, old-secret")
    monkeypatch.setenv("GITHUB_API_URL", "https://ghe.example/api/v3")
    monkeypatch.setenv("REDIS_URL", "redis://localhost:6379/0")
    settings = load_settings("serve")
    assert settings.app_id == 123
    assert settings.private_key_pem() == pem
    assert settings.webhook_secrets == (b"new-secret", b"old-secret")
    assert settings.github_api_url == "https://ghe.example/api/v3"
    assert settings.database_url == "sqlite:///threshold-bot.db"
    assert settings.embedded_queue_path() == Path("threshold-bot-queue.db")
    assert "new-secret" not in repr(settings) and "BEGIN" not in repr(settings)


def test_dotenv_file_and_key_file(tmp_path: Path, pem: str) -> None:
    key = tmp_path / "app.pem"
    key.write_text(pem)
    (tmp_path / ".env").write_text(
        f"APP_ID=7\nPRIVATE_KEY_PATH={key}\nWEBHOOK_SECRET=s3cret\nWORKERS=4\n"
        f"DATABASE_URL=sqlite:///{tmp_path / 'x.db'}\n"
    )
    settings = load_settings("serve")
    assert (settings.app_id, settings.workers) == (7, 4)
    assert settings.private_key_pem() == pem
    assert settings.embedded_queue_path() == tmp_path / "x-queue.db"


def test_file_size_limit_defaults_to_50_mb_and_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_settings().max_file_bytes == 50 * 1024 * 1024
    monkeypatch.setenv("MAX_FILE_BYTES", "2000000")
    assert load_settings().max_file_bytes == 2_000_000


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MAX_FILE_BYTES": "0"}, "MAX_FILE_BYTES: must be at least 1, not '0'"),
        (
            {"MAX_FILE_BYTES": str(100 * 1024 * 1024 + 1)},
            "MAX_FILE_BYTES: must be at most 104857600",
        ),
        ({}, "APP_ID: required"),
        ({"APP_ID": "abc"}, "APP_ID: expected a whole number, not 'abc'"),
        ({"APP_ID": "1"}, "PRIVATE_KEY: required"),
        ({"APP_ID": "1", "PRIVATE_KEY": "not a key"}, "PRIVATE_KEY: not a PEM private key"),
        ({"APP_ID": "1", "PRIVATE_KEY_PATH": "missing.pem"}, "PRIVATE_KEY_PATH: cannot read"),
        ({"APP_ID": "1", "PRIVATE_KEY": "PEM"}, "WEBHOOK_SECRET: required"),
        ({"APP_ID": "1", "PRIVATE_KEY": "PEM", "WEBHOOK_SECRET": "s", "WORKERS": "0"}, "WORKERS"),
        (
            {"APP_ID": "1", "PRIVATE_KEY": "PEM", "WEBHOOK_SECRET": "s", "REDIS_URL": "localhost"},
            "REDIS_URL: expected",
        ),
        (
            {"APP_ID": "1", "PRIVATE_KEY": "PEM", "WEBHOOK_SECRET": "s", "LOG_LEVEL": "verbose"},
            "LOG_LEVEL: expected one of DEBUG, INFO",
        ),
        (  # one client's share (half: 16 MiB) is less than the largest delivery (25 MiB)
            {
                "APP_ID": "1",
                "PRIVATE_KEY": "PEM",
                "WEBHOOK_SECRET": "s",
                "MAX_UNVERIFIED_BYTES": str(32 * 1024 * 1024),
            },
            f"MAX_UNVERIFIED_BYTES: a body may hold only {16 * 1024 * 1024} bytes of it",
        ),
    ],
)
def test_problems_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, pem: str, env: dict[str, str], message: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, pem if value == "PEM" else value)
    with pytest.raises(SettingsError) as err:
        load_settings("serve")
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_worker_needs_no_webhook_secret(monkeypatch: pytest.MonkeyPatch, pem: str) -> None:
    monkeypatch.setenv("APP_ID", "1")
    monkeypatch.setenv("PRIVATE_KEY", pem)
    assert load_settings("worker").webhook_secrets == ()


def test_serve_stops_with_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli.serve", "serve", "--port", "0"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "threshold-bot: error: APP_ID: required (the GitHub App's id); "
        "PRIVATE_KEY: required (or PRIVATE_KEY_PATH, a PEM file); "
        "WEBHOOK_SECRET: required (the webhook secret of the GitHub App)"
    ]


def test_logs_are_json_and_never_show_secrets(pem: str) -> None:
    settings = Settings(
        _env_file=None, webhook_secret="hunter2-secret,other-secret", private_key=pem
    )  # type: ignore[call-arg]
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    logs.configure("INFO", settings.secret_values())
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    log = logging.getLogger("bot.test")
    log.info("secret is %s", "hunter2-secret", extra={"delivery": "d-1", "key": pem})
    log.warning("other: other-secret; key line: %s", pem.splitlines()[1])
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines[0]["msg"] == "secret is ***" and lines[0]["delivery"] == "d-1"
    assert lines[0]["key"] == "***"
    assert lines[1]["level"] == "warning"
    assert lines[1]["msg"] == "other: ***; key line: ***"
    assert "other-secret" not in stream.getvalue() and "hunter2" not in stream.getvalue()
    root.handlers[:], level = saved
    root.setLevel(level)


_PROGRAM = "import sys; from bot.cli.main import app; sys.argv[0] = 'threshold-bot'; app()"


@pytest.mark.parametrize(
    "command",
    [
        ("serve", "--port", "0"),
        ("worker",),
        ("watch",),
        ("sync", "acme-ml/ci"),
        ("db", "current"),
        ("health",),  # python -m bot.app.health, the worker container's health check
    ],
)
def test_a_bare_wandb_entities_key_stops_every_command_that_reads_the_settings(
    tmp_path: Path, pem: str, command: tuple[str, ...]
) -> None:
    """``{"11": …}`` may mean installation 11 or the account named ``11``: refused before
    anything starts, with the two ways to write it."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    env |= {
        "PYTHONPATH": str(ROOT),
        "APP_ID": "1",
        "PRIVATE_KEY": pem.replace("\n", "\\n"),
        "WEBHOOK_SECRET": "s3cret",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'store.db'}",
        "WANDB_ENTITIES": json.dumps({"11": ["acme-ml"], "owner:acme": ["acme-ml"]}),
    }
    args = ["-m", "bot.app.health"] if command == ("health",) else ["-c", _PROGRAM, *command]
    result = subprocess.run(
        [sys.executable, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )

    problem = (
        'WANDB_ENTITIES: "11" does not say whether it is an installation or an account (an '
        'account may be named like an installation\'s id): write "installation:11" for the '
        'installation with id 11, or "owner:11" for the GitHub account 11'
    )
    if command == ("health",):
        assert result.returncode == 1
        assert json.loads(result.stdout) == {"status": "error", "reason": problem}
    else:
        assert result.returncode == 2
        assert result.stderr.strip().splitlines() == [f"threshold-bot: error: {problem}"]
    assert not (tmp_path / "store.db").exists()  # nothing started


@pytest.mark.parametrize(
    ("grants", "message"),
    [
        ({"acme": ["acme-ml"]}, 'write "owner:acme" for the GitHub account acme'),
        ({"installation:acme": ["x"]}, "expected installation:ID"),
        ({"owner:": ["x"]}, "expected owner:LOGIN"),
        ({"team:acme": ["x"]}, 'expected installation:ID, owner:LOGIN or "*"'),
        ({"owner:acme": [" "]}, "a W&B entity is empty"),
    ],
)
def test_wandb_entities_keys_say_what_they_name(
    monkeypatch: pytest.MonkeyPatch, grants: dict[str, list[str]], message: str
) -> None:
    monkeypatch.setenv("WANDB_ENTITIES", json.dumps(grants))
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(err.value).startswith("WANDB_ENTITIES: ") and message in str(err.value)


def test_wandb_entities_in_the_new_form_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    grants = {"installation:11": ["Acme-ML"], "Owner:Acme": ["lab"], "*": ["public"]}
    monkeypatch.setenv("WANDB_ENTITIES", json.dumps(grants))
    policy = load_settings().source_policy()
    assert policy.entities(11, "someone") == {"acme-ml", "public"}
    assert policy.entities(22, "ACME") == {"lab", "public"}
    assert policy.entities(22, "11") == {"public"}  # the account "11" is not installation 11


def test_wandb_entities_that_are_not_json_stop_with_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WANDB_ENTITIES", '{"owner:acme": ')
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(err.value).startswith("WANDB_ENTITIES: not valid JSON")
