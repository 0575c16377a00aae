"""Gates in Python test files, read with ``ast``, never imported or run (``reader``)."""
