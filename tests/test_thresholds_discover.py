"""Which files hold gates, and which history source each gate reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.core.config import parse_config
from bot.core.globs import glob_match
from bot.core.models import SourceSpec
from bot.core.thresholds.discover import find_gates, is_candidate
from bot.core.thresholds.errors import ThresholdFileError

DATA = Path(__file__).resolve().parent / "data"
SCRIPT = (DATA / "nightly_gsm8k.sh").read_text(encoding="utf-8")
YAML = (DATA / "eval_thresholds.yaml").read_text(encoding="utf-8")
NO_CONFIG = parse_config("")


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("ci/*.sh", "ci/run.sh", True),
        ("ci/*.sh", "ci/sub/run.sh", False),
        ("ci/**/*.sh", "ci/run.sh", True),
        ("ci/**/*.sh", "ci/a/b/run.sh", True),
        ("**/thresholds.yaml", "thresholds.yaml", True),
        ("**/thresholds.yaml", "a/b/thresholds.yaml", True),
        ("ci/run?.sh", "ci/run1.sh", True),
        ("ci/run[!0-9].sh", "ci/run1.sh", False),
        ("ci/run[0-9].sh", "ci/run1.sh", True),
        ("./ci/*.json", "ci/a.json", True),
        ("ci/a.json", "ci/a.jsonx", False),
        ("ci/**", "ci/a/b", True),
        # not a valid character class: the "[" is literal, never an error
        ("ci/run[9-0].sh", "ci/run5.sh", False),
        ("ci/run[9-0].sh", "ci/run[9-0].sh", True),
    ],
)
def test_glob_match(pattern: str, path: str, expected: bool) -> None:
    assert glob_match(pattern, path) is expected


def test_is_candidate_without_and_with_config() -> None:
    assert is_candidate("tests/ci/gsm8k.sh", NO_CONFIG)
    assert is_candidate("run.bash", NO_CONFIG)
    assert not is_candidate("ci/thresholds.yaml", NO_CONFIG)
    config = parse_config("shell: [tests/ci/*.sh, scripts/nightly]\nfiles: [ci/*.yaml]\n")
    assert is_candidate("tests/ci/gsm8k.sh", config)
    assert is_candidate("scripts/nightly", config)
    assert is_candidate("ci/thresholds.yaml", config)
    assert not is_candidate("other/run.sh", config)  # shell globs given: only those


def test_zero_config_shell_script() -> None:
    found = find_gates("tests/ci/gsm8k.sh", SCRIPT, NO_CONFIG)
    assert found is not None
    assert found.gates and found.unbound
    expected = SourceSpec(kind="wandb", project="gsm8k_fully_async_ci", entity="rl-team")
    assert found.source == expected
    assert all(g.source == expected for g in found.gates)


def test_not_threshold_files() -> None:
    assert find_gates("ci/setup.sh", "X=1\necho $X\n", NO_CONFIG) is None
    assert find_gates("ci/a.yaml", "optimizer: {lr: 3.0e-4, max_steps: 1000}\n", NO_CONFIG) is None
    assert find_gates("README.md", "m >= $X", NO_CONFIG) is None
    config = parse_config("shell: [tests/ci/*.sh]\n")
    assert find_gates("other/run.sh", SCRIPT, config) is None
    # named in the config: reported even without gates (its unbound variables explain why)
    found = find_gates("tests/ci/setup.sh", "X=1\n", config)
    assert found is not None and found.gates == () and found.unbound[0].name == "X"


def test_extensionless_script_by_shebang_or_glob() -> None:
    text = "#!/usr/bin/env bash\nMIN=0.5\npython t.py --asserts 'acc >= $MIN'\n"
    found = find_gates("ci/nightly", text, NO_CONFIG)
    assert found is not None and [g.name for g in found.gates] == ["MIN"]
    listed = parse_config("shell: [ci/nightly]\n")
    found = find_gates("ci/nightly", text.split("\n", 1)[1], listed)
    assert found is not None and [g.name for g in found.gates] == ["MIN"]


CONFIG = """
sources:
  team: {kind: wandb, entity: rl-team, project: default_proj, tags: [nightly]}
  other: {kind: wandb, entity: other, project: other_proj}
  offline: {kind: file, path: ci/runs.jsonl}
