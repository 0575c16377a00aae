"""GitHub's REST API through PyGithub: App and token clients, files, items, errors."""

DEFAULT_API_URL = "https://api.github.com"  # github.com's REST API; Enterprise has its own
