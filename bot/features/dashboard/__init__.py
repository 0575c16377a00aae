"""The threshold dashboard of a repository: one issue, written by the drift watch from its
evaluations (``bot.core.dashboard`` renders it), and its checkboxes acted on when a
maintainer ticks them."""
