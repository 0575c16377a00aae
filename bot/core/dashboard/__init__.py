"""A repository's threshold dashboard, pure: what it shows (``view``), where each gate goes
(``sections``), its Markdown body (``body``) and the checkboxes a maintainer ticks in it
(``boxes``).  The shell that gathers the view and writes the issue is
``bot.features.dashboard``."""
