"""CSV threshold tables: a gate per row (``reader.parse_table``)."""
