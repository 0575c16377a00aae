"""The repository config, ``.github/threshold-bot.yml``: pydantic schema and loader.

Everything is optional: with no config, shell scripts are discovered with no
configuration and the rule defaults of the contract apply.
"""

from __future__ import annotations

from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bot.models import Op, RegimeSettings, RuleSettings, SourceSpec

CONFIG_PATH = ".github/threshold-bot.yml"

Permission = Literal["read", "triage", "write", "maintain", "admin"]


class ConfigError(ValueError):
    """The repository config is not valid; the message names the problem."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GateDecl(_Strict):
    """A gate in a YAML / JSON / TOML file: the key path of its literal."""

    key: str  # dotted key path, e.g. "gsm8k.eval.acc_min"; list items as numbers
    metric: str
    op: Op
    name: str | None = None  # defaults to the key path
    source: str | None = None  # a name in ``sources``; defaults to the file's / config's


class FileDecl(_Strict):
    """Threshold files matched by a glob, and (for structured files) their gates."""

    path: str  # a glob relative to the repository root, e.g. "ci/**/*.yaml"
    source: str | None = None
    gates: tuple[GateDecl, ...] = ()


class PermissionSettings(_Strict):
    """The least repository permission a user needs for each action."""

    rebaseline: Permission = "write"
    approve: Permission = "write"


class RepoConfig(_Strict):
    """Schema of ``.github/threshold-bot.yml``."""

    rule: RuleSettings = Field(default_factory=RuleSettings)
    regimes: RegimeSettings = Field(default_factory=RegimeSettings)
    sources: dict[str, SourceSpec] = Field(default_factory=dict)
    default_source: str | None = None
    files: tuple[FileDecl, ...] = ()
    # globs of shell scripts to scan for gates; empty = every changed .sh/.bash file
    shell: tuple[str, ...] = ()
    permissions: PermissionSettings = Field(default_factory=PermissionSettings)

    @model_validator(mode="after")
    def _sources_exist(self) -> RepoConfig:
        names = set(self.sources)
        wanted = [self.default_source] + [f.source for f in self.files]
        wanted += [g.source for f in self.files for g in f.gates]
        for name in wanted:
            if name is not None and name not in names:
                raise ValueError(f"source {name!r} is not defined under 'sources'")
        return self

    def source(self, name: str | None) -> SourceSpec | None:
        """The named source, else the default source, else None."""
        key = name or self.default_source
        return self.sources.get(key) if key else None


def parse_config(text: str, path: str = CONFIG_PATH) -> RepoConfig:
    """Parse the YAML text of a repository config; raise ``ConfigError`` with a clear reason."""
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    try:
        return RepoConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"{path}: {problems}") from exc
