"""Run-history sources: local files, W&B, MLflow, and the run cache."""
