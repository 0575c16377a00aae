"""Following numbers to the shell comparisons that fail a CI job (issue 28, shell)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.config import RepoConfig, parse_config
from bot.core.models import Gate
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.shell.argv import argument_checks
from bot.core.thresholds.shell.calls import called_scripts
from bot.core.thresholds.shell.script import parse_shell


def found(text: str, related: dict[str, str] | None = None) -> set[tuple[str, str, str]]:
    """(metric, literal, op) of each gate, every gate's span holding its literal."""
    gates = parse_shell("ci/check.sh", text, related).gates
    for g in gates:
        assert text[g.start : g.end] == g.literal
    return {(g.metric, g.literal, g.op) for g in gates}


NIGHTLY = """#!/usr/bin/env bash
set -eu
out=runs/latest
bleu=$(jq -r '.scores.bleu' "$out/summary.json")
wer="$(jq '.asr["wer"] | tonumber' "$out/summary.json")"
lat=$(jq -r '.serving.p99_ms|round' "$out/summary.json")
rouge=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['rouge_l'])" x.json)
readonly WER_CEILING=0.083
if ! (( $(echo "$bleu >= 31.5" | bc -l) )); then
  echo "bleu too low"; exit 3
fi
[ "$(echo "${wer} > ${WER_CEILING}" | bc -l)" -ne 1 ] || { echo "wer $wer"; exit 1; }
[[ $lat -le 250 && $lat -gt 0 ]] || exit 1
test "$lat" -lt 10 && exit 2
awk -v r="$rouge" 'BEGIN { if (r < 0.412) exit 1 }'
python -c "import sys; sys.exit(0 if float('$rouge') <= 0.99 else 1)"
"""


def test_bc_awk_python_and_test_commands_guarded_or_under_set_e() -> None:
    assert found(NIGHTLY) == {
        ("scores/bleu", "31.5", ">="),
        ("asr/wer", "0.083", "<="),
        ("serving/p99_ms", "250", "<="),
        ("serving/p99_ms", "10", ">="),
        ("rouge_l", "0.412", ">="),
        ("rouge_l", "0.99", "<="),
    }


def test_the_variable_names_the_gate_and_its_span_is_the_assignment() -> None:
    gate = next(g for g in parse_shell("ci/check.sh", NIGHTLY).gates if g.metric == "asr/wer")
    assert (gate.name, gate.line) == ("WER_CEILING", 8)
    unbound = {u.name for u in parse_shell("ci/check.sh", NIGHTLY).unbound}
    assert "WER_CEILING" not in unbound


FUNCTIONS = """#!/bin/bash
set -o errexit
require_below() {
  local metric="$1"
  local got="$2" ceiling="$3"
  if [[ $(echo "$got >= $ceiling" | bc) == 1 ]]; then
    echo "$metric regressed"; exit 1
  fi
}
function at_least {
  (( $(echo "$1 < $2" | bc -l) )) && return 1
  return 0
}
MEM_GB_LIMIT=61.5
peak=$(jq .mem.peak_gb out.json)
require_below peak_memory_gb "$peak" "$MEM_GB_LIMIT"
f1=$(jq -r '.eval.f1' out.json)
at_least "$f1" 0.72
"""


def test_function_parameters_carry_numbers_and_names() -> None:
    assert found(FUNCTIONS) == {("peak_memory_gb", "61.5", "<"), ("eval/f1", "0.72", ">=")}


def test_unguarded_counts_and_floors_are_not_gates() -> None:
    text = """#!/bin/bash
n=$(wc -l < out.txt)
count=$(jq '.eval.count' r.json)
gpus=$(nvidia-smi -L | wc -l)
acc=$(jq '.acc' r.json)
(( n > 0 )) || exit 1
[ "$count" -ge 1 ] || exit 1
[ "$gpus" -ge 8 ] || exit 1
[ $? -eq 0 ] || exit 1
[ "$acc" -eq 3 ] || exit 1
if [ "$acc" -gt 5 ]; then echo big; fi
"""
    parsed = parse_shell("ci/check.sh", text)
    assert parsed.gates == ()
    reasons = {u.literal: u.reason for u in parsed.unbound}
    assert "8" in reasons and "count" in reasons["8"]


def test_a_number_reaching_an_unfollowed_value_is_a_hint() -> None:
    text = 'set -e\n[ "$(python score.py)" -gt 17 ]\n'
    (hint,) = parse_shell("ci/check.sh", text).unbound
    assert (hint.literal, hint.line) == ("17", 2)
    assert "not followed" in hint.reason


