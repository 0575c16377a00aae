"""Local stand-ins for GitHub, W&B and MLflow used by tests and the demo."""
