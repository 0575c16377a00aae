"""The templates of everything threshold-bot writes: the PR comment, the check run, the drift
issue and PR, and the HTML report with its scripts (``static/``).

Not code: this file makes the folder the package ``bot.templates`` (pyproject.toml maps it),
so a checkout, an editable install and a wheel all load it through ``bot.core.render.loader``.
"""
