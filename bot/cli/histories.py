"""The run histories of the command line: one factory for every command that reads runs.

``review``, ``rebaseline``, ``drift``, ``backtest``, ``export`` and ``action`` get runs through
``LocalHistories``: a ``file`` source is read from the checkout (the directory the command runs
in, or the Action's workspace) and never from outside it; W&B and MLflow sources are built from
the ``WANDB_*`` / ``MLFLOW_*`` settings; an ``actions`` source (a workflow's artifacts) is read
from GitHub (``GITHUB_API_URL``) with ``GITHUB_TOKEN`` (it needs ``actions: read``), its
repository the spec's ``repo`` or ``GITHUB_REPOSITORY``, without a cache.  What a remote
source needs and the environment lacks (its client library, a credential) is decided here,
once, before any request: a usage problem (exit status 2) naming the variable or extra —
never a "not reviewed" review that lets ``--fail-on`` pass, as it would on a fork PR, whose
workflow gets no secrets.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bot.adapters.extras import install_hint
from bot.adapters.history.files import FileSource, read_history
from bot.cli.errors import UsageProblem
from bot.core.access import normalise_uri
from bot.core.api_paths import repo_path_problem
from bot.core.config import RepoConfig
from bot.core.history.series import with_series
from bot.core.history.sources import BadHistory, HistoryError, HistoryNotFound
from bot.core.models import Gate, History, SourceSpec
from bot.core.render.review import cli_wording

if TYPE_CHECKING:
    from bot.adapters.history.actions_source import ActionsSource
    from bot.adapters.history.mlflow_source import MlflowSource
    from bot.adapters.history.wandb_source import WandbSource
    from bot.adapters.settings import Settings

FORK_PRS = "a fork PR's workflow gets no secrets: docs/cli.md#fork-prs"
# each remote kind: its name in messages, the client library it needs
CLIENTS = {"wandb": ("W&B", "wandb"), "mlflow": ("MLflow", "mlflow")}
NAMES = {"wandb": "W&B", "mlflow": "MLflow", "actions": "GitHub Actions"}  # in error lines
MLFLOW_SECRETS = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")


def inside(root: Path, path: str, what: str) -> Path:
    """``path`` (a repository path) under ``root``, resolved; ``UsageProblem`` naming ``what``
    when it is no repository path or leads out of ``root`` (a symbolic link)."""
    problem = repo_path_problem(path)
    if problem is not None:
        raise UsageProblem(f"{what} {path!r}: {problem}; give a path in the repository")
    resolved = (root / path).resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise UsageProblem(f"{what} {path}: leads out of the repository")
    return resolved


def missing_requirement(
    spec: SourceSpec, settings: Settings, environ: Mapping[str, str]
) -> str | None:
    """What reading ``spec`` needs and this installation or environment lacks, as the one
    line to print; None when nothing is missing (a file source needs nothing).

    W&B needs ``WANDB_API_KEY``.  MLflow needs a server (the source's ``tracking_uri`` or
    ``MLFLOW_TRACKING_URI``); its own server's credentials are optional (an open server),
    but one set empty is a secret that did not arrive."""
    if spec.kind == "actions":
        if not _given(environ.get("GITHUB_TOKEN")):
            return "GitHub Actions: GITHUB_TOKEN is not set (a token that may read actions)"
        if not (spec.repo or _given(environ.get("GITHUB_REPOSITORY"))):
            return "GitHub Actions: no repository (give the source's repo, or GITHUB_REPOSITORY)"
        return None
    if spec.kind not in CLIENTS:
        return None
    name, module = CLIENTS[spec.kind]
    if importlib.util.find_spec(module) is None:  # the Action: its `extras` input
        hint = install_hint(ModuleNotFoundError(f"No module named {module!r}", name=module))
        return f"{name}: {hint}"
    if spec.kind == "wandb":
        key = settings.wandb_api_key
        if key is None or not _given(key.get_secret_value()):
            return f"W&B: WANDB_API_KEY is not set (give it in the environment; {FORK_PRS})"
        return None
    own = settings.mlflow_tracking_uri
    if not _given(spec.tracking_uri or own):
        return (
            "MLflow: MLFLOW_TRACKING_URI is not set (give it in the environment, or the "
            "source's tracking_uri in the config)"
        )
    if spec.tracking_uri and normalise_uri(spec.tracking_uri) != normalise_uri(own or ""):
        return None  # another server: it gets no credentials
    token = settings.mlflow_tracking_token
    empty = [n for n in MLFLOW_SECRETS if n in environ and not _given(environ[n])]
    if token is not None and not _given(token.get_secret_value()):
        empty.insert(0, "MLFLOW_TRACKING_TOKEN")
    if empty:
        return f"MLflow: {empty[0]} is empty (give it in the environment; {FORK_PRS})"
    return None


def _given(value: str | None) -> bool:
    return bool(value and value.strip())


class LocalHistories:
    """The ``HistorySource`` of the command line.

    ``root`` is the checkout ``file`` sources are read from; ``env_file``: the settings may
    come from a ``.env`` file too (not in the Action, whose workspace is the PR's);
    ``settings``: given outright (``export --tracking-uri``); ``strict``: a source that does
    not exist is bad input (``UsageProblem``), as the command line has it, else a
    ``HistoryNotFound`` that the Action's review reports, as the App's does; ``files``: reads
    a ``file`` source's text instead of the checkout (the Action's PR review: the base's, from
    GitHub), raising ``FileNotFoundError`` or a ``HistoryError``.  Every remote
    source is built by :meth:`remote`, which raises ``UsageProblem`` for a missing
    requirement first.
    """

    def __init__(
        self,
        root: Path,
        *,
        env_file: bool = True,
        settings: Settings | None = None,
        skip_bad_lines: bool = False,
        strict: bool = True,
        files: Callable[[str], str] | None = None,
    ) -> None:
        self._root = root.resolve()
        self._files = files
        self._env_file = env_file
        self._settings = settings
        self._skip_bad_lines = skip_bad_lines
        self._strict = strict

    def settings(self) -> Settings:
        """The settings of the environment (``UsageProblem`` when one is invalid)."""
        if self._settings is None:
            from bot.adapters.settings import SettingsError, load_settings

            try:
                if self._env_file:
                    self._settings = load_settings()
                else:
                    self._settings = load_settings(_env_file=None)
            except SettingsError as exc:
                raise UsageProblem(str(exc)) from None
        return self._settings

    def require(self, spec: SourceSpec) -> None:
        """``UsageProblem`` when reading ``spec`` needs what is missing (missing_requirement)."""
        problem = missing_requirement(spec, self.settings(), os.environ)
        if problem is not None:
            raise UsageProblem(problem)

    def remote(self, spec: SourceSpec) -> WandbSource | MlflowSource | ActionsSource:
        """The W&B, MLflow or Actions source reading ``spec``, its requirements checked."""
        from bot.adapters.history.sync import mlflow_source, wandb_source

        self.require(spec)
        if spec.kind == "actions":
            from bot.adapters.github.app import token_client
            from bot.adapters.history.actions_source import ActionsSource

            settings = self.settings()
            client = token_client(os.environ["GITHUB_TOKEN"], base_url=settings.github_api_url)
            return ActionsSource(client, settings.max_artifact_bytes)
        if spec.kind == "wandb":
            return wandb_source(self.settings())
        if spec.kind == "mlflow":
            return mlflow_source(self.settings())
        raise ValueError(f"not a remote source: {spec.describe()}")

    def wandb_spec(self, project: str, base: SourceSpec | None) -> SourceSpec:
        """``--wandb ENTITY/PROJECT`` (``PROJECT`` with ``WANDB_ENTITY``) as the spec to read:
        ``base``'s run filters and summary keys (the config's default source), this project;
        ``UsageProblem`` for a malformed one."""
        from bot.adapters.history.sync import parse_wandb_path

        try:
            target = parse_wandb_path(project, self.settings().wandb_entity)
        except ValueError as exc:
            raise UsageProblem(str(exc)) from None
        place = {"kind": "wandb", "entity": target.entity, "project": target.project}
        return (base or SourceSpec()).model_copy(update=place)

    def fetch(self, spec: SourceSpec) -> History:
        """The runs of ``spec``: ``HistoryError`` when they cannot be read, ``UsageProblem``
        when a requirement of the source is missing (or, ``strict``, it does not exist),
        such as the reader of an artifact's files (TensorBoard's: the ``actions`` extra)."""
        try:
            return self._fetch(spec)
        except HistoryNotFound as exc:
            if not self._strict:
                raise
            raise UsageProblem(cli_wording(str(exc))) from None
        except ModuleNotFoundError as exc:
            hint = install_hint(exc)
            if hint is None:  # not an optional library: a bug
                raise
            raise UsageProblem(f"{NAMES.get(spec.kind, spec.kind)}: {hint}") from None

    def _fetch(self, spec: SourceSpec) -> History:
        if spec.kind == "file":
            try:
                read = self._files or self._text
                return FileSource(read, skip_bad_lines=self._skip_bad_lines).fetch(spec)
            except UsageProblem as exc:  # a path leading out of the checkout
                raise BadHistory(str(exc)) from None
        if spec.kind == "wandb":  # the review names the project it read, WANDB_ENTITY's
            from bot.adapters.history.wandb_source import with_entity

            spec = with_entity(spec, self.settings().wandb_entity)
        if spec.kind == "actions" and not spec.repo:  # the review names the repository read
            spec = spec.model_copy(update={"repo": os.environ.get("GITHUB_REPOSITORY")})
        return self.remote(spec).fetch(spec)

    def _text(self, path: str) -> str:
        """A history file of the checkout, at most as large as the App reads one."""
        from bot.adapters.settings import DEFAULT_MAX_FILE_BYTES as limit

        resolved = inside(self._root, path, "history")
        if not resolved.is_file():
            raise FileNotFoundError(path)
        if resolved.stat().st_size > limit:
            raise BadHistory(f"{path}: over the limit of {limit} bytes")
        return resolved.read_text(encoding="utf-8")


def at_most_one(history: Path | None, wandb: str | None) -> None:
    """``UsageProblem`` when both ``--history`` and ``--wandb`` are given."""
    if history is not None and wandb is not None:
        raise UsageProblem("give one of --history FILE and --wandb ENTITY/PROJECT, not both")


def own_sources(gates: Sequence[Gate]) -> list[SourceSpec]:
    """The distinct sources ``gates`` name (their file's, the config's); ``UsageProblem``
    naming the gates that name none (then ``--history`` or ``--wandb`` is needed)."""
    missing = list(dict.fromkeys(g.name for g in gates if g.source is None))
    if missing:
        raise UsageProblem(
            f"{', '.join(missing)}: no history source; give --history FILE or --wandb "
            "ENTITY/PROJECT, or name one in the config (default_source)"
        )
    return list({g.source.key(): g.source for g in gates if g.source is not None}.values())


def read_runs(
    history: Path | None, wandb: str | None, gates: Sequence[Gate], config: RepoConfig, what: str
) -> History:
    """The runs ``gates`` (of the file ``what``) are judged on, for the commands that read
    one history: the file ``history``, the W&B project ``wandb`` (with the config's default
    source's filters), or with neither the one source the gates name, read from the current
    directory's checkout.  ``UsageProblem`` for bad input (a missing or malformed file, a
    missing credential, gates with no source or several); ``HistoryError`` when the source
    cannot be read now (an outage)."""
    at_most_one(history, wandb)
    if history is not None:
        try:
            return read_history(history)
        except HistoryError as exc:
            raise UsageProblem(str(exc)) from None
    histories = LocalHistories(Path.cwd())
    if wandb is not None:
        spec = histories.wandb_spec(wandb, config.source(None))
        return histories.fetch(with_series(spec, gates))
    sources = own_sources(gates)
    if len(sources) > 1:
        names = ", ".join(s.describe() for s in sources)
        raise UsageProblem(
            f"{what}: its gates read {len(sources)} sources ({names}); "
            "give --history FILE or --wandb ENTITY/PROJECT"
        )
    return histories.fetch(with_series(sources[0], gates))
