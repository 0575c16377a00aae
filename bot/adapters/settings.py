"""Settings of the running App, read from the environment or a ``.env`` file.

Names are documented in docs/app-settings.md and are shared with Probot and the
W&B client: ``APP_ID``, ``PRIVATE_KEY`` / ``PRIVATE_KEY_PATH``, ``WEBHOOK_SECRET``
(comma-separated for rotation), ``GITHUB_API_URL``, ``DATABASE_URL``,
``WANDB_API_KEY`` / ``WANDB_BASE_URL`` / ``WANDB_ENTITY`` and ``REDIS_URL``; ``HOST`` and
``PORT`` where ``serve`` listens.
Operational extras: ``WORKERS``, ``MAX_BODY_BYTES``, ``BOT_LOGIN``, ``MAX_ATTEMPTS``,
``RETRY_BASE_SECONDS``, ``RETRY_MAX_SECONDS``, ``LEASE_SECONDS``, ``QUEUE_PATH``,
``EXTRA_HANDLERS``, ``LOG_LEVEL``, ``MAX_FILE_BYTES`` and ``MAX_ARTIFACT_BYTES``; failed
webhook deliveries asked for again: ``REDELIVERY_SECONDS`` and ``REDELIVERY_WINDOW_HOURS``.
Trust boundaries (docs/security.md): ``MAX_THRESHOLD_FILE_BYTES``, ``JOB_TIMEOUT_SECONDS``,
``WANDB_ENTITIES``, ``MLFLOW_TRACKING_URI`` / ``MLFLOW_TRACKING_TOKEN`` /
``MLFLOW_ALLOWED_URIS``, ``MAX_UNVERIFIED_BYTES`` (with ``UNVERIFIED_SMALL_SHARE``,
``UNVERIFIED_SMALL_BODY_BYTES``, ``UNVERIFIED_PEER_SHARE``, ``BODY_MIN_BYTES_PER_SECOND`` and
``BODY_GRACE_SECONDS``), ``STORE_TIMEOUT_SECONDS``,
``DELIVERY_RETENTION_DAYS``, ``RETRY_COOLDOWN_SECONDS`` and ``RECHECK_SECONDS``.  The
interactive report of a reviewed PR: ``REPORT_BASE_URL``, ``REPORT_PRIVATE_REPOS``,
``REPORT_TTL_DAYS`` and ``REPORT_RECHECK_SECONDS``.

``load_settings`` turns the problems into one ``SettingsError`` whose message is one
line naming every variable at fault, so ``serve`` can stop with a clear reason.

Repeats of one error in the log (``bot.app.logs``): ``LOG_REPEAT_SECONDS`` and
``LOG_REPEAT_BURST``.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as SourceError

from bot.core.access import SourcePolicy, entity_grants
from bot.core.config import plain_message

Role = Literal["serve", "worker", "any"]

DEFAULT_MAX_BODY = 25 * 1024 * 1024  # GitHub caps webhook payloads at 25 MB
DEFAULT_MAX_FILE_BYTES = 50 * 1024 * 1024  # the largest file read from a repository
GITHUB_MAX_FILE_BYTES = 100 * 1024 * 1024  # GitHub's blob API serves files up to 100 MB
DEFAULT_MAX_ARTIFACT_BYTES = 50 * 1024 * 1024  # the largest Actions artifact zip downloaded
DEFAULT_THRESHOLD_FILE_BYTES = 1024 * 1024  # threshold files and the repository config
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class SettingsError(ValueError):
    """A missing or invalid setting; the message is one line naming the variable."""


class Settings(BaseSettings):
    """Every setting of the App; secrets are ``SecretStr`` so they never print."""

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", frozen=True
    )

    app_id: int | None = None
    private_key: SecretStr | None = None
    private_key_path: Path | None = None
    webhook_secret: SecretStr | None = None
    github_api_url: str = "https://api.github.com"
    database_url: str = "sqlite:///threshold-bot.db"
    wandb_api_key: SecretStr | None = None
    wandb_base_url: str | None = None
    wandb_entity: str | None = None
    redis_url: str | None = None
    host: str = "127.0.0.1"  # where ``serve`` listens (its --host / --port win)
    port: int = Field(default=3000, ge=0, le=65535)  # 0: any free port

    workers: int = Field(default=2, ge=1, le=64)
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY, ge=1024)
    bot_login: str | None = None  # e.g. "threshold-bot[bot]"; its own events are ignored
    max_attempts: int = Field(default=6, ge=1, le=50)
    retry_base_seconds: float = Field(default=30.0, ge=0)
    retry_max_seconds: float = Field(default=3600.0, ge=0)
    lease_seconds: float = Field(default=120.0, gt=0)
    queue_path: Path | None = None  # embedded queue file; default: next to the database
    extra_handlers: str = ""  # comma-separated modules that register more handlers
    log_level: str = "INFO"
    # repeats of one warning or error: LOG_REPEAT_BURST in full per window, then counted
    # and summarised once per window of LOG_REPEAT_SECONDS (0: write every one; bot.app.logs)
    log_repeat_seconds: float = Field(default=60.0, ge=0)
    log_repeat_burst: int = Field(default=3, ge=1, le=1000)
    max_file_bytes: int = Field(default=DEFAULT_MAX_FILE_BYTES, ge=1, le=GITHUB_MAX_FILE_BYTES)
    # the largest Actions artifact (its zip, as downloaded into memory) an actions source reads
    max_artifact_bytes: int = Field(default=DEFAULT_MAX_ARTIFACT_BYTES, ge=1, le=1024**3)
    # failed webhook deliveries asked for again (bot.features.redelivery): how often one
    # process looks (0: never), and how far back (GitHub redelivers the past 3 days only)
    redelivery_seconds: float = Field(default=60.0, ge=0)
    redelivery_window_hours: float = Field(default=24.0, gt=0, le=72)

    # trust boundaries (docs/security.md)
    # the largest threshold file or repository config read from a PR (history files: above)
    max_threshold_file_bytes: int = Field(
        default=DEFAULT_THRESHOLD_FILE_BYTES, ge=1024, le=GITHUB_MAX_FILE_BYTES
    )
    job_timeout_seconds: float = Field(default=300.0, gt=0)  # wall-clock limit of one delivery
    # "installation:ID", "owner:LOGIN" or "*" -> the W&B entities it may read (a bare key is
    # refused: bot.core.access.entity_grants); empty: every installation may read only
    # WANDB_ENTITY (JSON in the environment)
    wandb_entities: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    mlflow_tracking_uri: str | None = None  # the operator's MLflow server
    mlflow_tracking_token: SecretStr | None = None  # sent to MLFLOW_TRACKING_URI only
    # more MLflow servers a repository config may name (comma-separated http(s) URLs)
    mlflow_allowed_uris: str = ""
    # the total size of webhook bodies held in memory before their signature is checked,
    # counted as the bytes arrive (docs/operations.md#unverified-bodies)
    max_unverified_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    # the share of it only small bodies (at most UNVERIFIED_SMALL_BODY_BYTES) may use
    unverified_small_share: float = Field(default=0.25, ge=0, lt=1)
    unverified_small_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    # the share of it one client (IP address) may hold
    unverified_peer_share: float = Field(default=0.5, gt=0, le=1)
    # a body must arrive at this average rate once BODY_GRACE_SECONDS have passed (0: any)
    body_min_bytes_per_second: int = Field(default=32 * 1024, ge=0)
    body_grace_seconds: float = Field(default=1.0, gt=0)
    store_timeout_seconds: float = Field(default=5.0, gt=0)  # /webhook answers 503 after this
    delivery_retention_days: float = Field(default=30.0, gt=0)  # finished deliveries kept
    retry_cooldown_seconds: float = Field(default=60.0, ge=0)  # per PR, for /threshold-bot retry
    # how often the re-check of tracked PRs and the drift watch run (once across all processes)
    recheck_seconds: float = Field(default=900.0, gt=0)
    # the drift watch (bot.features.drift): on/off, threshold files per repository, and the
    # GitHub requests an installation keeps for webhooks (a round stops there)
    drift_watch: bool = True
    drift_max_files: int = Field(default=50, ge=1, le=1000)
    drift_min_rate_remaining: int = Field(default=200, ge=0)
    # the threshold dashboard (docs/dashboard.md) of every watched repository ("all"), or only
    # of those whose config says ``dashboard: on`` ("off"); a config's ``dashboard: off`` wins
    dashboard: Literal["off", "all"] = "off"
    # each round's budgets (bot.core.budget): the working seconds and threshold-file bytes
    # one repository, and one installation, may spend; what is cut resumes next round
    drift_repository_seconds: float = Field(default=10.0, gt=0)
    drift_repository_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    drift_installation_seconds: float = Field(default=60.0, gt=0)
    drift_installation_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    # the interactive report of each reviewed PR, served at REPORT_BASE_URL/reports/TOKEN
    # (unset: no reports); private repositories only when the operator opts in
    report_base_url: str | None = None
    report_private_repos: bool = False
    report_ttl_days: float = Field(default=30.0, gt=0)  # a report lives this long after a review
    # a report older than this is shown only once its repository was seen, within this time,
    # still public (or REPORT_PRIVATE_REPOS) and the App's (bot.app.reports)
    report_recheck_seconds: float = Field(default=600.0, gt=0)

    @field_validator("wandb_entities")
    @classmethod
    def _grants(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        return entity_grants(value)

    @property
    def webhook_secrets(self) -> tuple[bytes, ...]:
        """Every accepted webhook secret (``WEBHOOK_SECRET`` split on commas)."""
        if self.webhook_secret is None:
            return ()
        parts = self.webhook_secret.get_secret_value().split(",")
        return tuple(p.strip().encode() for p in parts if p.strip())

    @property
    def unverified_peer_bytes(self) -> int:
        """The bytes of unverified bodies one client may hold (``UNVERIFIED_PEER_SHARE``)."""
        return max(1, int(self.max_unverified_bytes * self.unverified_peer_share))

    @property
    def unverified_small_reserve_bytes(self) -> int:
        """The bytes of the unverified budget only small bodies may use."""
        return int(self.max_unverified_bytes * self.unverified_small_share)

    @property
    def handler_modules(self) -> tuple[str, ...]:
        """The extra handler modules named in ``EXTRA_HANDLERS``."""
        return tuple(m.strip() for m in self.extra_handlers.split(",") if m.strip())

    def source_policy(self) -> SourcePolicy:
        """What any installation may read with the operator's credentials (bot.core.access)."""
        extra = tuple(u.strip() for u in self.mlflow_allowed_uris.split(",") if u.strip())
        return SourcePolicy(
            default_entity=self.wandb_entity,
            wandb_entities=dict(self.wandb_entities),
            mlflow_default=self.mlflow_tracking_uri,
            mlflow_uris=extra,
        )

    def report_key(self) -> bytes | None:
        """The key the report links are derived from (``bot.adapters.store.reports``): a hash
        of the App's private key (its DER form, however the PEM is written), so a link stays
        the same across restarts and a copy of the database alone holds none.  None without
        a key."""
        pem = self.private_key_pem()
        return None if pem is None else _report_key(pem)

    def private_key_pem(self) -> str | None:
        """The App's PEM key, from ``PRIVATE_KEY`` (``\\n`` escapes allowed) or the file."""
        if self.private_key is not None:
            return self.private_key.get_secret_value().replace("\\n", "\n")
        if self.private_key_path is not None:
            return self.private_key_path.read_text(encoding="utf-8")
        return None

    def secret_values(self) -> tuple[str, ...]:
        """Every secret string, for redaction from logs."""
        values = [s.decode() for s in self.webhook_secrets]
        secrets = (
            self.private_key,
            self.webhook_secret,
            self.wandb_api_key,
            self.mlflow_tracking_token,
        )
        for secret in secrets:
            if secret is not None and secret.get_secret_value():
                values.append(secret.get_secret_value())
        return tuple(v for v in values if len(v) >= 4)

    def embedded_queue_path(self) -> Path:
        """The SQLite file of the embedded job queue (used when ``REDIS_URL`` is unset)."""
        if self.queue_path is not None:
            return self.queue_path
        from sqlalchemy.engine import make_url  # the store's library: the app extra

        url = make_url(self.database_url)
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            db = Path(str(url.database))
            return db.with_name(f"{db.stem}-queue{db.suffix or '.db'}")
        return Path("threshold-bot-queue.db")


