"""Persistent state behind SQLAlchemy: deliveries, run cache, approvals, audit."""
