"""Alembic's environment: migrate the connection ``bot.adapters.store.schema`` hands over.

``schema.upgrade`` puts an open connection, already in its transaction and holding the
migration lock, in ``config.attributes["connection"]``; the migrations run on it and the
caller commits.  There is no offline (SQL script) mode.
"""

from __future__ import annotations

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run the migrations with `threshold-bot db upgrade`")
context.configure(connection=connection)
with context.begin_transaction():  # a no-op: the caller's transaction is already open
    context.run_migrations()
