from datetime import UTC, date, datetime

from bot.core.models import Change, MetricShift, RuleSettings, WindowSpec
from bot.features.rebaseline.provenance import (
    Provenance,
    find_block,
    supports_comments,
    write_provenance,
)

SCRIPT = """#!/bin/bash
set -e
# eval thresholds
export EVAL_ACC_MIN_VALUE=0.56
export AVG_NUM_TOKENS_MAX_VALUE=283
python get_summary.py --asserts "eval/all/avg_score >= $EVAL_ACC_MIN_VALUE"
"""


def prov(**kw: object) -> Provenance:
    base: dict[str, object] = {
        "rule": RuleSettings(),
        "window_first": datetime(2026, 11, 12, tzinfo=UTC),
        "window_last": datetime(2026, 12, 1, tzinfo=UTC),
        "runs": 20,
        "on": date(2026, 12, 2),
        "by": "alice",
        "changes": (
            Change(
                at=datetime(2026, 6, 30, tzinfo=UTC),
                pulls=(1798,),
                metrics={"loss/avg_final_rewards": MetricShift(before=0.285, after=0.238)},
            ),
        ),
    }
    base.update(kw)
    return Provenance.model_validate(base)


def test_inserts_above_first_gate_and_keeps_other_lines() -> None:
    out = write_provenance(SCRIPT, prov(), first_gate_line=4)
    lines = out.splitlines()
    assert lines[:3] == SCRIPT.splitlines()[:3]
    assert lines[3] == "# threshold-bot: rebaselined 2026-12-02 by alice with /rebaseline"
    assert "5% allowance from the min/max of the last 20 finished runs, 20 runs" in lines[4]
    assert "(2026-11-12 .. 2026-12-01)" in lines[4]
    assert "2026-06-30 (#1798): loss/avg_final_rewards 0.285 -> 0.238" in out
    assert out.endswith(SCRIPT.split("# eval thresholds\n", 1)[1])


def test_second_write_replaces_the_block() -> None:
    once = write_provenance(SCRIPT, prov(), first_gate_line=4)
    twice = write_provenance(
        once,
        prov(runs=25, changes=(), rule=RuleSettings(window=WindowSpec(kind="regime"))),
        first_gate_line=4,
    )
    assert twice.count("threshold-bot:") == 1
    assert "current regime, 25 runs" in twice
    assert "regime changes" not in twice
    assert twice.splitlines()[:3] == SCRIPT.splitlines()[:3]
    assert twice.splitlines()[5:] == SCRIPT.splitlines()[3:]


def test_indent_and_crlf_are_kept() -> None:
    text = "jobs:\r\n  nightly:\r\n    acc_min: 0.56\r\n"
    out = write_provenance(text, prov(changes=()), first_gate_line=3)
    lines = out.split("\r\n")
    assert lines[2].startswith("    # threshold-bot:")
    assert "\n" not in out.replace("\r\n", "")
    assert out.endswith("    acc_min: 0.56\r\n")


def test_external_strings_stay_on_one_line() -> None:
    out = write_provenance(SCRIPT, prov(by="mallory\nexport EVIL=1"), first_gate_line=4)
    assert "\nexport EVIL" not in out
    block = find_block(out.splitlines())
    assert block is not None and block[1] - block[0] == 4


def test_json_has_no_comments() -> None:
    assert not supports_comments("ci/thresholds.json")
    assert supports_comments("ci/nightly.sh") and supports_comments("ci/t.yaml")
