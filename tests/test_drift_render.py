"""The drift item's words (``bot.core.render.drift``): marker, titles, branch, body and JSON,
over reports built with the real ``build_review``; hostile names stay inert text."""

from __future__ import annotations

import json
import re
import subprocess
from urllib.parse import unquote

import numpy as np
import pytest

from bot.core.analysis.drift import DriftReport, drift_report
from bot.core.analysis.review import build_review
from bot.core.config import DriftSettings, parse_config
from bot.core.formatting import day_month_year
from bot.core.models import GateChange, PullRef, RegimeSettings, RuleSettings
from bot.core.render.drift import (
    DRIFT_MARKER_PREFIX,
    branch_name,
    closing_comment,
    drift_json,
    drift_marker,
    issue_title,
    item_body,
    pull_title,
)
from bot.core.render.review import GITHUB_TEXT_LIMIT
from bot.core.thresholds.edit import format_literal
from tests.test_drift_assess import BEFORE, LOOKBACK, fails_of, gate, history, review_of, step

pytestmark = pytest.mark.servers

FILE = "ci/nightly.sh"
URL = "https://github.com/octo/repo"
HOSTILE = "x -->`<script>alert(1)</script>` @team #12 [a](http://e.vil) ü.sh"


def drifting_report(
    settings: DriftSettings = DriftSettings(), pulls: tuple[int, ...] = (12,), file: str = FILE
) -> DriftReport:
    """ACC_MIN (>= 0.75) fails the 8 runs since a step down, tied to the change of ``pulls``."""
    review, _ = review_of(gate(), step(after=8), settings)
    (change,) = review.changes
    titled = {n: PullRef(number=n, title=f"PR {n}", url=f"{URL}/pull/{n}") for n in pulls}
    review = review.model_copy(
        update={"changes": (change.model_copy(update={"pulls": pulls}),), "pulls": titled}
    )
    return drift_report(file, review, settings)


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    "file", [FILE, "a b/c.sh", "x-->y.sh", "--!>.sh", "ü/ñ.yaml", "a%20b.sh", HOSTILE]
)
def test_the_marker_survives_any_path(file: str) -> None:
    marker = drift_marker(file)
    assert marker.startswith(DRIFT_MARKER_PREFIX) and marker.endswith(" -->")
    inner = marker.removeprefix("<!--").removesuffix("-->")
    assert "-->" not in inner and "--!>" not in inner and "<" not in inner and "\n" not in inner
    assert unquote(marker.removeprefix(f"{DRIFT_MARKER_PREFIX}file=").removesuffix(" -->")) == file


def test_markers_of_distinct_paths_never_contain_each_other() -> None:
    files = ["a.sh", "a.sh.bak", "b/a.sh", "a sh", "a%20sh"]
    markers = [drift_marker(f) for f in files]
    for i, one in enumerate(markers):
        assert [j for j, other in enumerate(markers) if one in other] == [i]


def _valid_ref(name: str) -> bool:
    """``git check-ref-format``: git's own rules for a branch name (reads nothing)."""
    done = subprocess.run(["git", "check-ref-format", f"refs/heads/{name}"], check=False)
    return done.returncode == 0


BRANCH_PATHS = [
    "a b/c d.sh",
    "../up.sh",
    "a..b.sh",
    "x~1^2:3.sh",
    "conf.lock",
    "dir.lock/x.sh",
    ".hidden/.x.sh",
    "dir./x.",
    "ünïcode/cødé.sh",
    "a@{b}.sh",
    "q?s*[t].sh",
    "back\\slash.sh",
    "@",
    "-",
    "x" * 300 + "/" + "y" * 300 + ".sh",
    HOSTILE,
]


@pytest.mark.parametrize("file", BRANCH_PATHS)
def test_branch_names_are_valid_git_refs(file: str) -> None:
    name = branch_name(file)
    assert name.startswith("threshold-bot/rebaseline/")
    assert _valid_ref(name), name
    assert re.fullmatch(r"[A-Za-z0-9._/-]+", name)
    assert all(len(part) <= 100 for part in name.split("/"))


