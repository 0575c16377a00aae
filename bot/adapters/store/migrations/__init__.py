"""The store's Alembic migrations: ``env.py`` and one module per revision in ``versions/``.

Run from code by ``bot.adapters.store.schema`` (no ``alembic.ini``); revision ids are plain
strings, ``"0001"`` being the schema of release 1 exactly as its ``create_all`` made it.
A change to a table is a new file ``versions/NNNN_what.py`` (``revision = "NNNN"``,
``down_revision`` the previous head) with explicit ``op`` calls, for both SQLite and
PostgreSQL; ``tests/test_schema_migrations.py`` checks that a store made by the migrations has
exactly the models' schema.
"""
