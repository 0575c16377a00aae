"""Python gates followed through values (issue 28, design item 1 within one file, items 4-5):
locals and arithmetic on them, conditional bounds, elements of a tuple result, ``.get()`` with
``if …: raise`` guards, windowed aggregations, and every literal reaching a comparison
reported as a gate or a hint (never silently dropped; never a gate when it is no threshold).
"""

from __future__ import annotations

from bot.core.config import RepoConfig, parse_config
from bot.core.models import Gate, ThresholdFile
from bot.core.thresholds.diff import diff_gates
from bot.core.thresholds.discover import find_gates

NO_CONFIG = RepoConfig()
Row = tuple[str, str, str, str]  # metric, op, literal, kind


def _read(path: str, text: str, config: RepoConfig = NO_CONFIG) -> ThresholdFile:
    found = find_gates(path, text, config)
    assert found is not None
    for gate in found.gates:  # every literal is where the gate says
        assert text[gate.start : gate.end] == gate.literal
    return found


def _rows(found: ThresholdFile) -> set[Row]:
    return {(g.metric, g.op, g.literal, g.kind) for g in found.gates}


def _by_literal(found: ThresholdFile, literal: str) -> Gate:
    return next(g for g in found.gates if g.literal == literal)


LOCALS = """\
from mt.pipeline import translate_eval, profile_decoder

PPL_RTOL = 0.02


def test_bleu_matches_reference():
    out = translate_eval("de-en")
    target_bleu = 27.4
    slack = 0.3
    assert abs(out["bleu"] - target_bleu) <= slack


def test_decoder_latency_budget():
    stats = profile_decoder(batch=8)
    baseline_ms = 41.0
    budget = baseline_ms * 1.1
    assert stats["latency_ms"] < budget


def test_perplexity_band():
    ppl = translate_eval("en-fr")["ppl"]
    reference_ppl = 12.9
    ceiling = reference_ppl * (1 + PPL_RTOL)
    floor = reference_ppl - 0.4
    assert floor <= ppl <= ceiling


def test_chrf_floor():
    chrf_score = translate_eval("de-en")["chrf_score"]
    minimum = 0.58
    assert chrf_score >= minimum, f"chrf {chrf_score} under {minimum}"


def test_memory_cap():
    cap = 18.5 * 1.25
    assert profile_decoder(batch=32)["memory_gb"] <= cap
    assert profile_decoder(batch=1)["memory_gb"] >= 0.9 * 0.8  # which is the reference?
"""


def test_locals_and_arithmetic_through_locals() -> None:
    found = _read("tests/test_mt.py", LOCALS)
    assert _rows(found) == {
        # translate_eval is called with two language pairs: they tell its results apart
        ("de-en/bleu", "==", "27.4", "reference"),
        ("latency_ms", "<=", "41.0", "reference"),
        ("en-fr/ppl", ">=", "12.9", "reference"),
        ("en-fr/ppl", "<=", "12.9", "reference"),
        ("de-en/chrf_score", ">=", "0.58", "limit"),
        ("memory_gb", "<=", "18.5", "reference"),
    }
    memory = _by_literal(found, "18.5")
    assert memory.tolerance is not None and memory.tolerance.rel == 0.25
    bleu = _by_literal(found, "27.4")
    assert bleu.tolerance is not None and bleu.tolerance.abs == 0.3
    latency = _by_literal(found, "41.0")
    assert latency.tolerance is not None and latency.tolerance.rel == 0.1
    assert latency.name == "test_decoder_latency_budget.baseline_ms"
    ppl = {g.op: g for g in found.gates if g.metric == "en-fr/ppl"}
    assert ppl["<="].tolerance is not None and ppl["<="].tolerance.rel == 0.02
    assert ppl[">="].tolerance is not None and ppl[">="].tolerance.abs == 0.4


CONDITIONAL = """\
import os

FULL_RUN = os.environ.get("NIGHTLY") == "1"
BLEU_FLOOR = 31.0 if FULL_RUN else 24.5


def test_bleu(run):
    assert run.metrics["bleu"] > BLEU_FLOOR


def test_bleu_again(run):
    assert run.metrics["bleu"] > BLEU_FLOOR


def test_tokens_per_sec(bench, fp16_enabled):
    floor = 900.0 if fp16_enabled() else 410.0
    assert bench["tokens_per_sec"] >= floor


def test_peak_memory(peak, big_model):
    assert peak["memory_gb"] < (38.5 if big_model else 20.0 if peak.sharded else 26.0)


def test_wer_reference(asr, quick):
    slack = 0.004 if quick else 0.002
    assert abs(asr["wer"] - 0.0731) <= slack
"""


