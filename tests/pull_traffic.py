"""Webhook traffic for many PRs: repositories on the fake GitHub and signed deliveries.

``arrange(fake, pulls, repos)`` makes ``repos`` repositories (the nightly script of
``tests/test_review_pr.py`` with one gate, its file history, the config) with
``pulls`` open PRs spread over them, each changing the gate's literal.
``delivery(pull, kind)`` is a signed delivery for a PR as it is now: ``opened`` /
``synchronize`` (reviewed), ``edited`` (a body edit: ignored by the review), ``comment``
(a plain comment on the PR, no command: ignored); ``push`` moves a PR's head.  ``bursts``
lays out the traffic: groups of PRs, several deliveries each, in random order;
``post_burst`` sends one burst at once.  Used by
``tests/test_scale_e2e.py``, ``tests/test_store_faults.py`` and ``bench/bench_scale.py``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import Repo
from tests.live import SECRET
from tests.test_review_pr import CONFIG, FILE_SOURCE, HISTORY, RUNS, SCRIPT, history_jsonl, scores
from tests.test_review_pr import script as gate_script
from tests.webhooks import signed_fixture

INSTALLATION = 7
KINDS = ("opened", "synchronize", "edited", "comment")
REVIEWED = ("opened", "synchronize")  # the kinds that run a review


@dataclass(frozen=True)
class Pull:
    """An open PR of the fake, by repository and number."""

    repo: Repo
    number: int

    @property
    def name(self) -> str:
        """``owner/repo#N``, as the App names a PR in its logs."""
        return f"{self.repo.full_name}#{self.number}"

    @property
    def head_sha(self) -> str:
        """The PR's head commit now."""
        with self.repo.state.lock:
            return self.repo.pr(self.number).head_sha


@dataclass(frozen=True)
class Delivery:
    """One signed webhook delivery, ready to POST."""

    id: str
    pull: Pull
    kind: str
    body: bytes
    headers: dict[str, str]


def arrange(fake: FakeGitHub, pulls: int, repos: int = 3) -> list[Pull]:
    """``repos`` repositories holding ``pulls`` open PRs between them (round robin)."""
    made: list[Repo] = []
    for r in range(repos):
        repo = fake.add_repo(
            f"octo/ml{r}",
            installation_id=INSTALLATION,
            files={SCRIPT: gate_script("0.56"), CONFIG: FILE_SOURCE},
        )
        head = repo.head("main")
        repo.commit("main", {HISTORY: history_jsonl([head] * RUNS, scores())}, message="Runs")
        made.append(repo)
    found = []
    for i in range(pulls):
        repo = made[i % repos]
        value = f"0.{50 + i % 6}"  # never the 0.56 of main: each PR changes the gate
        pr = repo.open_pr(head=f"tune-{i}", head_files={SCRIPT: gate_script(value)})
        found.append(Pull(repo, pr.number))
    return found


def push(pull: Pull, serial: int) -> str:
    """A new commit on the PR's head branch (another literal of the gate); its sha."""
    with pull.repo.state.lock:
        pr = pull.repo.pr(pull.number)
        value = f"0.{40 + serial % 9}"
        return pull.repo.commit(pr.head_ref, {SCRIPT: gate_script(value)}, message="Retune")


def delivery(pull: Pull, kind: str) -> Delivery:
    """A signed delivery of ``kind`` (see ``KINDS``) for ``pull`` as it is now."""
    owner, name = pull.repo.full_name.split("/")
    common = {
        "repository.full_name": pull.repo.full_name,
        "repository.name": name,
        "repository.owner.login": owner,
        "installation.id": INSTALLATION,
        "sender.login": "alice",
    }
    if kind == "comment":
        changes = {
            **common,
            "issue.number": pull.number,
            "comment.body": "Looks good to me.",
            "comment.user.login": "alice",
            "comment.user.type": "User",
        }
        body, headers = signed_fixture("issue_comment.created", SECRET, changes)
    else:
        with pull.repo.state.lock:
            pr = pull.repo.pr(pull.number)
            head_sha, head_ref, base_ref = pr.head_sha, pr.head_ref, pr.base_ref
        changes = {
            **common,
            "number": pull.number,
            "pull_request.number": pull.number,
            "pull_request.head.sha": head_sha,
            "pull_request.head.ref": head_ref,
            "pull_request.base.ref": base_ref,
        }
        body, headers = signed_fixture(f"pull_request.{kind}", SECRET, changes)
    return Delivery(headers["X-GitHub-Delivery"], pull, kind, body, headers)


@dataclass(frozen=True)
class Burst:
    """Deliveries sent at once; ``push``: PRs whose head moves just before."""

    push: tuple[Pull, ...]
    items: tuple[tuple[Pull, str], ...]  # (PR, kind)


def bursts(
    pulls: Sequence[Pull], count: int, size: int, repeat: int = 3, seed: int = 16
) -> list[Burst]:
    """``count`` bursts of ``size`` deliveries: ``size // repeat`` PRs (the next ones, round
    robin), ``repeat`` deliveries each, shuffled, so reviews of one PR contend.

    A PR's first delivery is ``opened``; later ones ``synchronize`` (half), ``edited`` or
    ``comment``.  Every fourth burst first pushes to every other PR it holds, one of whose
    deliveries is then a ``synchronize``."""
    rng = random.Random(seed)
    later = ("synchronize", "synchronize", "edited", "comment")
    group = max(1, size // repeat)
    opened: set[Pull] = set()
    plan = []
    for n in range(count):
        chosen = [pulls[(n * group + i) % len(pulls)] for i in range(group)]
        pushed = tuple(p for p in chosen[::2] if p in opened) if n % 4 == 3 else ()
        items = []
        for pull in chosen:
            kinds = [rng.choice(later) for _ in range(repeat)]
            if pull in pushed:
                kinds[-1] = "synchronize"
            if pull not in opened:
                kinds[0] = "opened"
                opened.add(pull)
            items += [(pull, kind) for kind in kinds]
        rng.shuffle(items)
        plan.append(Burst(pushed, tuple(items)))
    return plan


def post_burst(urls: list[str], items: list[tuple[Pull, str]]) -> dict[str, tuple[Pull, str, int]]:
    """POST a burst at once, spread over ``urls``; id -> (PR, kind, HTTP status)."""
    signed = [delivery(pull, kind) for pull, kind in items]
    clients = [httpx.Client(base_url=url, timeout=30) for url in urls]
    try:

        def send(n: int) -> int:
            d = signed[n]
            client = clients[n % len(clients)]
            return client.post("/webhook", content=d.body, headers=d.headers).status_code

        with ThreadPoolExecutor(max_workers=len(signed)) as pool:
            statuses = list(pool.map(send, range(len(signed))))
    finally:
        for client in clients:
            client.close()
    return {d.id: (d.pull, d.kind, s) for d, s in zip(signed, statuses, strict=True)}
