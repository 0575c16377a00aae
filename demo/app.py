"""``python -m demo.app``: the whole App reviewing a threshold PR, offline, in one command.

It starts a local fake of GitHub's REST API (``tests/fakes``: App auth, PRs, comments,
check runs, validated against GitHub's OpenAPI description), fills a repository with the
demo example (``demo.data``: a year of nightly runs as a history file, the merged PRs
that moved the metrics, and a PR that changes the thresholds), starts the App as
``serve`` does (uvicorn, SQLite store, embedded queue, worker threads), delivers a signed
``pull_request.opened`` webhook and prints the comment and the check run the App made, and
where the PR's interactive report is served (``REPORT_BASE_URL`` is the App's local
address).  ``--serve`` keeps the App up after that, until Ctrl+C, so the report can be
opened in a browser.

Printed to a terminal, the review is shown as ``threshold-bot review``'s table (the App's
own analysis of the PR, run again on the fake GitHub: the same inputs, the same review), and
the Markdown the App posted is written to ``build/demo/`` (under the working directory)
instead; piped or redirected, the Markdown is printed as posted.

``DemoApp`` is reused by ``bench/bench_pr_review.py``.
"""

from __future__ import annotations

import json
import re
import secrets
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from rich.console import Console

from bot.adapters.github.api import CHECK_NAME
from bot.adapters.github.app import client_factory
from bot.adapters.settings import Settings
from bot.adapters.store import deliveries
from bot.app.runtime import Runtime, build
from bot.app.web import create_app
from bot.core.config import CONFIG_PATH
from bot.core.history.sources import HistoryUnavailable
from bot.core.models import History, Review, SourceSpec
from bot.core.render.terminal import review_table
from bot.core.signature import sign
from bot.features.review.attribution import attribute
from bot.features.review.pull import HistoryRouter, analyse, read_thresholds, repo_history
from demo.data import SCRIPT_PATH, DemoRepo, build_example, dump_jsonl
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import PullRequest, Repo

REPO = "acme/rl-training"
INSTALLATION = 1
HISTORY_PATH = "ci/history/gsm8k_nightly.jsonl"
POSTED_DIR = Path("build/demo")  # where a terminal's demo writes what the App posted
REPORT_LINK = re.compile(r"https?://[^\s)\]]+/reports/[A-Za-z0-9_-]{43}")
DEMO_CONFIG = f"""\
# threshold-bot: the nightly's gates read the run history committed next to the script.
sources:
  nightly:
    kind: file
    path: {HISTORY_PATH}
files:
  - path: {SCRIPT_PATH}
    source: nightly
"""


class _NoRemoteHistory:
    """The demo's W&B stand-in: not needed, since every gate reads the history file."""

    def fetch(self, spec: SourceSpec) -> History:
        raise HistoryUnavailable(f"{spec.describe()}: the demo runs offline")


def seed_repository(
    fake: FakeGitHub,
    example: DemoRepo,
    base_script: str,
    records: Sequence[dict[str, Any]],
) -> Repo:
    """The demo repository: every merged PR as a squash commit on main, then the history
    (its ``commit`` fields rewritten to the fake's SHAs) and the config."""
    repo = fake.add_repo(
        REPO,
        installation_id=INSTALLATION,
        files={"README.md": "# rl-training\n", SCRIPT_PATH: base_script},
    )
    shas = {example.initial_commit: repo.head("main")}
    for demo in example.pulls:
        change: dict[str, str | None] = {f"changes/{demo.number}.md": f"{demo.title}\n"}
        pr = repo.open_pr(
            demo.number,
            head=f"pr-{demo.number}",
            head_files=change,
            title=demo.title,
            user=demo.author,
            date=demo.merged_at,
        )
        message = f"{demo.title} (#{demo.number})"
        sha = repo.commit("main", change, message=message, date=demo.merged_at)
        _mark_merged(pr, sha)
        repo.associate(sha, demo.number)
        shas[demo.merge_commit] = sha
    history = [{**r, "commit": shas.get(str(r.get("commit")), r.get("commit"))} for r in records]
    files: dict[str, str | None] = {HISTORY_PATH: dump_jsonl(history), CONFIG_PATH: DEMO_CONFIG}
    repo.commit("main", files, message="Record the nightly runs")
    return repo