def test_branch_names_keep_plain_paths_and_tell_paths_apart() -> None:
    assert not _valid_ref("threshold-bot/a..b") and not _valid_ref("x/a.lock")  # git's rules
    assert branch_name(FILE) == f"threshold-bot/rebaseline/{FILE}"
    assert _valid_ref(branch_name(FILE))
    paths = [*BRANCH_PATHS, FILE, "a-b/c-d.sh", "a_b/c d.sh", "a b/c-d.sh", "conf-lock", "dir-/x-"]
    assert len({branch_name(p) for p in paths}) == len(set(paths))


def test_branch_names_of_deep_paths_stay_short_and_distinct() -> None:
    deep = ["/".join(["component"] * 40) + f"/gate_{i}.sh" for i in range(2)]
    names = [branch_name(p) for p in deep]
    assert all(len(n) <= 250 and _valid_ref(n) for n in names)
    assert names[0] != names[1]
    assert branch_name("/".join(["component"] * 20) + "/x.sh").count("/") > 3  # short: kept


@pytest.mark.parametrize("make", [issue_title, pull_title])
def test_titles_name_the_file_within_githubs_limit(make: object) -> None:
    assert callable(make)
    assert FILE in make(FILE)
    long = "d/" * 200 + "tail.sh"
    title = make(long)
    assert len(title) <= 256 and "tail.sh" in title and "…" in title
    assert "\n" not in make("a\nb.sh") and "\x00" not in make("a\x00b.sh")
    assert issue_title(FILE) == f"Nightly thresholds failing: {FILE}"
    assert pull_title(FILE) == f"Rebaseline {FILE} after nightly failures"


# --------------------------------------------------------------------------- the body


def test_the_issue_body_names_failures_change_pulls_rule_and_instruction() -> None:
    report = drifting_report(pulls=(12, 13))
    body = item_body(report, mode="issue", repo_url=URL)
    _, h = review_of(gate(), step(after=8))
    fails = fails_of(gate(), h)
    first_after = h.runs[BEFORE].created_at
    (d,) = report.drifting
    g = d.gate
    assert body.splitlines()[0] == drift_marker(FILE)
    assert body.count(DRIFT_MARKER_PREFIX) == 1
    assert f"Failed its last {sum(fails)} runs in a row, since {day_month_year(first_after)}." in (
        body
    )
    assert f"Tied to the regime change of {day_month_year(first_after)}, started by" in body
    assert f"[#12]({URL}/pull/12) PR 12, [#13]({URL}/pull/13) PR 13" in body
    assert g.recomputed is not None
    new = format_literal(g.recomputed, g.decimals)
    assert f"The rule's new value: **{new}**" in body
    assert "minimum less 5% of its magnitude, rounded down" in body
    assert "since the metric's latest regime change (8 runs," in body  # the drift window
    assert "<code>eval/acc</code> ≥ 0.75" in body  # metric, op and literal
    assert "| Period | Runs | <code>eval/acc</code> | Started by |" in body
    rows = [line for line in body.splitlines() if line.startswith("| ") and "Period" not in line]
    assert len(rows) == len(report.review.regimes) == 2
    assert rows[0].endswith(" — |")  # the first regime: started by nothing
    assert rows[1].startswith(f"| {day_month_year(first_after)} – ") and "[#12]" in rows[1]
    assert "Comment `/rebaseline` on this issue to open a pull request with these values." in body
    assert "Merge this PR" not in body and "threshold-bot rebaseline" not in body
    assert "min_failures 3, window regime" in body


def test_the_pull_request_body_and_an_issue_with_its_pull() -> None:
    report = drifting_report()
    body = item_body(report, mode="pull_request", repo_url=None)
    assert "Merge this PR to apply them; its own review is the check below." in body
    assert "/rebaseline" not in body.split("#### What to do")[1].split("####")[0]
    with_pull = item_body(report, mode="issue", repo_url=URL, pull=31)
    assert f"Pull request [#31]({URL}/pull/31) applies these values" in with_pull
    assert "Comment `/rebaseline`" not in with_pull