def load_settings(role: Role = "any", **overrides: object) -> Settings:
    """Read and check the settings ``role`` needs; raise ``SettingsError`` naming every
    problem on one line (``APP_ID: required ...; WEBHOOK_SECRET: required ...``)."""
    try:
        settings = Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise SettingsError("; ".join(_problem(err) for err in exc.errors())) from None
    except SourceError as exc:  # a JSON setting (WANDB_ENTITIES) that is not JSON
        field = re.search(r'field "(\w+)"', str(exc))
        name = field.group(1).upper() if field else "settings"
        raise SettingsError(f"{name}: not valid JSON") from None
    check_settings(settings, role)
    return settings


def _problem(err: ErrorDetails) -> str:
    name = str(err["loc"][0]).upper() if err["loc"] else "settings"
    return f"{name}: {plain_message(err)}"


def check_settings(settings: Settings, role: Role) -> None:
    """Check what ``serve`` / ``worker`` need beyond the field types; every problem at once."""
    problems: list[str] = []
    if role in ("serve", "worker"):
        if settings.app_id is None:
            problems.append("APP_ID: required (the GitHub App's id)")
        problems += _private_key_problems(settings)
    if role == "serve" and not settings.webhook_secrets:
        problems.append("WEBHOOK_SECRET: required (the webhook secret of the GitHub App)")
    if role == "serve":
        problems += _body_room_problems(settings)
    if not _database_url_valid(settings.database_url):
        problems.append("DATABASE_URL: not a valid SQLAlchemy URL")
    if settings.redis_url is not None and not settings.redis_url.startswith(
        ("redis://", "rediss://", "unix://")
    ):
        problems.append("REDIS_URL: expected a redis://, rediss:// or unix:// URL")
    if not settings.github_api_url.startswith(("https://", "http://")):
        problems.append("GITHUB_API_URL: expected an http(s) URL")
    if settings.report_base_url and not _http_url(settings.report_base_url):
        problems.append("REPORT_BASE_URL: expected an http(s) URL (where the App is reached)")
    if settings.log_level.upper() not in LOG_LEVELS:
        problems.append(f"LOG_LEVEL: expected one of {', '.join(LOG_LEVELS)}")
    if problems:
        raise SettingsError("; ".join(problems))