def test_conditional_bounds_are_gates_per_branch() -> None:
    found = _read("tests/test_nightly.py", CONDITIONAL)
    assert _rows(found) == {
        ("bleu", ">", "31.0", "limit"),
        ("bleu", ">", "24.5", "limit"),
        ("tokens_per_sec", ">=", "900.0", "limit"),
        ("tokens_per_sec", ">=", "410.0", "limit"),
        ("memory_gb", "<", "38.5", "limit"),
        ("memory_gb", "<", "20.0", "limit"),
        ("memory_gb", "<", "26.0", "limit"),
        ("wer", "==", "0.0731", "reference"),
    }
    names = {g.literal: g.name for g in found.gates if g.metric != "wer"}
    assert len(set(names.values())) == len(names)  # one name per branch
    wer = {g.name: g.tolerance.abs for g in found.gates if g.metric == "wer" and g.tolerance}
    assert wer == {
        "test_wer_reference[wer] if quick": 0.004,
        "test_wer_reference[wer] if not quick": 0.002,
    }
    assert "FULL_RUN" in names["31.0"] and "not FULL_RUN" in names["24.5"]
    assert "not FULL_RUN" not in names["31.0"]
    assert "peak.sharded" in names["20.0"] and "not peak.sharded" in names["26.0"]
    assert _by_literal(found, "31.0").context == "test_bleu, test_bleu_again"
    # a branch's value changed in a PR: the same gate, changed (names are stable)
    head = _read("tests/test_nightly.py", CONDITIONAL.replace("24.5", "25.5"))
    changes = diff_gates(found, head)
    assert all(c.base is not None for c in changes)
    changed = [(c.base.literal, c.head.literal) for c in changes if c.base and c.changed]
    assert changed == [("24.5", "25.5")]


def test_conditional_branches_are_bounded() -> None:
    def chain(count: int) -> str:
        return " else ".join(f"0.{i}1 if mode == {i}" for i in range(1, count)) + " else 0.99"

    text = "def test_many(run, mode):\n    assert run['acc'] > ({})\n"
    assert len(_read("tests/test_many.py", text.format(chain(6))).gates) == 6
    over = find_gates("tests/test_many.py", text.format(chain(40)), NO_CONFIG)  # over the cap
    assert over is None or over.gates == ()


TUPLES = """\
def test_trainer_scores(trainer):
    train_loss, top5 = trainer.evaluate(split="val")
    assert train_loss < 1.8
    assert top5 > 0.88


def test_scorer_pair(trainer):
    out = trainer.score(split="test")
    assert out[1] >= 0.42 and out[0] <= 2.5
"""


def test_tuple_elements_are_metrics_or_hints() -> None:
    found = _read("tests/test_trainer.py", TUPLES)
    assert _rows(found) == {
        ("train_loss", "<", "1.8", "limit"),
        ("top5", ">", "0.88", "limit"),
    }
    hints = {u.literal: u for u in found.unbound}
    assert set(hints) >= {"0.42", "2.5"}
    assert "out[1]" in hints["0.42"].reason and hints["0.42"].config
    # pasting a hint's config lines binds its element as a gate
    for literal, op, metric in (("0.42", ">=", "out[1]"), ("2.5", "<=", "out[0]")):
        bound = _read("tests/test_trainer.py", TUPLES, parse_config(hints[literal].config))
        assert (metric, op, literal) in {(g.metric, g.op, g.literal) for g in bound.gates}
        assert literal not in {u.literal for u in bound.unbound}
    mapped = parse_config('metrics: {"out[0]": eval/loss, "out[1]": eval/map}')
    named = _read("tests/test_trainer.py", TUPLES, mapped)
    assert {(g.metric, g.literal) for g in named.gates} >= {
        ("eval/loss", "2.5"),
        ("eval/map", "0.42"),
    }


SCRIPT = """\
import json
import sys

P95_CEILING_MS = 180.0


def check(path):
    report = json.load(open(path))["summary"]
    acc = report.get("val_accuracy")
    if acc is not None and acc < 0.815:
        raise RuntimeError(f"accuracy {acc}")
    if report.get("p95_latency_ms", 0.0) > P95_CEILING_MS:
        sys.exit(2)
    if report.get("wer") is not None and report.get("wer") > 0.091:
        raise SystemExit("wer regressed")
    if report.get("quality", {}).get("rouge2", 0.0) < 0.19:
        sys.exit("rouge2")
    if report.get("epochs_run") != 3:
        sys.exit(1)
    if report.get("avg_output_tokens", 0) > 512.5 or report.get("output_tokens", 0) > 90000:
        sys.exit(3)
    if report.get("num_samples", 0) <= 0:
        sys.exit("nothing evaluated")


if __name__ == "__main__":
    check(sys.argv[1])
"""


