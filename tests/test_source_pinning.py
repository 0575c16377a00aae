"""The base decides what a gate reads (issue #10, items 1, 2 and 7), through ``review_pull``
against the recording GitHub with a recording history source: which specs were asked for is
read from the source itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from bot.core.access import SourcePolicy, guarded
from bot.core.history.sources import HistoryNotFound
from bot.core.models import History, Run, SourceSpec
from bot.features.review.approval import gate_values
from bot.features.review.pull import read_thresholds, review_pull
from tests.fakes.recording_github import RecordingGitHub

T0 = datetime(2026, 7, 1, 8, tzinfo=UTC)
METRIC = "eval/acc"
CONFIG = ".github/threshold-bot.yml"
SCRIPT = "ci/nightly.sh"
PUBLIC, SECRET = "public_ci", "secret_ci"


def script(value: str, project: str | None = PUBLIC, metric: str = METRIC, op: str = ">=") -> str:
    named = f' --project_name "{project}"' if project else ""
    return (
        "#!/bin/bash\n"
        f"ACC_MIN={value}\n"
        f'python get_summary.py --entity acme{named} --asserts "{metric} {op} $ACC_MIN"\n'
    )


def values(project: str) -> list[float]:
    """The runs of each project: public ~0.80, secret ~0.20 (so a leak would show)."""
    base = 0.80 if project == PUBLIC else 0.20
    return [round(base + (i % 5) / 100, 2) for i in range(30)]


@dataclass
class Recorded:
    """A W&B stand-in that records every project it is asked for."""

    asked: list[str] = field(default_factory=list)

    def fetch(self, spec: SourceSpec) -> History:
        self.asked.append(f"{spec.entity}/{spec.project}")
        if spec.project not in (PUBLIC, SECRET):
            raise HistoryNotFound(f"W&B project {spec.entity}/{spec.project} not found")
        runs = tuple(
            Run(id=f"r{i}", created_at=T0 + timedelta(days=i), summary={METRIC: v})
            for i, v in enumerate(values(spec.project))
        )
        return History(runs=runs, source=spec.describe())


def repo(base_script: str, config: str | None = None) -> RecordingGitHub:
    gh = RecordingGitHub()
    files = {SCRIPT: base_script}
    if config is not None:
        files[CONFIG] = config
    gh.commit(files)
    return gh


def test_a_project_named_by_the_pr_is_not_read_and_requires_action() -> None:
    gh, wandb = repo(script("0.75")), Recorded()
    pull = gh.open_pull(1, {SCRIPT: script("0.75", project=SECRET)})

    outcome = review_pull(gh, gh.repo, 1, remote_history=lambda _spec: wandb)

    assert wandb.asked == [f"acme/{PUBLIC}"]  # the base's project, never the PR's
    assert outcome.review is not None
    (gate,) = outcome.review.gates
    assert gate.proposed_source == f"wandb:acme/{SECRET}"
    assert gate.window_min == min(values(PUBLIC)[-20:])
    check = gh.check_for(pull.head_sha)
    assert check.conclusion == "action_required"
    assert [a.identifier for a in check.actions] == ["approve"]
    body = gh.comments[1].body
    assert "it is not read until a maintainer approves" in body
    todo = body.split("#### What to do", 1)[1]
    assert "until a maintainer presses **Approve thresholds**" in todo
    assert "/rebaseline" not in todo  # the rule's value would not mend a new source
    assert [s.project for s in outcome.sources] == [PUBLIC]  # what the re-check would sync


def test_a_loosening_that_names_a_missing_project_is_judged_on_the_bases_runs() -> None:
    gh, wandb = repo(script("0.75")), Recorded()
    pull = gh.open_pull(2, {SCRIPT: script("0.10", project="no_such_project")})

    outcome = review_pull(gh, gh.repo, 2, remote_history=lambda _spec: wandb)

    assert wandb.asked == [f"acme/{PUBLIC}"]
    assert outcome.review is not None
    assert outcome.review.gates[0].verdict == "looser_than_rule"
    assert gh.check_for(pull.head_sha).conclusion == "action_required"  # never neutral


def test_a_project_named_in_unreachable_code_is_a_proposal_too() -> None:
    config = f"sources:\n  ci:\n    kind: wandb\n    entity: acme\n    project: {PUBLIC}\n"
    gh, wandb = repo(script("0.75", project=None), config + "default_source: ci\n"), Recorded()
    head = script("0.75", project=None) + f'exit 0\nWANDB_PROJECT="{SECRET}"\n'
    pull = gh.open_pull(3, {SCRIPT: head})

    review_pull(gh, gh.repo, 3, remote_history=lambda _spec: wandb)

    assert f"acme/{SECRET}" not in wandb.asked
    assert gh.check_for(pull.head_sha).conclusion == "action_required"


def test_the_same_project_at_base_and_head_is_read_as_before() -> None:
    gh, wandb = repo(script("0.75")), Recorded()
    pull = gh.open_pull(4, {SCRIPT: script("0.76")})

    outcome = review_pull(gh, gh.repo, 4, remote_history=lambda _spec: wandb)

    assert wandb.asked == [f"acme/{PUBLIC}"]
    assert outcome.review is not None and not outcome.review.gates[0].proposed_source
    assert gh.check_for(pull.head_sha).conclusion == "success"


def test_an_approval_that_covers_the_proposed_source_lets_it_be_read() -> None:
    gh, wandb = repo(script("0.75")), Recorded()
    pull = gh.open_pull(5, {SCRIPT: script("0.15", project=SECRET)})
    approved = gate_values(read_thresholds(gh, gh.repo, pull).files)  # what the button stores
    approval = SimpleNamespace(approver="maya", approved_at=T0, gate_values=approved)

    outcome = review_pull(
        gh, gh.repo, 5, remote_history=lambda _spec: wandb, approvals=lambda _r, _n: approval
    )

    assert wandb.asked == [f"acme/{SECRET}"]
    assert outcome.review is not None
    assert outcome.review.gates[0].window_min == min(values(SECRET)[-20:])
    assert gh.check_for(pull.head_sha).conclusion == "success"


def test_an_approval_does_not_survive_a_change_of_metric_operator_or_source() -> None:
    gh = repo(script("0.90", metric="eval/loss", op="<="))
    pull = gh.open_pull(6, {SCRIPT: script("0.95", metric="eval/loss", op="<=")})
    approved = gate_values(read_thresholds(gh, gh.repo, pull).files)
    same = gh.open_pull(60, {SCRIPT: script("0.95", metric="eval/loss", op="<=")})
    assert gate_values(read_thresholds(gh, gh.repo, same).files) == approved
    for number, changed in enumerate(
        (
            script("0.95", metric="eval/acc", op="<="),  # another metric, same value
            script("0.95", metric="eval/loss", op=">="),  # another operator
            script("0.95", metric="eval/loss", op="<=", project=SECRET),  # another source
        ),
        start=61,
    ):
        moved = gh.open_pull(number, {SCRIPT: changed})
        now = gate_values(read_thresholds(gh, gh.repo, moved).files)
        assert set(now) != set(approved) and list(now.values()) == list(approved.values())


def test_a_refused_entity_is_never_requested_and_can_be_approved() -> None:
    gh, wandb = repo(script("0.75")), Recorded()
    pull = gh.open_pull(7, {SCRIPT: script("0.70")})
    policy = SourcePolicy(default_entity="acme", wandb_entities={"owner:other-org": ("other",)})
    history = guarded(lambda _spec: wandb, policy, installation_id=7, owner="other-org")

    outcome = review_pull(gh, gh.repo, 7, remote_history=history)

    assert wandb.asked == []
    assert outcome.review is not None and outcome.review.gates[0].verdict == "no_data"
    assert not outcome.unavailable and outcome.sources == ()  # not an outage; never synced
    check = gh.check_for(pull.head_sha)
    assert (check.conclusion, [a.identifier for a in check.actions]) == (
        "action_required",
        ["approve"],
    )
    assert "WANDB_ENTITIES" in gh.comments[7].body.replace("\\", "")
