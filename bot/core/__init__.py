"""The pure functional core: models, analysis, rendering and parsing, with no I/O."""
