"""Which optional extra of the package brings which library (``pyproject.toml``'s extras).

A plain ``pip install threshold-bot`` carries the command line: the analysis, the parsers, the
renderers, history files and GitHub.  The rest is imported only where it is used; when it is
missing, :func:`install_hint` turns the ``ImportError`` into the one line that says what to
install (docs/stack.md, "Extras").
"""

from __future__ import annotations

import importlib.util

__all__ = ["EXTRA_OF_MODULE", "install_hint", "require"]

# top-level module -> (the extra that installs it, what it is for, in a sentence's words)
EXTRA_OF_MODULE: dict[str, tuple[str, str]] = {
    "wandb": ("wandb", "the W&B client"),
    "mlflow": ("mlflow", "the MLflow client"),
    "tensorboardX": ("actions", "the TensorBoard event reader"),
    "google_crc32c": ("actions", "the TensorBoard event reader"),
    "fastapi": ("app", "the App's web server"),
    "starlette": ("app", "the App's web server"),
    "uvicorn": ("app", "the App's web server"),
    "httptools": ("app", "the App's web server"),
    "msgspec": ("app", "the App's web server"),
    "sqlalchemy": ("app", "the App's store"),
    "alembic": ("app", "the App's store"),
    "huey": ("app", "the App's queue"),
    "prometheus_client": ("app", "the App's metrics"),
    "cachetools": ("app", "the App's report pages"),
    "psycopg": ("postgres", "the PostgreSQL driver"),
    "redis": ("redis", "the Redis client"),
}


def install_hint(exc: ImportError) -> str | None:
    """``needs …, which is not installed: pip install "threshold-bot[extra]"`` when ``exc`` is
    the absence of an optional library; None for any other import error (a bug, not a choice)."""
    name = exc.name or ""
    found = EXTRA_OF_MODULE.get(name.partition(".")[0])
    if not isinstance(exc, ModuleNotFoundError) or found is None:
        return None
    extra, what = found
    return f'needs {what} ({name}), which is not installed: pip install "threshold-bot[{extra}]"'


def require(module: str) -> None:
    """Raise ``ModuleNotFoundError`` for ``module`` now when it is not installed: for a library
    that another one imports only if present (huey's Redis storage), whose own error would not
    name it."""
    if importlib.util.find_spec(module) is None:
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)