def _body_room_problems(settings: Settings) -> list[str]:
    """A delivery of ``MAX_BODY_BYTES`` must fit in what one client may hold of the
    unverified budget and in the part of it large bodies may use, or it could never arrive."""
    large = settings.max_unverified_bytes - settings.unverified_small_reserve_bytes
    room = min(settings.unverified_peer_bytes, large)
    if room >= settings.max_body_bytes:
        return []
    return [
        f"MAX_UNVERIFIED_BYTES: a body may hold only {room} bytes of it (one client's share, "
        f"UNVERIFIED_PEER_SHARE, and what UNVERIFIED_SMALL_SHARE leaves to large bodies), less "
        f"than MAX_BODY_BYTES ({settings.max_body_bytes}): raise it or lower MAX_BODY_BYTES"
    ]


def _database_url_valid(url: str) -> bool:
    """Whether SQLAlchemy reads ``url``; True without SQLAlchemy (a plain install has no store,
    and a command that needs one says which extra to install)."""
    try:
        from sqlalchemy.engine import make_url
    except ImportError:
        return True
    try:
        make_url(url)
    except Exception:
        return False
    return True


def _http_url(value: str) -> bool:
    """Whether ``value`` is an http(s) URL with a host and no query or fragment."""
    parts = urlsplit(value)
    return (
        parts.scheme in ("http", "https")
        and bool(parts.netloc)
        and not (parts.query or parts.fragment)
    )


def _private_key_problems(settings: Settings) -> list[str]:
    if settings.private_key is None and settings.private_key_path is None:
        return ["PRIVATE_KEY: required (or PRIVATE_KEY_PATH, a PEM file)"]
    name = "PRIVATE_KEY" if settings.private_key is not None else "PRIVATE_KEY_PATH"
    try:
        pem = settings.private_key_pem() or ""
    except OSError as exc:
        return [f"PRIVATE_KEY_PATH: cannot read the file ({exc.strerror})"]
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        return [f"{name}: not a PEM private key"]
    return []


@functools.lru_cache(maxsize=4)
def _report_key(pem: str) -> bytes:
    """``Settings.report_key`` of a PEM key, parsed once per key, not once per review."""
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        load_pem_private_key,
    )

    der = load_pem_private_key(pem.encode(), password=None).private_bytes(
        Encoding.DER, PrivateFormat.PKCS8, NoEncryption()
    )
    return hmac.new(b"threshold-bot report links", der, hashlib.sha256).digest()