CHECKER = '''"""check.py RESULTS METRIC CEILING"""
import json
import sys

results, name = sys.argv[1], sys.argv[2]
ceiling = float(sys.argv[3])
value = json.load(open(results))[name]
if value > ceiling:
    sys.exit(f"{name} too high")
'''

ARGPARSE = """import argparse, json
p = argparse.ArgumentParser()
p.add_argument("summary")
p.add_argument("--verbose", action="store_true")
p.add_argument("--min-score", type=float, dest="floor")
args = p.parse_args()
data = json.load(open(args.summary))
assert data["score"] >= args.floor, "score regressed"
"""


def test_arguments_of_called_scripts() -> None:
    text = """#!/bin/sh
set -e
RES=out/r.json
KEY=val_loss
python3 tools/check.py "$RES" "$KEY" 2.35
uv run python tools/ci/score_gate.py "$RES" --verbose --min-score=0.61
./tools/check.py "$RES" wall_clock_s 812
"""
    related = {"tools/check.py": CHECKER, "tools/ci/score_gate.py": ARGPARSE}
    assert found(text, related) == {
        ("val_loss", "2.35", "<="),
        ("score", "0.61", ">="),
        ("wall_clock_s", "812", "<="),
    }
    assert found(text) == set()  # without the called scripts' texts: nothing bound


def test_argument_checks_read_argv_and_argparse() -> None:
    (check,) = argument_checks(CHECKER)
    assert (check.bound, check.op, check.metric) == (3, "<=", 2)
    (check,) = argument_checks(ARGPARSE)
    assert (check.bound, check.op, check.key) == (("--min-score",), ">=", "score")
    assert argument_checks("import sys\nif len(sys.argv) < 3: sys.exit(1)\n") == ()
    assert argument_checks("def (:\n") == ()


@pytest.mark.parametrize(
    ("line", "paths"),
    [
        ("python tests/eval_assert.py r.json acc 0.5", ("tests/eval_assert.py",)),
        ("python3 -m tools.gate --x 1", ("tools/gate.py", "tools/gate/__main__.py")),
        ("bash scripts/check.sh", ("scripts/check.sh",)),
        ("./check.sh a", ("ci/check.sh",)),
        ("uv run ./tests/gate.py", ("tests/gate.py",)),
        ("echo python x.py; ls", ()),
        ("python -c 'print(1)'", ()),
    ],
)
def test_called_scripts(line: str, paths: tuple[str, ...]) -> None:
    assert set(paths) <= set(called_scripts("ci/run.sh", f"#!/bin/sh\n{line}\n"))
    if not paths:
        assert called_scripts("ci/run.sh", f"#!/bin/sh\n{line}\n") == ()


def test_get_summary_asserts_keep_their_gates_beside_new_ones() -> None:
    text = """#!/bin/bash
set -e
ACC_MIN_VALUE=0.61
python get_summary.py --asserts "eval/acc >= $ACC_MIN_VALUE"
acc=$(jq .eval.acc r.json)
[ "$(echo "$acc < $ACC_MIN_VALUE" | bc)" = 0 ]
"""
    gates: tuple[Gate, ...] = parse_shell("ci/check.sh", text).gates
    assert [(g.name, g.metric, g.op) for g in gates] == [("ACC_MIN_VALUE", "eval/acc", ">=")]


def test_hinted_variable_config_lines_declare_the_gate() -> None:
    text = 'set -e\nTOKENS_MIN=900\n[ "$(./bench.sh)" -ge "$TOKENS_MIN" ]\n'
    (hint,) = [u for u in parse_shell("ci/check.sh", text).unbound if u.name == "TOKENS_MIN"]
    config = parse_config(hint.config.split("\n", 1)[1])
    parsed = find_gates("ci/check.sh", text, config)
    assert parsed is not None
    assert [(g.literal, g.op) for g in parsed.gates] == [("900", ">=")]