def test_the_command_line_wording() -> None:
    report = drifting_report()
    body = item_body(report, mode="issue", repo_url=None, cli_options="--history runs.jsonl")
    assert (
        "- Run this command to write the rule's value of <code>ACC\\_MIN</code> in place, and"
        " no other gate's" in body
    )
    assert "\n  ```sh\n  threshold-bot rebaseline --file ci/nightly.sh --history runs.jsonl" in body
    assert "/rebaseline" not in body.replace("threshold-bot rebaseline", "")
    assert "<sub>" not in body  # the App's footer


def test_flaky_passing_no_data_and_problems_sections() -> None:
    rng = np.random.default_rng(4)
    values = [0.80 + rng.normal(0, 0.005) for _ in range(60)]
    for position in (-25, -14, -4):
        values[position] = 0.70
    flaky, steady = gate(), gate(literal="0.60").model_copy(update={"name": "LOW_MIN"})
    missing = gate().model_copy(update={"name": "GONE_MIN", "metric": "eval/gone"})
    h = history(values)
    review = build_review(
        [GateChange(head=x, base=x) for x in (flaky, steady, missing)],
        h,
        rule=RuleSettings(window=DriftSettings().window),
    )
    settings = parse_config("drift: {mode: sometimes, colour: red}").drift
    report = drift_report(FILE, review, settings)
    body = item_body(report, mode="issue", repo_url=None)
    assert [d.status for d in report.gates] == ["flaky", "passing", "no_data"]
    assert "No gate of <code>ci/nightly.sh</code> drifts**; 1 of 3 gates fail now and then" in body
    assert "#### Flaky, not rebaselined" in body
    assert f"failed 3 of the last {LOOKBACK} runs (10%), scattered: flaky." in body
    assert "Passing (1): <code>LOW\\_MIN</code>." in body
    assert "No data (1): no finished run has the metric of <code>GONE\\_MIN</code>" in body
    assert "#### Drift settings that fell back" in body
    assert "- drift.colour: unknown setting — ignored" in body
    assert "What to do" not in body and "#### Regimes" not in body


def test_a_problem_naming_the_setting_meant_shows_it_in_code() -> None:
    settings = parse_config("drift: {min_failure: 2}").drift
    (problem,) = settings.problems
    meant = re.findall(r"`(\w+)`", problem)
    assert meant == ["min_failures"]  # the config's words quote the setting it likely meant
    body = item_body(drifting_report(settings), mode="issue", repo_url=None)
    shown = problem.replace(f"`{meant[0]}`", f"<code>{meant[0]}</code>").replace("_", "\\_")
    assert f"- {shown}" in body and "\\`" not in body


def test_outside_text_is_escaped_everywhere() -> None:
    hostile_gate = gate().model_copy(update={"name": HOSTILE, "metric": "@team/<b>m</b>"})
    h = history(step(after=8))
    runs = tuple(
        r.model_copy(update={"summary": {"@team/<b>m</b>": r.summary["eval/acc"]}}) for r in h.runs
    )
    review = build_review(
        [GateChange(head=hostile_gate, base=hostile_gate)],
        h.model_copy(update={"runs": runs}),
        rule=RuleSettings(window=DriftSettings().window),
        regime_settings=RegimeSettings(),
    )
    (change,) = review.changes
    bad_title = "<script>x</script> @octocat `rm -rf` #99 ![i](http://e.vil/i.png) -->"
    review = review.model_copy(
        update={
            "changes": (change.model_copy(update={"pulls": (7,)}),),
            "pulls": {7: PullRef(number=7, title=bad_title, url=f"{URL}/pull/7")},
        }
    )
    report = drift_report(HOSTILE, review, DriftSettings())
    assert report.drifting
    body = item_body(report, mode="issue", repo_url=URL)
    assert body.splitlines()[0] == drift_marker(HOSTILE)
    rest = body.split("\n", 1)[1]
    assert re.search(r"(?<!\\)</?(script|b)>?", body) is None  # only escaped: \<script\>
    assert "\\<script\\>" in rest
    assert "-->" not in rest  # nothing after the marker closes a comment
    assert re.search(r"@(?!&#8203;)", rest) is None  # every @ broken by a zero-width space
    assert "#99" not in rest and "](http://e.vil" not in rest
    assert re.search(r"(?<!\\)`rm", rest) is None and "\\`rm -rf\\`" in rest