default_source: team
files:
  - path: ci/*.yaml
    source: offline
    gates:
      - {key: gsm8k.eval.acc_min, metric: eval/all/avg_score, op: ">=", name: ACC_MIN}
      - {key: math500.1.max, metric: len, op: "<=", source: other}
  - path: ci/*.yaml
    gates:
      - {key: flow.a, metric: flow, op: "<"}
  - path: tests/ci/declared.sh
    gates:
      - {key: NUM_GPUS, metric: gpus, op: ">=", source: other}
"""


def test_structured_gates_and_source_precedence() -> None:
    config = parse_config(CONFIG)
    found = find_gates("ci/thresholds.yaml", YAML, config)
    assert found is not None
    by_name = {g.name: g for g in found.gates}
    assert sorted(by_name) == ["ACC_MIN", "flow.a", "math500.1.max"]
    assert by_name["ACC_MIN"].source == config.sources["offline"]  # the file's source
    assert by_name["math500.1.max"].source == config.sources["other"]  # the gate's own
    assert by_name["flow.a"].source == config.sources["offline"]  # first matching file's
    assert found.source == config.sources["offline"]
    start = YAML.index("0.56")
    assert (by_name["ACC_MIN"].start, by_name["ACC_MIN"].end) == (start, start + 4)


def test_project_in_script_merges_over_default_source() -> None:
    config = parse_config(CONFIG)
    found = find_gates("tests/ci/gsm8k.sh", SCRIPT, config)
    assert found is not None
    team = config.sources["team"]
    merged = team.model_copy(update={"project": "gsm8k_fully_async_ci", "entity": "rl-team"})
    assert found.source == merged
    assert merged.tags == ("nightly",)  # the default's filters carry over
    assert all(g.source == merged for g in found.gates)
    # no project named: the default source
    plain = find_gates("tests/ci/p.sh", "M=1\necho 'a >= $M'\n", config)
    assert plain is not None and plain.gates[0].source == team
    # a default of another kind does not merge: the script's own project wins
    offline = parse_config("sources: {o: {kind: file, path: r.jsonl}}\ndefault_source: o\n")
    found = find_gates("tests/ci/gsm8k.sh", SCRIPT, offline)
    assert found is not None and found.source is not None
    assert (found.source.kind, found.source.project) == ("wandb", "gsm8k_fully_async_ci")


def test_declared_gate_on_shell_variable() -> None:
    config = parse_config(CONFIG)
    found = find_gates("tests/ci/declared.sh", SCRIPT, config)
    assert found is not None
    gpus = [g for g in found.gates if g.name == "NUM_GPUS"]
    assert len(gpus) == 1
    start = SCRIPT.index("NUM_GPUS=8") + len("NUM_GPUS=")
    assert (gpus[0].start, gpus[0].end, gpus[0].metric, gpus[0].op) == (
        start,
        start + 1,
        "gpus",
        ">=",
    )
    assert gpus[0].source == config.sources["other"]
    assert "NUM_GPUS" not in {u.name for u in found.unbound}
    assert "EVAL_ACC_MIN_VALUE" in {g.name for g in found.gates}  # discovered ones stay
    bad = SCRIPT.replace("NUM_GPUS=8", "NUM_GPUS=$(nproc)")
    with pytest.raises(
        ThresholdFileError, match=r"declared gate 'NUM_GPUS': \$NUM_GPUS is assigned"
    ):
        find_gates("tests/ci/declared.sh", bad, config)


def test_missing_declared_key_is_an_error() -> None:
    config = parse_config(CONFIG)
    with pytest.raises(ThresholdFileError) as err:
        find_gates("ci/other.yaml", "gsm8k: {eval: {}}\n", config)
    assert str(err.value).startswith("ci/other.yaml: gate 'ACC_MIN': key 'acc_min' not found")