def test_else_branches_names_and_markers() -> None:
    text = """#!/bin/bash
ok=$(jq '.ok_rate' s.json)
if [[ $ok > 0.9 ]]; then echo fine; else echo "ok_rate $ok"; exit 1; fi
if (( $(echo "$ok > 0.995" | bc) )); then exit 4; fi  # threshold-bot: ignore
[ $# -lt 2 ] && { echo usage; exit 2; }
[ "$(ls out | wc -l)" -ge 3 ] || exit 1
python -c "assert float('$ok') > 0.5" && python -c "assert $ok > 0.6"
"""
    parsed = parse_shell("ci/check.sh", text)
    got = {(g.name, g.literal, g.op, g.ignored != "") for g in parsed.gates}
    assert got == {("ok_rate >", "0.9", ">", False), ("ok_rate <=", "0.995", "<=", True)}
    assert parsed.unbound == ()  # argument counts and listed files: not even hints


def test_a_repeated_metric_and_operator_is_numbered() -> None:
    text = 'set -e\ns=$(jq .f1 r.json)\n[ "$s" \\> 0.4 ]\n(( $(echo "$s > 0.45" | bc) ))\n'
    names = [(g.name, g.literal) for g in parse_shell("ci/check.sh", text).gates]
    assert names == [("f1 >", "0.4"), ("f1 > #2", "0.45")]


def test_function_calls_are_bounded() -> None:
    calls = "".join(f"check {n}.5\n" for n in range(400))
    body = 'if [[ $(echo "$(jq .acc r.json) < $1" | bc) == 1 ]]; then exit 1; fi'
    text = f"#!/bin/bash\ncheck() {{ {body}; }}\n"
    gates = parse_shell("ci/check.sh", text + calls).gates
    assert len(gates) == 256  # MAX_CALLS calls followed, the rest not


PIECES = [
    *"\n;|&!{}() ",
    "[ ",
    " ]",
    "[[ ",
    " ]]",
    "(( ",
    " ))",
    "if ",
    "then ",
    "else ",
    "fi",
    "exit 1",
    "return 1",
    "set -e",
    "|| ",
    "&& ",
    "f() ",
    "f ",
    "$1",
    '"$x"',
    "x=0.5",
    "y=$(jq .a.b f)",
    "$y",
    "-lt ",
    "-ge ",
    "< ",
    "> ",
    "12.5",
    "0",
    '$(echo "$y < 0.3" | bc)',
    "awk -v p=$y 'BEGIN{exit !(p<2)}'",
    "python -c \"import sys; sys.exit(0 if float('$y') > 1.5 else 1)\"",
    "-eq 0",
    "function g {",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=60).map("".join))
def test_followed_gates_hold_their_literals_on_any_mix(text: str) -> None:
    for gate in parse_shell("t.sh", text, {"t.py": CHECKER}).gates:
        assert text[gate.start : gate.end] == gate.literal
        assert gate.line == text[: gate.start].count("\n") + 1
        assert gate.op in (">=", ">", "<=", "<")


def test_here_string_bc_awk_with_shell_variables_and_python_reading_keys() -> None:
    text = """#!/bin/bash
set -e
top1=$(jq .val.top1 m.json)
MIN_TOP5=0.93
(( $(bc -l <<< "$top1 >= 0.761") )) || exit 1
top5=$(jq .val.top5 m.json)
awk "BEGIN { exit !($top5 >= $MIN_TOP5) }"
python3 -c "import json, sys; m = json.load(open('m.json'))
sys.exit(0 if m['val']['nll'] < 1.02 else 1)"
"""
    assert found(text) == {
        ("val/top1", "0.761", ">="),
        ("val/top5", "0.93", ">="),
        ("val/nll", "1.02", "<"),
    }


def test_a_compared_variable_that_cannot_be_bound_keeps_the_script_a_threshold_file() -> None:
    # assigned twice, so no gate; the literal reaches a comparison: a hint, never None
    text = (
        "#!/bin/bash\n"
        "ACC_MIN=0.5\n"
        'if [ "$FAST" = 1 ]; then\n'
        "  ACC_MIN=0.4\n"
        "fi\n"
        'python check.py --asserts "eval/acc >= $ACC_MIN"\n'
    )
    found = find_gates("ci/nightly.sh", text, RepoConfig())
    assert found is not None and found.gates == ()
    (hint,) = found.unbound
    assert (hint.name, hint.literal, hint.compared) == ("ACC_MIN", "0.5", True)
    assert "assigned 2 times" in hint.reason
    # a numeric variable used in no comparison does not make a script a threshold file
    assert (
        find_gates("ci/train.sh", "#!/bin/bash\nLR=0.001\npython train.py\n", RepoConfig()) is None
    )