def _mark_merged(pr: PullRequest, sha: str) -> None:
    pr.state, pr.merged, pr.merge_commit_sha = "closed", True, sha
    pr.merged_at = pr.closed_at = pr.repo.objects[sha].date


@dataclass
class Delivered:
    """One webhook delivery and how it went."""

    delivery_id: str
    status_code: int
    ack_ms: float
    seconds: float  # from the POST until the worker finished it
    outcome: deliveries.Delivery


@dataclass
class DemoApp:
    """A running App wired to a running fake GitHub."""

    fake: FakeGitHub
    repo: Repo
    runtime: Runtime
    url: str
    secret: str

    def pull_event(self, action: str, pr: PullRequest, timeout: float = 120.0) -> Delivered:
        """Deliver a signed ``pull_request`` event for ``pr``; wait until it is processed."""
        payload = {
            "action": action,
            "number": pr.number,
            "pull_request": self.fake.shapes.pull_request(pr),
            "repository": self.fake.shapes.repository(self.repo),
            "installation": {"id": INSTALLATION},
            "sender": self.fake.shapes.user(pr.user),
        }
        body = json.dumps(payload).encode()
        delivery_id = secrets.token_hex(16)
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": "pull_request",
            "X-GitHub-Delivery": delivery_id,
            "X-Hub-Signature-256": sign(body, self.secret.encode()),
        }
        started = time.perf_counter()
        answer = httpx.post(f"{self.url}/webhook", content=body, headers=headers, timeout=30)
        ack_ms = (time.perf_counter() - started) * 1000
        deadline = started + timeout
        while True:
            found = deliveries.get(self.runtime.sessions, delivery_id)
            if found is not None and found.status in ("done", "failed", "ignored"):
                break
            if time.perf_counter() > deadline:
                raise TimeoutError(f"delivery {delivery_id} not processed in {timeout:.0f} s")
            time.sleep(0.01)
        seconds = time.perf_counter() - started
        return Delivered(delivery_id, answer.status_code, ack_ms, seconds, found)


@contextmanager
def _listening() -> Iterator[tuple[socket.socket, str]]:
    """A socket on a free local port, and the App's URL there."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        yield sock, f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@contextmanager
def _serve(settings: Settings, runtime: Runtime, sock: socket.socket) -> Iterator[None]:
    config = uvicorn.Config(create_app(settings, runtime), log_config=None, access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the webhook server did not start")
            time.sleep(0.01)
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=60)


@contextmanager
def demo_app(
    workdir: Path, repo_history: DemoRepo, base_script: str, records: Sequence[dict[str, Any]]
) -> Iterator[DemoApp]:
    """Start the fake GitHub (seeded by ``seed_repository``) and the App; stop both on exit."""
    with FakeGitHub() as fake, _listening() as (sock, url):
        repo = seed_repository(fake, repo_history, base_script, records)
        secret = secrets.token_hex(16)
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]
            app_id=fake.app_id,
            private_key=fake.private_key,
            webhook_secret=secret,
            github_api_url=fake.base_url,
            database_url=f"sqlite:///{workdir / 'threshold-bot.db'}",
            queue_path=workdir / "queue.db",
            bot_login=fake.state.bot_login,
            workers=2,
            report_base_url=url,  # the interactive reports, served by the App itself
        )
        runtime = build(
            settings, github=client_factory(settings), history=lambda spec: _NoRemoteHistory()
        )
        with _serve(settings, runtime, sock):
            yield DemoApp(fake, repo, runtime, url, secret)
        fake.check()


def report_link(app: DemoApp, comment: str) -> str:
    """Where the comment's interactive report is served, and what the App answers there."""
    found = REPORT_LINK.search(comment)
    if found is None or not found.group(0).startswith(app.url):
        return "none: the comment links no report"
    answer = httpx.get(found.group(0), timeout=30)
    size = len(answer.content) / 1024
    return f"{found.group(0)}  ({answer.status_code}, {size:.0f} KB of HTML)"


def _rule(title: str) -> str:
    return f"\n{'─' * 3} {title} {'─' * max(3, 96 - len(title))}\n"


