"""sync_sources and ``threshold-bot sync`` against the fake W&B server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from bot.adapters.history.cache import CachedSource
from bot.adapters.history.mlflow_source import MlflowSource
from bot.adapters.history.sync import RemoteSources, parse_wandb_path, sync_sources
from bot.adapters.history.wandb_source import WandbSource
from bot.adapters.store.db import init_db, make_engine
from bot.cli.sync import sync_command
from bot.core.models import SourceSpec
from tests.fakes.wandb_server import API_KEY, FakeWandb, nightly_run, serve

pytestmark = pytest.mark.servers

ENTITY = "acme"
A = SourceSpec(kind="wandb", entity=ENTITY, project="gsm8k_ci")
B = SourceSpec(kind="wandb", entity=ENTITY, project="math_ci", tags=("nightly",))
MISSING = SourceSpec(kind="wandb", entity=ENTITY, project="nope")
FILE = SourceSpec(kind="file", path="runs.jsonl")


@pytest.fixture()
def fake() -> FakeWandb:
    """Two projects: 12 runs in A, 8 in B."""
    server = FakeWandb()
    for i in range(12):
        server.add_run(ENTITY, "gsm8k_ci", nightly_run(i))
    for i in range(8):
        server.add_run(ENTITY, "math_ci", nightly_run(i))
    return server


@pytest.fixture()
def url(fake: FakeWandb) -> Iterator[str]:
    """The base URL of the running fake."""
    with serve(fake) as base:
        yield base


@pytest.fixture()
def sessions(tmp_path: Path) -> sessionmaker[Session]:
    """A fresh SQLite store."""
    return init_db(make_engine(f"sqlite:///{tmp_path / 'bot.db'}"))


def count(fake: FakeWandb, project: str, tag: str | None = None) -> int:
    """Runs of a project in the fake (carrying ``tag``, if given)."""
    runs = fake.projects[(ENTITY, project)].values()
    return sum(1 for r in runs if tag is None or tag in r.tags)


def test_sync_sources_reports_each_source_and_survives_failures(
    fake: FakeWandb, url: str, sessions: sessionmaker[Session]
) -> None:
    source = CachedSource(sessions, WandbSource(api_key=API_KEY, base_url=url))
    seen: dict[str, tuple[int, int | None]] = {}

    def progress(spec: SourceSpec, read: int, total: int | None) -> None:
        seen[spec.describe()] = (read, total)

    results = sync_sources(source, [A, B, MISSING, FILE, A], progress=progress)
    assert set(results) == {A.key(), B.key(), MISSING.key()}
    assert results[A.key()].new == count(fake, "gsm8k_ci")
    assert results[B.key()].total == count(fake, "math_ci", "nightly")
    assert results[A.key()].changed and results[B.key()].changed
    missing = results[MISSING.key()]
    assert missing.error is not None and "acme/nope" in missing.error
    assert not missing.changed
    assert seen[A.describe()] == (count(fake, "gsm8k_ci"),) * 2

    again = sync_sources(source, [A, B])
    assert not any(r.changed for r in again.values())
    fake.add_run(ENTITY, "math_ci", nightly_run(9))  # odd: tagged nightly
    third = sync_sources(source, [A, B])
    assert not third[A.key()].changed
    assert third[B.key()].changed and third[B.key()].new == 1


def test_remote_sources_refuse_file_specs() -> None:
    remote = RemoteSources(WandbSource(api_key=API_KEY), MlflowSource())
    with pytest.raises(ValueError, match=r"file:runs\.jsonl"):
        remote.fetch_runs(FILE)


def test_parse_wandb_path() -> None:
    assert parse_wandb_path("acme/gsm8k_ci") == SourceSpec(entity="acme", project="gsm8k_ci")
    assert parse_wandb_path("gsm8k_ci", "team").entity == "team"
    for bad in ("a/b/c", "gsm8k_ci", "/", ""):
        with pytest.raises(ValueError, match="ENTITY/PROJECT"):
            parse_wandb_path(bad)


# --------------------------------------------------------------------------- CLI


@pytest.fixture()
def cli(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> typer.Typer:
    """A typer app with ``sync`` registered as the lead does, and its environment."""
    monkeypatch.setenv("WANDB_API_KEY", API_KEY)
    monkeypatch.setenv("WANDB_BASE_URL", url)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.chdir(tmp_path)
    app = typer.Typer()
    app.command("sync")(sync_command)
    app.command("noop")(lambda: None)  # keeps "sync" a subcommand, as in bot/cli.py
    return app


def test_cli_sync_then_warm_sync(fake: FakeWandb, cli: typer.Typer) -> None:
    runner = CliRunner()
    first = runner.invoke(cli, ["sync", "acme/gsm8k_ci"])
    assert first.exit_code == 0, first.output
    assert f"wandb:acme/gsm8k_ci: {count(fake, 'gsm8k_ci')} new" in first.stdout
    second = runner.invoke(cli, ["sync", "acme/gsm8k_ci"])
    assert second.exit_code == 0
    assert "0 new, 0 updated, 0 removed" in second.stdout
    full = runner.invoke(cli, ["sync", "acme/gsm8k_ci", "--full"])
    assert full.exit_code == 0
    assert f"{count(fake, 'gsm8k_ci')} cached" in full.stdout


def test_cli_sync_every_source_of_a_config(
    fake: FakeWandb, cli: typer.Typer, tmp_path: Path
) -> None:
    config = tmp_path / "threshold-bot.yml"
    config.write_text(
        "sources:\n"
        "  gsm8k: {kind: wandb, entity: acme, project: gsm8k_ci}\n"
        "  math: {kind: wandb, entity: acme, project: math_ci, tags: [nightly]}\n"
        "  local: {kind: file, path: runs.jsonl}\n"
    )
    other = tmp_path / "other.db"
    result = CliRunner().invoke(
        cli, ["sync", "--config", str(config), "--database-url", f"sqlite:///{other}"]
    )
    assert result.exit_code == 0, result.output
    assert f"wandb:acme/gsm8k_ci: {count(fake, 'gsm8k_ci')} new" in result.stdout
    assert f"wandb:acme/math_ci: {count(fake, 'math_ci', 'nightly')} new" in result.stdout
    assert other.exists()


def test_cli_sync_bad_input_exits_2(cli: typer.Typer, tmp_path: Path) -> None:
    runner = CliRunner()
    bad_path = runner.invoke(cli, ["sync", "a/b/c"])
    assert bad_path.exit_code == 2
    assert "invalid W&B project 'a/b/c'" in bad_path.stderr
    nothing = runner.invoke(cli, ["sync"])
    assert nothing.exit_code == 2
    assert "nothing to sync" in nothing.stderr
    config = tmp_path / "bad.yml"
    config.write_text("sources: [1, 2]\n")
    bad_config = runner.invoke(cli, ["sync", "--config", str(config)])
    assert bad_config.exit_code == 2
    assert "bad.yml" in bad_config.stderr
    assert "Traceback" not in bad_config.output
    missing_dir = tmp_path / "no" / "such" / "dir" / "runs.db"
    for url in ("not a url", f"sqlite:///{missing_dir}"):
        bad_url = runner.invoke(cli, ["sync", "acme/gsm8k_ci", "--database-url", url])
        assert bad_url.exit_code == 2, bad_url.output
        assert bad_url.stderr.startswith("threshold-bot: error: the run cache: ")
        assert len(bad_url.stderr.splitlines()) == 1


def test_cli_sync_failing_source_exits_1(cli: typer.Typer) -> None:
    result = CliRunner().invoke(cli, ["sync", "acme/nope"])
    assert result.exit_code == 1
    assert "wandb:acme/nope: FAILED" in result.stderr
    assert "not found" in result.stderr
