"""Which remote histories an installation may read with the operator's credentials.

The operator decides (docs/security.md): a repository's config or a pull request may
*name* any W&B project or MLflow server, but the App only requests those this policy
allows.  Pure: built from the settings by ``bot.adapters.settings.Settings.source_policy``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bot.core.history.sources import HistoryFactory, HistorySource, SourceRefused
from bot.core.models import SourceSpec

ANY_INSTALLATION = "*"
INSTALLATION = "installation:"  # ``installation:12345``: the installation with that id
OWNER = "owner:"  # ``owner:acme``: every installation on the GitHub account ``acme``
_INSTALLATION_ID = re.compile(r"[1-9][0-9]{0,19}")
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")  # GitHub's logins: 1-39 characters


def entity_grants(raw: Mapping[str, Iterable[str]]) -> dict[str, tuple[str, ...]]:
    """``WANDB_ENTITIES`` checked, with its keys and entities lower-cased.

    A key is ``installation:ID`` (an installation by its id), ``owner:LOGIN`` (every
    installation on that GitHub account) or ``*`` (every installation).  A bare key (``11``,
    ``acme``) is refused: an account may be named like another installation's id.  Raises
    ``ValueError`` naming the first bad key and how to write it.
    """
    grants: dict[str, tuple[str, ...]] = {}
    for key, entities in raw.items():
        name = _grant_key(key.strip())
        names = tuple(e.strip().lower() for e in entities)
        if not all(names):
            raise ValueError(f'"{key}": a W&B entity is empty')
        grants[name] = tuple(dict.fromkeys(grants.get(name, ()) + names))
    return grants


def _grant_key(key: str) -> str:
    if key == ANY_INSTALLATION:
        return key
    kind, sep, rest = key.partition(":")
    if sep and f"{kind.lower()}:" == INSTALLATION:
        if not _INSTALLATION_ID.fullmatch(rest):
            raise ValueError(f'"{key}": expected installation:ID, the installation\'s number')
        return INSTALLATION + rest
    if sep and f"{kind.lower()}:" == OWNER:
        if not _LOGIN.fullmatch(rest):
            raise ValueError(f'"{key}": expected owner:LOGIN, a GitHub account\'s login')
        return OWNER + rest.lower()
    if sep or not _LOGIN.fullmatch(key):
        raise ValueError(f'"{key}": expected installation:ID, owner:LOGIN or "*"')
    hint = f'"owner:{key}" for the GitHub account {key}'
    if _INSTALLATION_ID.fullmatch(key):
        hint = f'"installation:{key}" for the installation with id {key}, or {hint}'
    raise ValueError(
        f'"{key}" does not say whether it is an installation or an account (an account may '
        f"be named like an installation's id): write {hint}"
    )


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

    - ``wandb_entities``: ``installation:ID``, ``owner:LOGIN`` or ``*`` (every installation)
      -> the W&B entities it may read (``entity_grants``: a bare key is refused).  Empty:
      every installation may read only ``default_entity`` (``WANDB_ENTITY``; a spec without
      an entity reads that one).
    - ``mlflow_uris``: the MLflow servers a config may name; a spec without ``tracking_uri``
      reads ``mlflow_default`` (``MLFLOW_TRACKING_URI``).
    """

    default_entity: str | None = None
    wandb_entities: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    mlflow_default: str | None = None
    mlflow_uris: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "wandb_entities", entity_grants(self.wandb_entities))

    def entities(self, installation_id: int | None, owner: str | None) -> frozenset[str]:
        """The W&B entities an installation (of ``owner``) may read, lower-cased."""
        if not self.wandb_entities:
            return frozenset({self.default_entity.lower()} if self.default_entity else ())
        keys = [ANY_INSTALLATION]
        if installation_id is not None:
            keys.append(f"{INSTALLATION}{installation_id}")
        if owner:
            keys.append(f"{OWNER}{owner.lower()}")
        return frozenset(e for k in keys for e in self.wandb_entities.get(k, ()))

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
