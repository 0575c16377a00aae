"""The pure analysis: limits, failures, regimes and review assembly (no I/O)."""
