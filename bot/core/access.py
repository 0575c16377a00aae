"""Which remote histories an installation may read with the operator's credentials.

The operator decides (docs/security.md): a repository's config or a pull request may
*name* any W&B project or MLflow server, but the App only requests those this policy
allows.  Pure: built from the settings by ``bot.adapters.settings.Settings.source_policy``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bot.core.history.sources import HistoryFactory, HistorySource, SourceRefused
from bot.core.models import SourceSpec

ANY_INSTALLATION = "*"


def normalise_uri(uri: str) -> str:
    """An http(s) URL compared by scheme, host, port and path (no trailing slash, no case
    in scheme and host); other schemes are returned unchanged and never allowed."""
    parts = urlsplit(uri.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return uri.strip()
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme.lower()}://{parts.hostname.lower()}{port}{parts.path.rstrip('/')}"


@dataclass(frozen=True)
class SourcePolicy:
    """The operator's allow-lists.

    - ``wandb_entities``: installation id (as text) or GitHub owner login, or ``*`` for every
      installation -> the W&B entities it may read.  Empty: every installation may read only
      ``default_entity`` (``WANDB_ENTITY``; a spec without an entity reads that one).
    - ``mlflow_uris``: the MLflow servers a config may name; a spec without ``tracking_uri``
      reads ``mlflow_default`` (``MLFLOW_TRACKING_URI``).
    """

    default_entity: str | None = None
    wandb_entities: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    mlflow_default: str | None = None
    mlflow_uris: tuple[str, ...] = ()

    def entities(self, installation_id: int | None, owner: str | None) -> frozenset[str]:
        """The W&B entities an installation (of ``owner``) may read, lower-cased."""
        if not self.wandb_entities:
            return frozenset({self.default_entity.lower()} if self.default_entity else ())
        keys = [ANY_INSTALLATION, str(installation_id) if installation_id is not None else ""]
        keys.append(owner.lower() if owner else "")
        mapping = {k.lower(): v for k, v in self.wandb_entities.items()}
        return frozenset(e.lower() for k in keys if k for e in mapping.get(k, ()))

    def servers(self) -> frozenset[str]:
        """The MLflow servers any config may name (normalised)."""
        named = (self.mlflow_default, *self.mlflow_uris)
        return frozenset(normalise_uri(u) for u in named if u)

    def refusal(
        self, spec: SourceSpec, *, installation_id: int | None, owner: str | None
    ) -> str | None:
        """Why ``spec`` must not be read for this installation; None when it may be.

        ``file`` sources are read from the repository itself and always allowed.
        """
        if spec.kind == "wandb":
            entity = spec.entity or self.default_entity
            allowed = self.entities(installation_id, owner)
            if entity is None:
                if self.wandb_entities:
                    return "the W&B source names no entity and WANDB_ENTITY is not set"
                return None  # the API key's own default entity: the operator's
            if entity.lower() not in allowed:
                return (
                    f"W&B entity {entity!r} is not one this installation may read "
                    "(the operator's setting WANDB_ENTITIES)"
                )
            return None
        if spec.kind == "mlflow":
            uri = spec.tracking_uri or self.mlflow_default
            if uri is None:
                return None  # the MLflow source says what is missing
            if urlsplit(uri.strip()).scheme.lower() not in ("http", "https"):
                return "MLflow tracking servers must be http(s) URLs"
            if normalise_uri(uri) not in self.servers():
                return (
                    "this MLflow tracking server is not one the App may read "
                    "(the operator's settings MLFLOW_TRACKING_URI and MLFLOW_ALLOWED_URIS)"
                )
            return None
        return None


def guarded(
    factory: HistoryFactory, policy: SourcePolicy, *, installation_id: int | None, owner: str | None
) -> HistoryFactory:
    """``factory`` for one installation: a spec ``policy`` refuses raises ``SourceRefused``
    before any source is built or asked for it."""

    def make(spec: SourceSpec) -> HistorySource:
        reason = policy.refusal(spec, installation_id=installation_id, owner=owner)
        if reason is not None:
            raise SourceRefused(f"not read: {reason}")
        return factory(spec)

    return make