def app_review(app: DemoApp, number: int) -> Review:
    """The App's review of PR ``number``, as its handler builds it: the PR's threshold files
    and config, the history at the base branch, the regime changes tied to merged PRs."""
    gh = app.runtime.worker.github(INSTALLATION)
    pull = gh.pull(REPO, number)
    found = read_thresholds(gh, REPO, pull)
    analysis = analyse(found, HistoryRouter(repo_history(gh, REPO, pull.base_ref), None))
    return attribute(gh, REPO, analysis.review, ref=pull.head_sha)


def _save(name: str, text: str) -> str:
    """``text`` written to ``POSTED_DIR/name``; the path, for the reader."""
    POSTED_DIR.mkdir(parents=True, exist_ok=True)
    path = POSTED_DIR / name
    path.write_text(text, encoding="utf-8")
    return path.as_posix()


def _show_posted(app: DemoApp, number: int, head_sha: str) -> None:
    """What the App posted, for a terminal: the review as a table; the Markdown to files."""
    bodies = [comment.body for comment in app.repo.comments(number)]
    print(_rule(f"the review of {REPO}#{number}, as the App posted it"))
    Console().print(review_table(app_review(app, number), cli_options=f"--history {HISTORY_PATH}"))
    print(_rule("what the App posted"))
    print(f"PR comment (Markdown)  {_save('pr-comment.md', chr(10).join(bodies))}")
    for run in app.repo.check_runs(head_sha):
        if run.name == CHECK_NAME:
            summary = _save("check-run.md", run.output.get("summary", ""))
            print(f"check run {run.name!r}: {run.conclusion}: {run.output.get('title', '')}")
            print(f"  its summary (Markdown)  {summary}")
            for action in run.actions:
                print(f"  button: [{action['label']}] {action['description']}")


def _print_posted(app: DemoApp, number: int, head_sha: str) -> None:
    """What the App posted, as posted: the comment's and the check run's Markdown."""
    for comment in app.repo.comments(number):
        print(_rule(f"PR comment on {REPO}#{number} by {comment.user}"))
        print(comment.body)
    for run in app.repo.check_runs(head_sha):
        if run.name != CHECK_NAME:
            continue
        print(_rule(f"check run {run.name!r} on {head_sha[:7]}: {run.conclusion}"))
        print(f"title: {run.output.get('title', '')}")
        for action in run.actions:
            print(f"button: [{action['label']}] {action['description']}")
        print()
        print(run.output.get("summary", ""))


def main(argv: Sequence[str] = ()) -> int:
    """Run the demo; print what the App posted (on a terminal, the review as a table and the
    Markdown to files).  Exit status 0 when the review was posted.

    ``--serve``: then keep the App up, serving the report, until Ctrl+C."""
    example = build_example()
    with (
        tempfile.TemporaryDirectory(prefix="threshold-bot-demo-") as tmp,
        demo_app(Path(tmp), example.repo, example.base_script, example.records) as app,
    ):
        number = example.repo.threshold_pull
        pr = app.repo.open_pr(
            number,
            head="rebaseline-gsm8k",
            head_files={SCRIPT_PATH: example.head_script},
            title="Rebaseline the gsm8k nightly thresholds",
            user="erictang000",
        )
        print("threshold-bot demo: the App reviewing a threshold PR, offline")
        print(f"  fake GitHub  {app.fake.base_url}  ({REPO}: {len(example.repo.pulls)} merged PRs,")
        print(f"               {len(example.records)} nightly runs in {HISTORY_PATH})")
        print(f"  the App      {app.url}/webhook  (uvicorn, SQLite, 2 worker threads)")
        done = app.pull_event("opened", pr)
        print(
            f"  POST /webhook pull_request.opened #{number} -> {done.status_code} "
            f"in {done.ack_ms:.0f} ms; reviewed in {done.seconds:.2f} s ({done.outcome.status})"
        )
        if done.outcome.status != "done":
            print(f"error: the review failed: {done.outcome.last_error}", file=sys.stderr)
            return 1
        if sys.stdout.isatty():
            _show_posted(app, number, pr.head_sha)
        else:
            _print_posted(app, number, pr.head_sha)
        print(_rule(f"interactive report of {REPO}#{number}"))
        bodies = [comment.body for comment in app.repo.comments(number)]
        print(report_link(app, "".join(bodies)))
        if "--serve" not in argv:
            print("(served while the demo runs: `python -m demo.app --serve` keeps it up)")
            return 0
        print("the App keeps serving it; Ctrl+C stops the demo")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
