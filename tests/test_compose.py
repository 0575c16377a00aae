"""``deploy/compose.yaml`` brings up a deployment that can work: read as Compose reads it.

``docker compose up`` needs a Docker daemon and the network, so this parses the file
(PyYAML, merge keys resolved as Compose resolves them) and checks what decides whether
it comes up in order and stays up: the services and their commands (each a real command
of the CLI: parsed by the typer app), health checks, named volumes, start order, the
env file, and that no secret is written in it.  The App's answers themselves are tested
on real PostgreSQL and Redis in ``tests/test_healthz.py``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from bot.adapters.settings import Settings
from bot.cli.main import app as cli
from tests.conftest import ROOT

DEPLOY = ROOT / "deploy"
LONG_RUNNING = ("app", "worker", "postgres", "redis")
BOT = ("app", "worker", "migrate")  # the services running the threshold-bot image
# ``${NAME}`` / ``${NAME:?message}`` / ``${NAME:-default}``: taken from deploy/.env
_INTERPOLATED = re.compile(r"^[^$]*(\$\{[A-Z_]+(:[?-][^}]*)?\}[^$]*)+$")
_SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|PRIVATE_KEY$|API_KEY")


def load(path: Path = DEPLOY / "compose.yaml") -> dict[str, Any]:
    text = path.read_text()
    assert "version:" not in text  # the Compose Specification: no version key
    data: dict[str, Any] = yaml.safe_load(text)
    return data


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load()


def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose["services"]
    return found


def command(service: dict[str, Any]) -> list[str]:
    words = service["command"]
    assert isinstance(words, list), "exec form: no shell between Docker and the process"
    return [str(w) for w in words]


def parses(argv: list[str]) -> bool:
    """Whether the CLI knows ``argv`` (a command and its options), without running it."""
    return CliRunner().invoke(cli, [*argv, "--help"]).exit_code == 0


def test_the_services_and_their_commands(compose: dict[str, Any]) -> None:
    found = services(compose)
    assert set(found) == {"app", "worker", "migrate", "postgres", "redis"}
    assert command(found["app"]) == ["threshold-bot", "serve", "--no-workers"]
    assert command(found["worker"]) == ["threshold-bot", "worker"]
    assert found["worker"]["deploy"]["replicas"] == 2
    assert command(found["migrate"]) == ["threshold-bot", "db", "upgrade"]
    assert found["migrate"]["restart"] == "no"  # a one-shot job
    assert found["postgres"]["image"].startswith("postgres:16")
    assert found["redis"]["image"].startswith("redis:7")
    for name in BOT:
        assert found[name]["build"]["context"] == ".."  # the repository's Dockerfile
        assert (DEPLOY / found[name]["build"]["context"] / "Dockerfile").is_file()


def test_the_commands_named_are_commands_of_the_cli(compose: dict[str, Any]) -> None:
    for name in BOT:
        program, *argv = command(services(compose)[name])
        assert program == "threshold-bot"
        assert parses(argv), argv
    # and the check itself can fail
    assert not parses(["serve", "--no-such-option"]) and not parses(["no-such-command"])


def test_every_long_running_service_has_a_health_check(compose: dict[str, Any]) -> None:
    found = services(compose)
    for name in LONG_RUNNING:
        check = found[name]["healthcheck"]
        assert check["test"][0] == "CMD" and len(check["test"]) > 1, name
        assert not check.get("disable"), name
        assert found[name]["restart"] == "unless-stopped", name
    assert "/healthz" in " ".join(found["app"]["healthcheck"]["test"])
    assert found["worker"]["healthcheck"]["test"][1:] == ["python", "-m", "bot.app.health"]
    assert found["migrate"]["healthcheck"] == {"disable": True}


def test_the_app_and_workers_start_after_the_migration_and_healthy_services(
    compose: dict[str, Any],
) -> None:
    found = services(compose)
    for name in ("app", "worker"):
        assert found[name]["depends_on"] == {
            "migrate": {"condition": "service_completed_successfully"},
            "postgres": {"condition": "service_healthy"},
            "redis": {"condition": "service_healthy"},
        }, name
    assert found["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}


def test_the_bot_uses_postgresql_through_psycopg_and_redis(compose: dict[str, Any]) -> None:
    for name in BOT:
        env = services(compose)[name]["environment"]
        database = env["DATABASE_URL"]
        assert database.startswith("postgresql+psycopg://threshold:${POSTGRES_PASSWORD")
        assert database.endswith("@postgres:5432/threshold")
        assert env["REDIS_URL"] == "redis://redis:6379/0"
        assert env["PRIVATE_KEY_PATH"] == "/run/secrets/app_private_key"
        assert services(compose)[name]["secrets"] == ["app_private_key"]
    app = services(compose)["app"]
    assert app["environment"]["PORT"] == "3000" and app["ports"][0].endswith(":3000")


def test_volumes_are_named_and_used(compose: dict[str, Any]) -> None:
    declared = set(compose["volumes"])
    mounted = {
        mount.split(":")[0]: mount.split(":")[1]
        for service in services(compose).values()
        for mount in service.get("volumes", [])
    }
    assert declared == set(mounted) == {"pg-data", "redis-data"}
    assert mounted["pg-data"] == "/var/lib/postgresql/data"
    assert mounted["redis-data"] == "/data"
    redis_command = command(services(compose)["redis"])
    assert redis_command[redis_command.index("--appendonly") + 1] == "yes"


def test_settings_come_from_the_env_file_which_documents_them(compose: dict[str, Any]) -> None:
    example = (DEPLOY / ".env.example").read_text()
    named = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", example, re.MULTILINE))
    for name in BOT:
        assert services(compose)[name]["env_file"] == ".env"
    # what serve needs, and what compose.yaml interpolates
    assert {"APP_ID", "WEBHOOK_SECRET", "PRIVATE_KEY_FILE", "POSTGRES_PASSWORD"} <= named
    assert {"DATABASE_URL", "REDIS_URL"} <= named
    used = set(re.findall(r"\$\{([A-Z_]+)", (DEPLOY / "compose.yaml").read_text()))
    assert used <= named, used - named
    settings = {name.upper() for name in Settings.model_fields}
    own = {"PRIVATE_KEY_FILE", "POSTGRES_PASSWORD", "APP_PUBLISH"}  # compose.yaml's own
    assert named - own <= settings, named - own - settings
    for line in example.splitlines():  # every secret is left blank in the example
        if (m := re.match(r"^([A-Z_]+)=(.*)$", line)) and _SECRET_NAME.search(m[1]):
            assert m[2] == "", line


def _written(key: str, value: str) -> bool:
    """Whether ``key`` names a secret whose ``value`` is written out, not interpolated."""
    return bool(
        _SECRET_NAME.search(key.upper())
        and not _INTERPOLATED.match(value)
        and not value.startswith("/run/secrets/")
    )


def secret_literals(compose: dict[str, Any]) -> list[str]:
    """``KEY: value`` pairs of the file whose key names a secret and whose value is
    written out rather than taken from deploy/.env."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(value, str) and _written(str(key), value):
                    found.append(f"{key}: {value}")
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(compose)
    text = yaml.safe_dump(compose)
    found += [f"PEM: {m}" for m in re.findall(r"-----BEGIN [A-Z ]+-----", text)]
    for service in services(compose).values():  # a password inside a URL
        for key, value in (service.get("environment") or {}).items():
            password = re.search(r"://[^:/@]+:([^@]+)@", str(value))
            if password and not _INTERPOLATED.match(password[1]):
                found.append(f"{key}: {value}")
    return found


def test_no_secret_is_written_in_the_file(compose: dict[str, Any]) -> None:
    assert secret_literals(compose) == []
    assert compose["secrets"]["app_private_key"]["file"].startswith("${PRIVATE_KEY_FILE")


def test_the_secret_check_itself_spots_literals(compose: dict[str, Any]) -> None:
    leaky = yaml.safe_load(yaml.safe_dump(compose))
    leaky["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"] = "hunter2"
    app = leaky["services"]["app"]["environment"]
    app["WEBHOOK_SECRET"] = "abc"
    app["DATABASE_URL"] = "postgresql+psycopg://threshold:hunter2@postgres:5432/threshold"
    app["PRIVATE_KEY"] = "-----BEGIN RSA PRIVATE KEY-----\nMIIE...\n-----END RSA PRIVATE KEY-----"
    assert len(secret_literals(leaky)) == 5