def test_get_and_if_guards_in_a_script() -> None:
    config = parse_config('python: ["ci/*.py"]')
    found = _read("ci/gatekeeper.py", SCRIPT, config)
    assert _rows(found) == {
        ("summary/val_accuracy", ">=", "0.815", "limit"),
        ("summary/p95_latency_ms", "<=", "180.0", "limit"),
        ("summary/wer", "<=", "0.091", "limit"),
        ("summary/avg_output_tokens", "<=", "512.5", "limit"),  # a statistic, not a count
        ("summary/quality/rouge2", ">=", "0.19", "limit"),
    }


WINDOWS = """\
import json

import numpy as np


def window(series, first, last=None):
    return np.median(series[first:last])


def test_rl_run(tmp_path):
    hist = json.loads((tmp_path / "hist.json").read_text())
    assert window(hist["reward"], -10) > 0.6
    assert window(hist["value_loss"], -8, -2) < 0.35
    assert np.mean(hist["entropy"][-4:]) > 1.1
    assert hist["kl"][250] < 0.08
    assert sum(hist["episode_return"][-20:]) / 20 > 195.0
"""


def test_windowed_aggregations_and_single_steps() -> None:
    found = _read("tests/test_rl.py", WINDOWS)
    assert _rows(found) == {
        ("reward", ">", "0.6", "limit"),
        ("value_loss", "<", "0.35", "limit"),
        ("entropy", ">", "1.1", "limit"),
        ("kl", "<", "0.08", "limit"),
        ("episode_return", ">", "195.0", "limit"),
    }
    episodes = _by_literal(found, "195.0")
    assert (episodes.aggregation, episodes.last_steps) == ("mean", 20)
    reward = _by_literal(found, "0.6")
    assert (reward.aggregation, reward.last_steps) == ("median", 10)
    value_loss = _by_literal(found, "0.35")
    assert value_loss.aggregation == "median" and "-8:-2" in value_loss.name
    entropy = _by_literal(found, "1.1")
    assert (entropy.aggregation, entropy.last_steps) == ("mean", 4)
    assert "step 250" in _by_literal(found, "0.08").name


NOT_GATES = """\
def test_smoke(run, resp, batches):
    out = run(max_steps=20)
    for arg in out["config"]:
        if arg["key"] == "hidden_size":
            assert arg["value"] == 4096
    assert out["eval_loss"] > 0
    assert out["eval_loss"] >= 0.0
    assert out["samples_seen"] >= 1
    assert out["global_step"] == 20
    assert resp.status_code == 200
    assert len(batches) == 16
    assert out["train_loss"].shape[0] == 20
    assert out["token_accuracy"] <= 1.0
    assert out["eval_perplexity"] >= 1
    assert out["eval_loss"] < 3.1
"""


def test_what_is_not_a_gate_stays_out() -> None:
    found = _read("tests/test_smoke.py", NOT_GATES)
    assert _rows(found) == {("eval_loss", "<", "3.1", "limit")}
    assert {u.literal for u in found.unbound} <= {"4096"}


RECORDED = """\
import sys


def main(report):
    problems = []
    if report["top1_acc"] < 0.762:
        problems.append("top1_acc regressed")
    if report["eval_loss"] > 1.35:
        problems.append("eval_loss regressed")
    if report["epochs"] < 3:
        print("short run")
    passed = True
    if report["ece"] > 0.045:
        passed = False
    if problems:
        print("\\n".join(problems))
        sys.exit(1)
    assert passed


def notes(report):
    seen = []
    if report["bleu"] < 20.0:
        seen.append("low bleu")  # recorded, never failed on: not a gate
    return seen
"""


def test_failures_recorded_then_failed_on() -> None:
    config = parse_config('python: ["ci/*.py"]')
    found = _read("ci/verdict.py", RECORDED, config)
    assert _rows(found) == {
        ("top1_acc", ">=", "0.762", "limit"),
        ("eval_loss", "<=", "1.35", "limit"),
        ("ece", "<=", "0.045", "limit"),
    }


def test_failures_recorded_at_module_level() -> None:
    text = (
        "import json, sys\n"
        "m = json.load(open(sys.argv[1]))\n"
        "failed = False\n"
        "if m['val_f1'] < 0.7:\n"
        "    failed = True\n"
        "sys.exit(1 if failed else 0)\n"
    )
    found = _read("ci/flat.py", text, parse_config('python: ["ci/*.py"]'))
    assert _rows(found) == {("val_f1", ">=", "0.7", "limit")}


