"""``bot.features.review.attribution``: regime changes get the PRs merged between their commits."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from bot.adapters.github.api import PullInfo
from bot.adapters.github.errors import GitHubNotFound, GitHubTransientError
from bot.core.analysis.regimes import detect_regimes
from bot.core.models import Change, Review, Run
from bot.features.review.attribution import attribute
from bot.features.review.pull import review_pull
from tests.fakes.recording_github import RecordingGitHub
from tests.test_review_pr import (
    CONFIG,
    FILE_SOURCE,
    HISTORY,
    METRIC,
    RUNS,
    SCRIPT,
    SHIFT_AT,
    history_jsonl,
    scores,
    script,
)

AT = datetime(2026, 8, 1, tzinfo=UTC)


def main_with_pulls(count: int) -> RecordingGitHub:
    """Main with ``count`` commits after the first, commit i brought by merged PR 100+i."""
    gh = RecordingGitHub()
    gh.commit({"a": "0"})
    for i in range(1, count + 1):
        sha = gh.commit({"a": str(i)})
        gh.merged_pull(100 + i, f"PR {i}", sha)
    return gh


def review_of(*changes: Change) -> Review:
    return Review(conclusion="success", changes=changes)


def test_each_change_gets_the_pulls_merged_in_its_range() -> None:
    gh = main_with_pulls(6)
    c = gh.commits
    review = review_of(
        Change(at=AT, before_commit=c[0], after_commit=c[2]),
        Change(at=AT, before_commit=c[4], after_commit=c[6]),
        Change(at=AT, before_commit=c[6], after_commit=c[6]),  # same commit: nothing merged
        Change(at=AT),  # runs without commits
    )

    result = attribute(gh, gh.repo, review)

    assert [ch.pulls for ch in result.changes] == [(102, 101), (106, 105), (), ()]  # newest first
    assert sorted(result.pulls) == [101, 102, 105, 106]
    assert result.pulls[105].title == "PR 5" and result.pulls[105].url.endswith("/pull/105")
    assert result.warnings == ()


def test_open_pulls_containing_a_commit_are_not_credited() -> None:
    gh = main_with_pulls(1)
    sha = gh.commit({"a": "x"})
    gh.commit_pulls[sha] = [
        PullInfo(9, "open", "u", "open", False, False, "a", "main", "", "b", sha, None)
    ]

    result = attribute(
        gh, gh.repo, review_of(Change(at=AT, before_commit=gh.commits[1], after_commit=sha))
    )

    assert result.changes[0].pulls == () and result.pulls == {}


def test_a_wide_range_is_capped_with_a_warning() -> None:
    gh = main_with_pulls(5)

    result = attribute(
        gh,
        gh.repo,
        review_of(Change(at=AT, before_commit=gh.commits[0], after_commit=gh.commits[5])),
        max_commits=3,
    )

    assert result.changes[0].pulls == (103, 102, 101)
    assert "more than 3 commits" in result.warnings[0]


def test_failures_leave_the_change_unattributed_and_warn() -> None:
    gh = main_with_pulls(2)
    unknown = Change(at=AT, before_commit="f" * 40, after_commit=gh.commits[2])

    class Down(RecordingGitHub):
        def compare_commits(self, repo: str, base: str, head: str, limit: int = 250) -> list[str]:
            raise GitHubTransientError("GitHub 502", 502)

    result = attribute(gh, gh.repo, review_of(unknown))
    down = attribute(Down(), gh.repo, review_of(unknown))

    assert result.changes[0].pulls == () and "not in owner/repo" in result.warnings[0]
    assert down.changes[0].pulls == () and "GitHub 502" in down.warnings[0]


def test_a_warning_about_runs_of_one_commit_names_the_range_read_never_x_dot_dot_x() -> None:
    gh = main_with_pulls(2)
    c = gh.commits
    widened = Change(
        at=AT, before_commit=c[1], after_commit=c[1], earlier_commit=c[0], later_commit=c[2]
    )

    class Gone(RecordingGitHub):
        def compare_commits(self, repo: str, base: str, head: str, limit: int = 250) -> list[str]:
            raise GitHubNotFound("Not Found", 404)

    result = attribute(Gone(), gh.repo, review_of(widened))

    assert result.warnings == (f"commits {c[0][:7]}...{c[2][:7]} are not in {gh.repo}",)
    assert f"{c[1][:7]}...{c[1][:7]}" not in result.warnings[0]


# ----- a boundary one run off: widen the range -------------------------------------------


def test_the_same_commit_on_both_sides_widens_by_one_run_each_way() -> None:
    gh = main_with_pulls(6)
    c = gh.commits
    same = Change(
        at=AT, before_commit=c[3], after_commit=c[3], earlier_commit=c[2], later_commit=c[4]
    )

    result = attribute(gh, gh.repo, review_of(same))

    assert result.changes[0].pulls == (104, 103)  # c[2]...c[4] brought 103 and 104; newest first
    assert gh.called("compare_commits") == [(gh.repo, c[2], c[4])]


def test_adjacent_commits_widen_and_the_pull_between_the_two_runs_comes_first() -> None:
    gh = main_with_pulls(6)
    c = gh.commits
    adjacent = Change(
        at=AT, before_commit=c[3], after_commit=c[4], earlier_commit=c[2], later_commit=c[5]
    )

    result = attribute(gh, gh.repo, review_of(adjacent))

    assert result.changes[0].pulls == (104, 105, 103)
    assert set(result.pulls) == {103, 104, 105}


def test_one_pulls_commits_and_merge_commit_count_as_adjacent() -> None:
    gh = main_with_pulls(2)
    feature = gh.commit({"a": "feature"})
    merge = gh.commit({"a": "merged"})
    gh.merged_pull(110, "Feature", feature)
    gh.merged_pull(110, "Feature", merge)
    later = gh.commit({"a": "later"})
    gh.merged_pull(111, "Later", later)
    c = gh.commits
    merged = Change(
        at=AT, before_commit=c[2], after_commit=merge, earlier_commit=c[1], later_commit=later
    )

    result = attribute(gh, gh.repo, review_of(merged))

    assert result.changes[0].pulls == (110, 111, 102)


def test_without_neighbouring_runs_nothing_is_widened() -> None:
    gh = main_with_pulls(3)
    c = gh.commits

    result = attribute(gh, gh.repo, review_of(Change(at=AT, before_commit=c[1], after_commit=c[2])))

    assert result.changes[0].pulls == (102,)
    assert gh.called("compare_commits") == [(gh.repo, c[1], c[2])]
    assert gh.called("pull_files") == []  # a single PR needs no ranking


def test_regimes_record_the_commits_of_the_runs_around_the_boundary() -> None:
    values = scores()
    runs = [
        Run(id=f"r{i}", created_at=AT + timedelta(days=i), commit=f"{i:040x}", summary={METRIC: v})
        for i, v in enumerate(values)
    ]

    _, (change,) = detect_regimes(runs)

    b = change.index
    assert (change.before_commit, change.after_commit) == (runs[b - 1].commit, runs[b].commit)
    assert (change.earlier_commit, change.later_commit) == (runs[b - 2].commit, runs[b + 1].commit)


def history_repo(
    commits_of_runs: Callable[[RecordingGitHub], list[str]], head: str = script("0.50")
) -> RecordingGitHub:
    """Main: the script and config, then what ``commits_of_runs`` adds (returning the commit of
    each run), then the history; PR #5 makes the script ``head`` (lowers the gate)."""
    gh = RecordingGitHub()
    gh.commit({SCRIPT: script("0.56"), CONFIG: FILE_SOURCE})
    commits = commits_of_runs(gh)
    gh.commit({HISTORY: history_jsonl(commits, scores())})
    gh.open_pull(5, {SCRIPT: head})
    return gh


