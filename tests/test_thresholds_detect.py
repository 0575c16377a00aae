"""YAML / JSON / TOML threshold files read without configuration: the shapes recognised, no
gate from a number that is not a threshold, and hints (with config lines that work) instead
of silence for a file the config names."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.core.config import RepoConfig, parse_config
from bot.core.models import Gate, ThresholdFile
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.structured.detect import detect_structured
from bot.core.thresholds.structured.key_words import parse_op

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gates" / "structured"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def detected(name: str, *, named: bool = False) -> ThresholdFile:
    result = detect_structured(f"ci/{name}", fixture(name), named=named)
    assert result is not None
    return result


def read(gates: tuple[Gate, ...]) -> list[tuple[str, str, str, str]]:
    return [(g.metric, g.literal, g.kind, g.op) for g in gates]


def exact(result: ThresholdFile, text: str) -> None:
    for gate in result.gates:
        assert text[gate.start : gate.end] == gate.literal
        assert gate.line == text[: gate.start].count("\n") + 1


def test_lm_eval_accuracy_lists() -> None:
    text = fixture("lm_eval_llama3_fp8.yaml")
    result = detected("lm_eval_llama3_fp8.yaml")
    assert read(result.gates) == [
        ("gsm8k/exact_match,strict-match", "0.762", "reference", "=="),
        ("gsm8k/exact_match,flexible-extract", "0.771", "reference", "=="),
        ("mmlu_pro/exact_match,custom-extract", "0.412", "reference", "=="),
    ]
    exact(result, text)
    rels = [g.tolerance.rel_span for g in result.gates if g.tolerance]
    assert [(s.literal, s.start) for s in rels if s] == [
        ("0.05", text.index("rtol: 0.05") + 6),
        ("0.05", text.index("rtol: 0.05") + 6),
        ("0.1", text.index("rtol: 0.1") + 6),
    ]
    assert result.unbound == ()  # limit, num_fewshot, max_model_len: settings, said nothing


def test_lm_eval_without_a_tolerance_leaves_it_to_the_config() -> None:
    text = fixture("lm_eval_llama3_fp8.yaml").replace("rtol: 0.05\n", "")
    text = text.replace("    rtol: 0.1   # few samples: a wider band\n", "")
    result = detect_structured("ci/acc.yaml", text, named=False)
    assert result is not None and [g.tolerance for g in result.gates] == [None] * 3
    config = parse_config("tolerance: {rel: 0.08}\nfiles: [ci/acc.yaml]\n")
    found = find_gates("ci/acc.yaml", text, config)
    assert found is not None
    assert {(g.tolerance.rel if g.tolerance else None) for g in found.gates} == {0.08}


def test_bound_keys_under_model_names() -> None:
    result = detected("serving_perf_thresholds.yaml")
    assert read(result.gates) == [
        (f"{model}/{metric}", literal, "limit", op)
        for model, values in (
            ("llama3_8b_instruct", ("41.5", "9120", "212", "11.8", "71.2")),
            ("qwen2_72b_instruct", ("7.9", "1630", "1180", "33.0", "78.9")),
        )
        for (metric, op), literal in zip(
            (
                ("request_throughput", ">="),
                ("output_tokens_per_s", ">="),
                ("ttft_ms_p99", "<="),
                ("itl_ms_p50", "<="),
                ("gpu_memory_gb", "<="),
            ),
            values,
            strict=True,
        )
    ]
    exact(result, fixture("serving_perf_thresholds.yaml"))
    assert not any("max_model_len" in g.name or "num_prompts" in g.name for g in result.gates)


def test_limits_beside_references_of_the_same_stem() -> None:
    text = fixture("spec_decode_acceptance.yaml")
    result = detected("spec_decode_acceptance.yaml", named=True)
    assert len(result.gates) == 25
    assert {(g.kind, g.op) for g in result.gates} == {("limit", ">=")}
    assert result.gates[0].metric == "TestLlama3_8B::test_eagle3/al"
    assert result.gates[0].literal == "2.67"
    exact(result, text)
    assert [g.name for g in result.gates if g.ignored] == ["TestKimiK2::test_mtp.min_al"]
    # the references are hints: one pattern declares the limits with them coupled
    assert len(result.unbound) == 25 and all(u.name.endswith("ref_al") for u in result.unbound)
    hint = result.unbound[0]
    assert (hint.literal, hint.line) == ("2.81", text[: text.index("2.81")].count("\n") + 1)
    config = parse_config(hint.config)
    (declared,) = config.files[0].gates
    assert (declared.key, declared.metric, declared.op) == ("*.min_al", "{1}/al", ">=")
    assert declared.coupled[0].key == "ref_al"
    assert declared.coupled[0].factor == round(2.81 / 2.67, 4)
    again = find_gates("ci/spec_decode_acceptance.yaml", text, config)
    assert again is not None and len(again.gates) == 25
    assert all(g.coupled and g.coupled[0].name.endswith("ref_al") for g in again.gates)


def test_entries_with_their_operators() -> None:
    text = fixture("eval_gates.json")
    result = detected("eval_gates.json")
    assert read(result.gates) == [
        ("eval/alpaca_eval_lc_winrate", "22.5", "limit", ">="),
        ("eval/ifeval_strict_acc", "0.61", "limit", ">="),
        ("train/final_loss", "0.58", "limit", "<="),
        ("perf/step_time_s", "1.94", "limit", "<="),  # direction: minimize
        ("eval/mt_bench_score", "7.41", "reference", "=="),
    ]
    exact(result, text)
    tolerance = result.gates[-1].tolerance
    assert tolerance is not None and tolerance.rel == 0.03  # the top-level rtol
    (hint,) = result.unbound  # a value without a comparison
    assert (hint.name, hint.literal) == ("checks[metric=eval/truthfulqa_mc2].value", "0.55")
    declared = parse_config(hint.config).files[0].gates[0]
    assert (declared.key, declared.metric) == (hint.name, "eval/truthfulqa_mc2")


def test_slo_entries_and_toml_tables() -> None:
    assert read(detected("slo_checks.yaml").gates) == [
        ("ranking/ndcg_at_10", "0.412", "limit", ">="),
        ("ranking/p95_latency_ms", "85", "limit", "<="),
        ("ranking/error_rate", "0.002", "limit", "<="),
    ]
    text = fixture("diffusion_regression.toml")
    result = detected("diffusion_regression.toml")
    assert read(result.gates) == [
        ("fid", "14.6", "limit", "<="),
        ("clip_score", "0.274", "limit", ">="),
        ("sampling/seconds_per_image", "2.35", "limit", "<="),
        ("lpips", "0.1875", "reference", "=="),
    ]
    exact(result, text)
    rel = result.gates[-1].tolerance.rel_span if result.gates[-1].tolerance else None
    assert rel is not None and text[rel.start : rel.end] == "0.02"


def test_golden_values_with_tolerances_beside_them() -> None:
    text = fixture("golden_metrics.yaml")
    result = detected("golden_metrics.yaml")
    assert read(result.gates) == [
        ("gpt3_345m_tp2_pp2/lm_loss", "6.8124", "reference", "=="),
        ("gpt3_345m_tp2_pp2/throughput_tokens_per_s", "31250", "reference", "=="),
        ("gpt3_345m_tp2_pp2/iteration_time_s", "0.42", "limit", "<="),
        ("bert_large_tp1/lm_loss", "7.2051", "reference", "=="),
        ("bert_large_tp1/mlm_accuracy", "0.312", "reference", "=="),
    ]
    exact(result, text)
    tolerances = [(g.tolerance.rel, g.tolerance.abs) for g in result.gates if g.tolerance]
    assert tolerances == [(0.01, 0.002), (0.08, 0.002), (None, 0.002), (None, 0.002)]
    assert not any("rtol" in g.name for g in result.gates)  # tolerances are no gates


@pytest.mark.parametrize("name", ["train_config.yaml", "sweep.yaml"])
def test_settings_and_sweep_ranges_are_no_gates(name: str) -> None:
    assert detect_structured(f"ci/{name}", fixture(name), named=False) is None
    result = detected(name, named=True)
    assert result.gates == ()
    assert result.unbound  # named: never silence, each number with the lines declaring it
    for hint in result.unbound:
        declared = parse_config(hint.config).files[0].gates[0]
        again = find_gates(f"ci/{name}", fixture(name), parse_config(hint.config))
        assert again is not None
        assert [g.literal for g in again.gates if g.name == declared.key] == [hint.literal]


def test_a_named_file_without_numbers_says_so() -> None:
    result = detect_structured("ci/empty.yaml", "job: nightly\nsteps: [build, test]\n", named=True)
    assert result is not None and result.gates == () and result.unbound == ()
    assert result.notes == ("ci/empty.yaml: no numeric value to read as a gate",)


def test_the_seed_eval_thresholds_now_read_without_config() -> None:
    text = (Path(__file__).resolve().parent / "data" / "eval_thresholds.yaml").read_text()
    found = find_gates("ci/eval_thresholds.yaml", text, RepoConfig())
    assert found is not None
    assert read(found.gates)[:2] == [
        ("gsm8k/eval/acc", "0.56", "limit", ">="),
        ("gsm8k/loss/clipfrac", "4.0e-2", "limit", "<="),
    ]
    assert "gsm8k.eval.tokens_max" not in {g.name for g in found.gates}  # tokens: a setting


def test_invalid_files_are_errors_with_lines() -> None:
    with pytest.raises(ThresholdFileError, match=r"^ci/t\.yaml:3: not valid YAML"):
        detect_structured("ci/t.yaml", "a: 1\nb: [1, 2\nc: 3\n", named=False)
    with pytest.raises(ThresholdFileError, match=r"^ci/t\.json:1: not valid JSON"):
        detect_structured("ci/t.json", '{"a": }', named=True)


@pytest.mark.parametrize(
    ("field", "text", "op"),
    [
        ("op", ">=", ">="),
        ("comparison", "GreaterThanOrEqual", ">="),
        ("operator", "lt", "<"),
        ("comparison", "min", ">="),  # a minimum: runs stay above it
        ("mode", "min", "<="),  # lower is better: the value is a ceiling
        ("goal", "maximize", ">="),
        ("direction", "lower_is_better", "<="),
        ("op", "approx", "=="),
        ("op", "sideways", None),
    ],
)
def test_operator_words(field: str, text: str, op: str | None) -> None:
    assert parse_op(field, text) == op
