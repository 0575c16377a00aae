"""Gates in YAML / JSON / TOML files: declared by key path or pattern (``declared``), recognised
without configuration (``detect``, ``curves``), and in expression strings (``expressions``)."""