def test_a_boundary_one_run_early_names_the_pull_that_caused_it() -> None:
    def runs(gh: RecordingGitHub) -> list[str]:
        before = gh.commits[-1]
        after = gh.commit({"train.py": "mode = 'async'\n"})
        gh.merged_pull(12, "Fully async rollout", after)
        # the step shows at run SHIFT_AT, still on the old commit; the PR's commit one run later
        return [before] * (SHIFT_AT + 1) + [after] * (RUNS - SHIFT_AT - 1)

    gh = history_repo(runs)

    outcome = review_pull(gh, gh.repo, 5)

    assert outcome.review is not None
    (change,) = outcome.review.changes
    assert change.before_commit == change.after_commit  # the boundary is one run early
    assert change.pulls == (12,)
    assert "Fully async rollout" in gh.comments[5].body


# ----- the most likely pulls first, five shown ----------------------------------------------

LOGGING = f'wandb.log({{"{METRIC}": score}})\n'


def test_pulls_touching_the_gate_its_script_or_the_metric_come_first_five_shown() -> None:
    def runs(gh: RecordingGitHub) -> list[str]:
        before = gh.commits[-1]
        changes: list[tuple[int, str, dict[str, str]]] = [
            (21, "Docs", {"docs/a.md": "a\n"}),
            (22, "Faster training", {"train.py": "fast = True\n", "src/log.py": LOGGING}),
            (23, "Log the score", {"src/metrics.py": LOGGING}),
            (24, "Typo", {"docs/b.md": "b\n"}),
            (25, "Comment the gate", {SCRIPT: script("0.56") + "# owners: ml\n"}),
            (26, "CI cache", {".ci/cache.yml": "on: true\n"}),
            (27, "Readme", {"README.md": "# ml\n"}),
        ]
        for number, title, files in changes:
            gh.merged_pull(number, title, gh.commit(files))
        return [before] * SHIFT_AT + [gh.commits[-1]] * (RUNS - SHIFT_AT)

    gh = history_repo(runs)

    outcome = review_pull(gh, gh.repo, 5)

    assert outcome.review is not None
    (change,) = outcome.review.changes
    # two clues each: 25 the threshold file and the metric (in its patch's context), 22
    # train.py (the script runs it) and the metric; one: 23 the metric; none: the others;
    # newest first among equals
    assert change.pulls == (25, 22, 23, 27, 26, 24, 21)
    body = gh.comments[5].body
    shown = [body.index(f"/pull/{n})") for n in (25, 22, 23, 27, 26)]
    assert shown == sorted(shown) and "+2 more" in body
    assert "/pull/24)" not in body and "/pull/21)" not in body


