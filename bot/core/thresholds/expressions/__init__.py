"""Literals inside expression strings (``median(data["train/loss"]) < 1.1``): a small grammar,
parsed, never evaluated; shared by shell scripts and YAML / JSON files."""
