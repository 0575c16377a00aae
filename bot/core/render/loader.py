"""The one loader of the templates: the Jinja environments and the report's static files.

The templates live in the top-level ``templates/`` folder, which pyproject.toml installs as
the package ``bot.templates``; importlib finds it the same way in an editable checkout and in
an installed wheel, so nothing here builds a path from this file's location.

Two environments read it.  ``markdown_environment`` (the comment, the check run, the drift
issue and PR) passes every ``{{ … }}`` output through ``bot.core.render.markdown.escape``
(its ``finalize`` hook) unless the value is already ``Markdown``, so a template cannot forget
to escape outside text, and prints None as a dash.  ``html_environment`` (the HTML report)
autoescapes HTML.  Both refuse undefined names.  ``render_markdown`` renders a Markdown
template with its blank lines tidied; ``static_text`` reads ``templates/static/``.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from jinja2 import Environment, PackageLoader, StrictUndefined

from bot.core.render.markdown import code, escape, join

__all__ = [
    "PACKAGE",
    "html_environment",
    "markdown_environment",
    "render_blocks",
    "render_markdown",
    "static_text",
]

PACKAGE = "bot.templates"  # the top-level templates/ folder, as installed


@cache
def _loader() -> PackageLoader:
    return PackageLoader(PACKAGE, ".")


def _finalize(value: object) -> object:
    """Every ``{{ … }}`` output: trusted Markdown as is, None as a dash, the rest escaped."""
    if value is None:
        return "—"
    return escape(value)


@cache
def markdown_environment() -> Environment:
    """The environment of the Markdown templates (``*.md.j2``), escaping by default."""
    env = Environment(
        loader=_loader(),
        autoescape=False,
        finalize=_finalize,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(code=code, join_md=join)
    return env


def render_markdown(template: str, context: dict[str, object]) -> str:
    """``template`` rendered with ``context``: runs of blank lines as one, no blank line at
    either end, one newline at the end (a template may open each part with a blank line)."""
    return _tidy(markdown_environment().get_template(template).render(context))


def render_blocks(template: str, context: dict[str, object]) -> list[tuple[str, str]]:
    """Each block of ``template``, in its order, rendered alone with ``context`` and tidied as
    :func:`render_markdown` tidies a whole template: ``(name, text)``."""
    loaded = markdown_environment().get_template(template)
    found = []
    for name, block in loaded.blocks.items():
        found.append((name, _tidy("".join(block(loaded.new_context(context))))))
    return found


def _tidy(text: str) -> str:
    """Runs of blank lines as one, none at either end, one newline at the end."""
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.strip() + "\n"


@cache
def html_environment() -> Environment:
    """The environment of the HTML report's template, autoescaping HTML."""
    return Environment(
        loader=_loader(),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def static_text(name: str) -> str:
    """The text of ``templates/static/<name>`` (the report's scripts)."""
    return files(PACKAGE).joinpath("static", name).read_text(encoding="utf-8")