BRANCHES = """\
import os

if os.environ.get("FULL") == "1":
    MAP_FLOOR = 0.412
elif os.environ.get("SMOKE"):
    MAP_FLOOR = 0.2
else:
    MAP_FLOOR = 0.35

IOU_TARGET = 0.7 if os.environ.get("FULL") else 0.6


def test_detector(run, on_gpu):
    assert run["map"] >= MAP_FLOOR
    recall_floor = 0.55
    if on_gpu:
        recall_floor = 0.61
    low, high = 0.2, 0.9
    assert low <= run["box_recall"] <= high
    assert run["mask_recall"] >= recall_floor
"""


def test_if_statement_branches_and_tuple_assignments() -> None:
    found = _read("tests/test_detector.py", BRANCHES)
    assert _rows(found) == {
        ("map", ">=", "0.412", "limit"),
        ("map", ">=", "0.2", "limit"),
        ("map", ">=", "0.35", "limit"),
        ("box_recall", ">=", "0.2", "limit"),
        ("box_recall", "<=", "0.9", "limit"),
        ("mask_recall", ">=", "0.61", "limit"),
        ("mask_recall", ">=", "0.55", "limit"),
    }
    names = {g.literal: g.name for g in found.gates if g.metric == "map"}
    assert names["0.412"] == "MAP_FLOOR if os.environ.get('FULL') == '1'"
    assert names["0.35"].startswith("MAP_FLOOR if not os.environ.get('FULL') == '1' and not ")
    assert _by_literal(found, "0.61").name == "test_detector.recall_floor if on_gpu"
    assert _by_literal(found, "0.55").name == "test_detector.recall_floor if not on_gpu"
    # a conditional constant compared nowhere: each branch a hint (not a gate)
    hinted = {u.literal: u.name for u in found.unbound}
    assert hinted == {
        "0.7": "IOU_TARGET if os.environ.get('FULL')",
        "0.6": "IOU_TARGET if not os.environ.get('FULL')",
    }


def test_failures_returned_as_the_exit_status() -> None:
    text = (
        "import sys\n"
        "def main(m):\n"
        "    ok = True\n"
        "    if m['val_f1'] < 0.7:\n"
        "        print('low f1')\n"
        "        ok = False\n"
        "    return 0 if ok else 1\n"
        "def helper(m):\n"
        "    ok = True\n"
        "    if m['val_acc'] < 0.5:\n"
        "        ok = False\n"
        "    return 0 if ok else 1\n"  # not the exit status: not a gate
        "if __name__ == '__main__':\n"
        "    sys.exit(main(load()))\n"
    )
    found = _read("ci/status.py", text, parse_config('python: ["ci/*.py"]'))
    assert _rows(found) == {("val_f1", ">=", "0.7", "limit")}


DRIFT_SCRIPT = """\
import json
import sys

report = json.load(open(sys.argv[1]))
drift = report.get("embedding_drift")
if drift is None or drift > 0.12:
    raise RuntimeError(f"drift {drift}")
"""


def test_a_scripts_module_level_local_is_followed_to_its_key() -> None:
    # a script has no test function: its top-level names are its locals
    scored = DRIFT_SCRIPT.replace("embedding_drift", "kl_divergence")
    found = _read("ci/check_drift.py", scored)
    assert _rows(found) == {("kl_divergence", "<=", "0.12", "limit")}
    # a key whose name says nothing is a hint, and its config lines bind it
    found = _read("ci/check_drift.py", DRIFT_SCRIPT)
    assert found.gates == ()
    (hint,) = found.unbound
    assert (hint.literal, hint.line) == ("0.12", 6)
    bound = _read("ci/check_drift.py", DRIFT_SCRIPT, parse_config(hint.config))
    assert _rows(bound) == {("embedding_drift", "<=", "0.12", "limit")}


MEASURED = """\
from gan import train_gan


def test_gan_losses():
    gen, disc = train_gan(epochs=2)
    assert gen < 1.85
    assert disc > 0
    out = train_gan(epochs=1, return_fid=True)
    assert out <= 31.5
"""


def test_values_a_call_returned_are_hints_the_config_binds() -> None:
    found = _read("tests/test_gan.py", MEASURED)
    assert found.gates == ()
    hints = {u.literal: u for u in found.unbound}
    assert set(hints) == {"1.85", "31.5"}  # `disc > 0` is a positivity floor: nothing
    pasted = parse_config(hints["1.85"].config.replace('"gen": "gen"', '"gen": "train/gen_loss"'))
    bound = _read("tests/test_gan.py", MEASURED, pasted)
    assert ("train/gen_loss", "<", "1.85", "limit") in _rows(bound)


def test_a_rate_per_unit_is_a_measurement_not_a_count() -> None:
    code = (
        "def test_speed(run):\n"
        "    assert run['images_per_gpu'] >= 212.0\n"
        "    assert run['num_gpus'] >= 8\n"
    )
    found = _read("tests/test_speed.py", code)
    assert _rows(found) == {("images_per_gpu", ">=", "212.0", "limit")}