def test_the_body_fits_githubs_limit() -> None:
    report = drifting_report()
    (d,) = report.drifting
    many = tuple(
        d.model_copy(update={"gate": d.gate.model_copy(update={"name": f"G{i}_" + "n" * 200})})
        for i in range(600)
    )
    big = report.model_copy(update={"gates": many})
    body = item_body(big, mode="issue", repo_url=URL)
    assert len(body) <= GITHUB_TEXT_LIMIT
    assert body.splitlines()[0] == drift_marker(FILE)
    assert body.rstrip().endswith("for the whole report.*")


def test_closing_comments() -> None:
    assert closing_comment("merged", pull=31).startswith("#31 merged the rule's values: closing.")
    assert closing_comment("merged").startswith("The rebaseline merged")
    assert closing_comment("passing").startswith("Every gate of this file passes its newest runs")


# --------------------------------------------------------------------------- JSON


def test_drift_json_fields() -> None:
    report = drifting_report(settings=DriftSettings(min_failures=4, labels=("ci",)))
    other = drifting_report(file="ci/other.sh", pulls=())
    data = json.loads(drift_json([report, other]))
    assert data["drifting"] == 2 and data["no_data"] == 0
    assert data["conclusion"] == "action_required"
    first = data["files"][0]
    assert first["file"] == FILE
    assert first["settings"] == {
        "mode": "issue",
        "min_failures": 4,
        "window": "regime",
        "labels": ["ci"],
        "assignees": [],
        "files": [],
    }
    assert first["problems"] == []
    (d,) = report.drifting
    g = d.gate
    assert g.recomputed is not None and d.since is not None and d.change is not None
    (gate_json,) = first["gates"]
    assert gate_json == {
        "name": "ACC_MIN",
        "file": "ci/nightly.sh",
        "line": 3,
        "metric": "eval/acc",
        "op": ">=",
        "kind": "limit",
        "value": "0.75",
        "status": "drifting",
        "reason": d.reason,
        "no_data_reason": None,
        "failed": 8,
        "total": LOOKBACK,
        "failure_rate": round(8 / LOOKBACK, 4),
        "streak": 8,
        "since": d.since.isoformat(),
        "change": {"at": d.change.at.isoformat(), "pulls": [12]},
        "new_value": format_literal(g.recomputed, g.decimals),
    }
    assert data["files"][1]["gates"][0]["change"]["pulls"] == []
    problems = parse_config("drift: {window: weekly}").drift
    flagged = json.loads(drift_json([drifting_report(settings=problems)]))
    assert flagged["files"][0]["problems"] == list(problems.problems)


def test_a_gate_missing_from_the_change_data_keeps_the_json_null() -> None:
    report = drifting_report()
    (d,) = report.drifting
    loose = d.model_copy(update={"change": None, "since": None})
    data = json.loads(drift_json([report.model_copy(update={"gates": (loose,)})]))
    assert data["files"][0]["gates"][0]["change"] is None
    assert data["files"][0]["gates"][0]["since"] is None


def test_a_change_without_pulls_names_its_commits() -> None:
    report = drifting_report(pulls=())
    (change,) = report.review.changes
    before, after = "a" * 40, "b" * 40
    named = change.model_copy(update={"before_commit": before, "after_commit": after})
    review = report.review.model_copy(update={"changes": (named,)})
    report = drift_report(FILE, review, DriftSettings())
    body = item_body(report, mode="issue", repo_url=URL)
    when = day_month_year(change.at)
    assert (
        f"Tied to the regime change of {when}, between commits"
        f" [aaaaaaa…bbbbbbb]({URL}/compare/{before}...{after})." in body
    )
    plain = item_body(report, mode="issue", repo_url=None)
    assert "between commits aaaaaaa…bbbbbbb." in plain