def test_a_file_the_script_names_relative_to_its_folder_counts() -> None:
    def runs(gh: RecordingGitHub) -> list[str]:
        before = gh.commits[-1]
        gh.merged_pull(32, "Eval helper", gh.commit({"tests/ci/run_eval.sh": "exit 0\n"}))
        gh.merged_pull(31, "Docs", gh.commit({"docs/c.md": "c\n"}))  # merged later
        return [before] * SHIFT_AT + [gh.commits[-1]] * (RUNS - SHIFT_AT)

    gh = history_repo(runs, head=script("0.50") + "bash ./run_eval.sh --quick\n")

    outcome = review_pull(gh, gh.repo, 5)

    assert outcome.review is not None
    assert outcome.review.changes[0].pulls == (32, 31)  # newest first would be (31, 32)
    assert ("file_text", (gh.repo, SCRIPT, gh.pulls[5].head_sha)) in gh.calls


def test_only_the_newest_pulls_of_a_change_have_their_files_read() -> None:
    gh = main_with_pulls(6)
    c = gh.commits

    result = attribute(
        gh, gh.repo, review_of(Change(at=AT, before_commit=c[0], after_commit=c[6])), max_ranked=2
    )

    assert result.changes[0].pulls == (106, 105, 104, 103, 102, 101)
    assert [args[1] for args in gh.called("pull_files")] == [106, 105]
