"""``threshold-bot serve`` and ``threshold-bot worker``: the App's processes.

- ``serve`` runs the webhook server (uvicorn) with in-process worker threads;
- ``serve --no-workers`` only answers webhooks (lowest latency under load);
- ``worker`` runs worker threads alone (with ``REDIS_URL`` on any host, else on
  the same host, sharing the embedded queue file).

Both read the settings first (the environment, then ``.env``) and stop with one line,
``threshold-bot: error: …``, naming every missing or invalid variable (exit status 2); so
they do when the store's schema is not this version's (``threshold-bot db upgrade``).
``python -m bot.cli.serve serve|worker`` works without the main CLI.
"""

from __future__ import annotations

import gc
import logging
import signal
import socket
import sys
from typing import Annotated, NoReturn

import typer
import uvicorn

from bot.adapters.settings import Role, Settings, SettingsError, load_settings
from bot.adapters.store.schema import SchemaError
from bot.app import logs
from bot.app.runtime import build
from bot.app.web import create_app
from bot.cli.errors import fail

log = logging.getLogger("bot.cli.serve")

SWITCH_INTERVAL = 0.001  # seconds; see serve_command


def _settings(role: Role) -> Settings:
    try:
        settings = load_settings(role)
    except SettingsError as exc:
        fail(str(exc))
    logs.configure(
        settings.log_level,
        settings.secret_values(),
        capture=True,
        repeat_seconds=settings.log_repeat_seconds,
        repeat_burst=settings.log_repeat_burst,
    )
    return settings


def _refuse(exc: SchemaError) -> NoReturn:
    """Stop with ``fail``'s one line on stderr itself, not as a log record: the store's
    schema is not this version's (``threshold-bot db upgrade``)."""
    if isinstance(sys.stderr, logs.LineRecords):
        sys.stderr = sys.stderr.raw
    fail(str(exc))


def serve_command(
    host: Annotated[
        str | None,
        typer.Option(
            help="Address to listen on (default: HOST, else 127.0.0.1).", show_default=False
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            help="Port to listen on, 0: any free port (default: PORT, else 3000).",
            show_default=False,
        ),
    ] = None,
    workers: Annotated[
        bool,
        typer.Option(
            "--workers/--no-workers",
            help="Run workers in this process (default), or only answer webhooks and "
            "leave the jobs to `threshold-bot worker` processes.",
        ),
    ] = True,
) -> None:
    """Run the webhook server with in-process workers.

    Reads the App's settings from the environment, then from a .env file.
    """
    settings = _settings("serve")
    host = settings.host if host is None else host  # HOST / PORT: environment or .env
    port = settings.port if port is None else port
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror}")
    bound = sock.getsockname()[1]
    # Worker threads share the GIL with the event loop: a shorter switch interval
    # (default 5 ms) keeps webhook answers fast while workers are busy.
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        app = create_app(settings, start_workers=workers)
    except SchemaError as exc:
        sock.close()
        _refuse(exc)
    config = uvicorn.Config(app, log_config=None, access_log=False, timeout_graceful_shutdown=30)
    # What start-up built (the modules, mostly) lives as long as the process: out of the
    # collector's way, or each full collection walks all of it, holding the interpreter
    # lock (over 100 ms, a burst of webhooks waiting behind it).
    gc.collect()
    gc.freeze()
    log.info("listening on http://%s:%d", host, bound, extra={"port": bound})
    uvicorn.Server(config).run(sockets=[sock])


def worker_command() -> None:
    """Run workers alone, taking jobs from the shared queue.

    With REDIS_URL set, on any host; without it, on the host of `threshold-bot serve
    --no-workers` (they share the embedded queue file).
    """
    settings = _settings("worker")
    # SIGINT and SIGTERM stay pending until sigwait takes them (the threads inherit the
    # mask). A handler setting an Event deadlocked when the signal came while the main
    # thread was entering Event.wait (holding the Event's lock); a pending one is not lost.
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    try:
        runtime = build(settings)
    except SchemaError as exc:
        _refuse(exc)
    runtime.start_workers()
    log.info("worker running with %d threads", settings.workers)
    signal.sigwait(stop_signals)
    log.info("worker stopping")
    runtime.close()


def main() -> None:
    """Entry point of ``python -m bot.cli.serve``."""
    cli = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None)
    cli.command("serve")(serve_command)
    cli.command("worker")(worker_command)
    cli()


if __name__ == "__main__":
    main()
