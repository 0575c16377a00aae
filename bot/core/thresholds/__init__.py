"""Finding gates in threshold files and rewriting their literals in place."""
