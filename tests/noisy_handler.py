"""A test handler that makes third-party code write to the logs in every way it can
(``tests/test_logs.py`` loads it into a real server through ``EXTRA_HANDLERS``).

For the made-up event ``log_test`` it: reads a pull request through the App's real
GitHub client (the test's fake GitHub answers with a secondary rate limit first, so
PyGithub's retry logger speaks); prints to stdout and stderr (the latter naming a
secret); issues a warning; imports MLflow, which gives its loggers their own handlers
after the App configured logging, and logs through one; logs once while a plain handler
on the root logger writes to stderr; and lets an exception escape a thread.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import warnings
from typing import Any

from bot.core.routing import Router
from bot.features.context import HandlerContext

EVENT = "log_test"
PRINTED = "printed to stdout"
WARNED = "a library warning"
LATE = "from a handler added after start-up"
UNCAUGHT = "escaped from a thread"
ROOTED = "while a plain handler sat on the root logger"

router = Router[HandlerContext]()


def _escape() -> None:
    raise RuntimeError(UNCAUGHT)


@router.register(EVENT)
def noisy(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Make every kind of third-party output once."""
    ctx.installation_client().pull(payload["repository"]["full_name"], payload["number"])
    print(PRINTED)
    print(f"printed to stderr: {os.environ['WEBHOOK_SECRET']}", file=sys.stderr)
    warnings.warn(WARNED, UserWarning, stacklevel=1)
    import mlflow  # noqa: F401  # configures its loggers on import

    logging.getLogger("mlflow.tracking").warning(LATE)
    plain = logging.StreamHandler(sys.stderr)
    logging.getLogger().addHandler(plain)
    try:
        logging.getLogger("rooted.library").warning(ROOTED)
    finally:
        logging.getLogger().removeHandler(plain)
    thread = threading.Thread(target=_escape, name="escaping")
    thread.start()
    thread.join()
