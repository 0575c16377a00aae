"""The view model of a review: every table row, headline and phrase, ready to print.

Pure functions over ``bot.core.models.Review``; the templates (``bot.core.render.review``)
only lay these out.  Outside text is escaped or wrapped in trusted ``Markdown`` here.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.core.analysis.verdicts import ACTION_VERDICTS, needs_action
from bot.core.formatting import (
    day_month_year,
    decimals_range,
    per_run,
    percent,
    plural,
    significant_no_exponent,
)
from bot.core.models import Change, GateReview, Regime, Review, RuleSettings, WindowInfo
from bot.core.render.conditions import OP_SIGNS, rule_text, tolerance_too_tight
from bot.core.render.gates import (
    flagged,
    gate_label,
    judged,
    metric_cell,
    placeholders,
    proposed_text,
    value_text,
    where,
)
from bot.core.render.markdown import Markdown, code, escape, join, link

MOVED_METRICS = 2  # ungated metrics that moved most, shown in the regime table
MAX_EXTRA_METRICS = 4  # ungated metric columns at most
MAX_PULLS = 5  # PRs named per regime change (the most likely: attribution ranks them)
MAX_TREND_NOTES = 6  # drifting or wandering metrics noted under the regime table
# a regime change whose runs on either side have one commit: a range would compare it with itself
NO_CODE_CHANGE = "no code change between these runs"
WANDERS = "wanders"  # the regime table's cell of a metric with no stable level
TREND_KEY = "a → b: a drifting metric's trend line over the stretch"  # explains the cells

VERDICT_WORDS = {
    "ok": "ok",
    "unchanged": "unchanged",
    "too_tight": "too tight",
    "looser_than_rule": "looser than the rule",
    "unchanged_failing": "failing, unchanged",
    "no_data": "no data",
}
# an audit proposes nothing: every gate is as it is, so the words say how it fares
AUDIT_WORDS = VERDICT_WORDS | {"unchanged": "passing", "unchanged_failing": "failing"}
UNVERIFIED = "cannot be verified"  # a changed gate without data
NEW_SOURCE = "reads a new source"  # the PR changes the gate's history source: approve it


def is_audit(review: Review) -> bool:
    """Whether ``review`` proposes nothing: no judged gate is changed (``review`` without
    ``--base``, or a change that touches no gate).  Its gates then have one value, the
    current one, and the review never speaks of a proposed value."""
    return not any(g.changed for g in judged(review))


def verdict_words(g: GateReview, audit: bool = False) -> str:
    """A gate's verdict in words (``too tight``); in an audit, ``passing`` / ``failing``
    for the gates as they are."""
    return (AUDIT_WORDS if audit else VERDICT_WORDS)[g.verdict]


def attention_words(g: GateReview, audit: bool = False) -> str:
    """What the headline and the verdict cell say of a gate that needs attention."""
    if g.proposed_source:
        return NEW_SOURCE
    return UNVERIFIED if g.verdict == "no_data" else verdict_words(g, audit)


VERDICT_ICONS = {
    "ok": "✅",
    "unchanged": "✅",
    "too_tight": "❌",
    "looser_than_rule": "⚠️",
    "unchanged_failing": "❌",
    "no_data": "❔",
}


def _short(sha: str | None) -> str:
    return (sha or "?")[:7]


_QUOTED = re.compile(r"\\`(.+?)\\`")  # a `quoted` name once escaped


def prose(text: str) -> Markdown:
    """An explanation, note or warning (the bot's words around outside text), escaped, with
    its `quoted` names in a code font: never a backslash before a backtick."""
    return Markdown(_QUOTED.sub(r"<code>\1</code>", escape(text)))


@dataclass(frozen=True)
class GateRow:
    """One gate, with every cell of its table row ready to print."""

    gate: GateReview
    op: str
    label: Markdown
    metric: Markdown
    where: Markdown
    change: Markdown
    rule: str
    window: str
    old_fails: Markdown
    new_fails: Markdown
    verdict: str
    explanation: Markdown
    warnings: tuple[Markdown, ...]
    notes: tuple[Markdown, ...]  # information only (a limit that could be tightened)
    backtest_hint: Markdown  # the backtest's line (empty without one)


@dataclass(frozen=True)
class RegimeRow:
    """One regime: its period, size, medians and the change that started it."""

    period: str
    runs: int
    medians: tuple[Markdown, ...]
    started_by: Markdown


def _fails(failed: int, total: int) -> Markdown:
    if total == 0:
        return Markdown("—")
    return Markdown(f"**{failed}**/{total}" if failed else f"0/{total}")


def gate_row(g: GateReview, audit: bool = False) -> GateRow:
    """The cells of ``g``'s row in the gates table (``audit``: :func:`is_audit`)."""
    old, new = value_text(g.old_literal, g.old, g.decimals), proposed_text(g)
    if not g.changed:
        change = Markdown(old)
    elif g.old == g.proposed:
        change = Markdown(f"**{new}** (new)")
    else:
        change = Markdown(f"{old} → **{new}**")
    spread = "—"
    if g.window_min is not None and g.window_max is not None:
        spread = decimals_range(g.window_min, g.window_max, g.decimals)
    return GateRow(
        gate=g,
        op=OP_SIGNS[g.op],
        label=gate_label(g),
        metric=metric_cell(g),
        where=where(g),
        change=change,
        rule=rule_text(g),
        window=spread,
        old_fails=_fails(g.old_failures.failed, g.old_failures.total),
        new_fails=_fails(g.proposed_failures.failed, g.proposed_failures.total),
        verdict=f"❌ {attention_words(g, audit)}"
        if g.proposed_source or (g.verdict == "no_data" and needs_action(g))
        else f"{VERDICT_ICONS[g.verdict]} {verdict_words(g, audit)}",
        explanation=prose(g.explanation),
        warnings=tuple(prose(w) for w in g.warnings),
        notes=tuple(prose(n) for n in g.notes),
        backtest_hint=prose(g.backtest_hint),
    )


def pull_link(number: int, review: Review, repo_url: str | None) -> Markdown:
    """``#12 Title``: the PR linked (its own URL, else under ``repo_url``), its title escaped."""
    ref = review.pulls.get(number)
    url = (ref.url if ref and ref.url else None) or (
        f"{repo_url.rstrip('/')}/pull/{number}" if repo_url else None
    )
    label = link(Markdown(f"#{number}"), url)
    return Markdown(f"{label} {escape(ref.title, 120)}") if ref and ref.title else label


def _started_by(change: Change, review: Review, repo_url: str | None) -> Markdown:
    if change.pulls:
        shown = [pull_link(n, review, repo_url) for n in change.pulls[:MAX_PULLS]]
        more = len(change.pulls) - len(shown)
        return Markdown(", ".join(shown) + (f" +{more} more" if more else ""))
    if change.before_commit and change.before_commit == change.after_commit:
        return Markdown(f"{NO_CODE_CHANGE} ({code(_short(change.before_commit))})")
    commits = f"{_short(change.before_commit)}…{_short(change.after_commit)}"
    if repo_url and change.before_commit and change.after_commit:
        url = f"{repo_url.rstrip('/')}/compare/{change.before_commit}...{change.after_commit}"
        return link(commits, url)
    if change.before_commit or change.after_commit:
        return code(commits)
    return Markdown("—")


def _move_size(change: Change, metric: str) -> float:
    """How far ``metric`` moved at ``change``: in noise units, else its relative change."""
    shift = change.metrics[metric]
    return shift.sigma if shift.sigma is not None else abs(shift.relative or 0.0)


def regime_metrics(review: Review, extra: int = MOVED_METRICS) -> list[str]:
    """Columns of the regime table: the gated metrics; for each change that moved none of
    them, the metric it moved most; then the ungated metrics that moved most, up to ``extra``
    of these, and never more than ``MAX_EXTRA_METRICS`` in all."""
    present = {m for r in review.regimes for m in r.medians}
    columns = [m for m in dict.fromkeys(g.metric for g in judged(review)) if m in present]
    added: list[str] = []
    for change in review.changes:
        moved = [m for m in change.metrics if m in present]
        if moved and not any(m in columns or m in added for m in moved):
            added.append(max(moved, key=lambda m: _move_size(change, m)))
    effects: dict[str, float] = {}
    for change in review.changes:
        for metric in change.metrics:
            effects[metric] = max(effects.get(metric, 0.0), _move_size(change, metric))
    for regime in review.regimes:
        drifting = [m for m in regime.trends if m in present]
        if drifting and not any(m in columns or m in added for m in drifting):
            added.append(max(drifting, key=lambda m: _drift_size(regime, m)))
    ranked = sorted(effects, key=lambda m: (-effects[m], m))
    for metric in ranked:
        if len(added) >= extra:
            break
        if metric in present and metric not in columns and metric not in added:
            added.append(metric)
    return columns + added[:MAX_EXTRA_METRICS]


def regime_rows(review: Review, metrics: Sequence[str], repo_url: str | None) -> list[RegimeRow]:
    """One row per regime, oldest first: period, runs, the medians of ``metrics`` (bold
    where the change that started it moved them) and the PRs or commits of that change."""
    rows: list[RegimeRow] = []
    for i, regime in enumerate(review.regimes):
        change = review.changes[i - 1] if 0 < i <= len(review.changes) else None
        moved = change.metrics if change else {}
        medians = tuple(_median(regime, m, m in moved) for m in metrics)
        rows.append(
            RegimeRow(
                period=f"{day_month_year(regime.start)} – {day_month_year(regime.end)}",
                runs=regime.runs,
                medians=medians,
                started_by=_started_by(change, review, repo_url) if change else Markdown("—"),
            )
        )
    return rows


def _drift_size(regime: Regime, metric: str) -> float:
    """How steeply ``metric`` drifts in ``regime``: relative slope, else absolute."""
    trend = regime.trends[metric]
    return abs(trend.relative if trend.relative is not None else trend.slope)


def _median(regime: Regime, metric: str, moved: bool) -> Markdown:
    """The cell of ``metric`` in ``regime``'s row: its median; for a drifting metric its
    trend line's first → last value; for a wandering one :data:`WANDERS`."""
    trend = regime.trends.get(metric)
    if metric in regime.wandering:
        text = WANDERS
    elif trend is not None:
        text = f"{significant_no_exponent(trend.first)} → {significant_no_exponent(trend.last)}"
    elif metric in regime.medians:
        text = significant_no_exponent(regime.medians[metric])
    else:
        return Markdown("—")
    return Markdown(f"**{text}**" if moved else text)


def _trend_note(regime: Regime, metric: str, current: bool) -> Markdown:
    """``m drifting −0.2% per run since 3 May 2026`` or ``m: no stable level …``."""
    name, start = code(metric), day_month_year(regime.start)
    span = f"since {start}" if current else f"from {start} to {day_month_year(regime.end)}"
    trend = regime.trends.get(metric)
    if metric in regime.wandering or trend is None:
        return Markdown(f"{name}: no stable level {span} (wanders like a random walk)")
    verb = "drifting" if current else "drifted"
    return Markdown(f"{name} {verb} {per_run(trend.slope, trend.relative)} {span}")


def regime_notes(review: Review, metrics: Sequence[str]) -> list[Markdown]:
    """What the regime table's cells cannot say, newest regime first: each of ``metrics``
    that drifts (or wanders) in a regime, with its rate and period; at most
    :data:`MAX_TREND_NOTES` lines, the last ``and 3 more`` when cut."""
    notes: list[Markdown] = []
    last = len(review.regimes) - 1
    for i in range(last, -1, -1):
        regime = review.regimes[i]
        for metric in metrics:
            if metric in regime.trends or metric in regime.wandering:
                notes.append(_trend_note(regime, metric, i == last))
    if len(notes) > MAX_TREND_NOTES:
        more = len(notes) - MAX_TREND_NOTES + 1
        notes = [*notes[: MAX_TREND_NOTES - 1], Markdown(f"and {more} more")]
    return notes


def _attention(gates: Sequence[GateReview], audit: bool) -> str:
    """``EVAL_MIN too tight; TOKENS_MAX cannot be verified`` (counts beyond three gates):
    a semicolon between gates, as a verdict's words may hold a comma (``failing, unchanged``)."""
    if len(gates) <= 3:
        return "; ".join(f"{code(g.name)} {attention_words(g, audit)}" for g in gates)
    counts = Counter(attention_words(g, audit) for g in gates)
    return "; ".join(f"{n} {words}" for words, n in counts.items())


NO_DATA_WORDS: dict[str | None, str] = {  # why gates have no data, in the headline
    "empty_history": "the history is empty",
    "no_finished_runs": "no finished run",
    "not_numbers": "values not numbers",
}


def unverified(review: Review) -> dict[str, list[GateReview]]:
    """The judged gates without data by what gives them data (none when the history could
    not be read): ``empty_history``, ``no_finished_runs``, ``not_numbers`` (what writes the
    history), else ``metric`` (check the metric's name)."""
    found: dict[str, list[GateReview]] = {}
    if review.error:
        return found
    for g in judged(review):
        if g.verdict == "no_data":
            reason = g.no_data_reason if g.no_data_reason in NO_DATA_WORDS else "metric"
            found.setdefault(str(reason), []).append(g)
    return found


def _finding(review: Review) -> tuple[str, str, Markdown]:
    """The review's verdict as ``(icon, label, text)``: never ✅ without evidence."""
    gates = judged(review)
    total = plural(len(gates), "gate")
    flagged = [g for g in gates if needs_action(g)]
    reason = escape(review.error or "the run history could not be read", 300)
    if flagged:
        verb = "needs" if len(flagged) == 1 else "need"
        named = _attention(flagged, is_audit(review))
        text = f"{len(flagged)} of {total} {verb} attention ({named})"
        if review.error:
            text += f"; the run history could not be read ({reason})"
        return "❌", "Action required", Markdown(text)
    if review.error:
        return "⚪", "Not reviewed", Markdown(f"the run history could not be read ({reason})")
    if review.conclusion == "action_required":  # not a gate: e.g. an unreadable file
        return "❌", "Action required", Markdown("see the notes below")
    missing = [g for g in gates if g.verdict == "no_data"]
    fit = len(gates) - len(missing)
    fits = f"{plural(fit, 'gate')} {'fits' if fit == 1 else 'fit'} the recent runs"
    if missing:
        names = join(code(g.name) for g in missing)
        reasons = {g.no_data_reason for g in missing}
        why = NO_DATA_WORDS.get(reasons.pop(), "no data") if len(reasons) == 1 else "no data"
        text = f"{len(missing)} of {total} cannot be verified ({names}: {why})"
        return "⚪", "Not verified", Markdown(text + (f"; {fits}" if fit else ""))
    return "✅", "No action needed", Markdown(fits)


def headline(review: Review, approved: str | None = None) -> Markdown:
    """The one-line verdict that opens the comment; with ``approved`` (the approval's note),
    who approved which values, then what the review found."""
    icon, label, text = _finding(review)
    if approved:
        named = flagged(review) or list(judged(review))
        values = join(Markdown(f"{code(g.name)} = {proposed_text(g)}") for g in named)
        return Markdown(
            f"✅ **{escape(approved)}** for {values}: the check passes with these values until"
            f" a push changes any of them. The review found: {text}."
        )
    if not judged(review) and not review.error:
        if review.gates:
            count = plural(len(review.gates), "placeholder")
            return Markdown(f"✅ **Nothing to judge** in this change: {count}, not judged.")
        hinted = plural(len(review.hints), "value")
        if review.hints:  # nothing bound, but something looked like a threshold
            return Markdown(
                f"⚪ **No gate bound** in this change: {hinted} like a threshold below."
            )
        return Markdown("✅ **No threshold gates** in this change: nothing to review.")
    apart = placeholders(review)
    extra = f"; {plural(len(apart), 'placeholder')} not judged" if apart else ""
    return Markdown(f"{icon} **{label}:** {text}{extra}.")


def _window_phrase(info: WindowInfo, review: Review, drifting: bool) -> str:
    spec = review.rule.window
    if spec.kind == "last":
        what = f"the last {plural(spec.runs, 'finished run')} with the metric"
    elif spec.kind == "regime" and drifting:
        what = f"the last {plural(spec.runs, 'finished run')} of the metric's drifting regime"
    elif spec.kind == "regime":
        what = "the finished runs since the metric's latest regime change"
    else:
        what = f"the finished runs since {day_month_year(spec.since)}"
    if info.runs and info.first and info.last:
        exact = spec.kind == "last" or (spec.kind == "regime" and drifting)
        count = "" if exact and info.runs == spec.runs else f"{info.runs} runs, "
        what += f" ({count}{day_month_year(info.first)} – {day_month_year(info.last)})"
    return what


def checked_phrase(review: Review) -> str:
    """Which runs the values of the gates table are checked against (the method's window
    line); in an audit (:func:`is_audit`), of the one value each gate has."""
    lookback = f"the last {review.rule.failure_lookback} runs"
    if is_audit(review):
        return f"Each value is checked against the window, and against {lookback}"
    return f"Proposed values are checked against the window, old values against {lookback}"


def window_groups(review: Review) -> list[tuple[str, list[str]]]:
    """Each distinct window used, with the gates that used it."""
    groups: dict[str, list[str]] = {}
    current = review.regimes[-1].trends if review.regimes else {}
    for g in judged(review):
        phrase = _window_phrase(g.window, review, g.metric in current)
        groups.setdefault(phrase, []).append(g.name)
    return list(groups.items())


def _ordinal(p: float) -> str:
    text = f"{p:g}"
    if "." in text or "e" in text:
        return f"{text}th"
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(int(text) % 10, "th")
    return text + ("th" if int(text) % 100 in (11, 12, 13) else suffix)


def side_phrases(rule: RuleSettings) -> tuple[str, str]:
    """How ``rule``'s model sets a lower bound and an upper bound, before rounding:
    ``the window's minimum less 5% of its magnitude``, ``the window's maximum plus 5% …``."""
    model, allowance = rule.model, rule.allowance_percent
    if model.name == "minmax":
        return (
            f"the window's minimum less {allowance} of its magnitude",
            f"the window's maximum plus {allowance} of its magnitude",
        )
    if model.name == "percentile":
        return (
            f"the window's {_ordinal(model.p)} percentile less {allowance} of its magnitude",
            f"the window's {_ordinal(100 - model.p)} percentile plus {allowance} of its magnitude",
        )
    if model.name == "zscore":
        sigma = "robust σ (1.4826·MAD)" if model.sigma == "mad" else "standard deviations"
        return (
            f"the window's mean less {model.spread:g} {sigma}",
            f"the window's mean plus {model.spread:g} {sigma}",
        )
    if model.name == "prediction":
        interval = f"window's one-sided {percent(model.confidence)} t prediction interval"
        return f"the lower end of the {interval}", f"the upper end of the {interval}"
    if model.name == "iqr":
        return (
            f"the window's first quartile less {model.spread:g} interquartile ranges",
            f"the window's third quartile plus {model.spread:g} interquartile ranges",
        )
    low, high = model.min_limit, model.max_limit
    return (
        f"{low:g} as written" if low is not None else "the window's minimum",
        f"{high:g} as written" if high is not None else "the window's maximum",
    )


def model_phrase(rule: RuleSettings) -> str:
    """The limit rule of a gate in words: its model and parameters
    (``RuleSettings.describe_model``), how a lower and an upper bound are set, the rounding
    and the absolute bounds: ``minmax, 5% allowance: a lower bound (≥, >) is the window's
    minimum less 5% of its magnitude, rounded down; …``."""
    lower, upper = side_phrases(rule)
    model = rule.model
    down, up = ("", "") if model.name == "absolute" else (", rounded down", ", rounded up")
    text = (
        f"{rule.describe_model()}: a lower bound (≥, >) is {lower}{down};"
        f" an upper bound (≤, <) {upper}{up}"
    )
    if model.name not in ("minmax", "absolute"):
        text += "; never past the window's extreme run"
    bounds = [
        f"{word} {value:g}"
        for word, value in (("below", model.min_limit), ("above", model.max_limit))
        if value is not None and model.name != "absolute"
    ]
    if bounds:
        text += f"; never {' nor '.join(bounds)}"
    digits = rule.significant_digits
    return text + f"; at the literal's decimals, or more to keep {digits} significant digits"


def gate_rule(g: GateReview, review: Review) -> RuleSettings:
    """The rule that set ``g``'s limit: the review's, with the override naming it."""
    return review.rule.for_gate(g.name, g.metric, g.file)


def rule_groups(review: Review) -> list[tuple[str, list[str]]]:
    """Each distinct limit rule used (:func:`model_phrase`), with the limit gates that used
    it; the review's own rule, for no gate, when it judges no limit gate."""
    groups: dict[str, list[str]] = {}
    for g in judged(review):
        if g.kind == "limit":
            groups.setdefault(model_phrase(gate_rule(g, review)), []).append(g.name)
    return list(groups.items()) or [(model_phrase(review.rule), [])]


def history_phrase(review: Review) -> str:
    """The history's runs by state and what was ignored: ``332 runs: 318 finished, ...``."""
    stats = review.history
    parts = [f"{stats.finished} finished"] + [
        f"{n} {state}" for state, n in sorted(stats.by_state.items()) if state != "finished" and n
    ]
    text = f"{plural(stats.total, 'run')}: {', '.join(parts)}"
    reads = [
        f"{plural(stats.flattened_values, 'nested value')} as flat keys"
        if stats.flattened_values
        else "",
        f"{plural(stats.numeric_strings, 'number')} written as text"
        if stats.numeric_strings
        else "",
    ]
    if any(reads):
        text += f"; read {', '.join(r for r in reads if r)}"
    ignored = [
        (stats.non_finite_values, "non-finite value"),
        (stats.non_numeric_values, "non-numeric value"),
        (stats.duplicate_ids, "duplicate run id"),
        (stats.skipped_lines, "malformed line"),
    ]
    notes = [plural(n, word) for n, word in ignored if n]
    if notes:
        text += f"; ignored {', '.join(notes)}"
    if stats.skipped_runs:
        reasons = ", ".join(f"{n} {why}" for why, n in sorted(stats.skipped_runs.items()))
        text += f"; skipped {plural(sum(stats.skipped_runs.values()), 'run')} ({reasons})"
    return text


def rule_values(review: Review, *, flagged_only: bool) -> list[tuple[GateReview, str]]:
    """Gates whose rule value differs from the proposed one, with that value formatted
    (what ``/rebaseline`` would write: for a reference gate the recomputed reference, and
    the tolerance it needs when the gate's is too tight, ``0.93 ±12%``); ``flagged_only``:
    only gates whose verdict needs action (not a new history source alone: the rule's value
    would not mend that).  Placeholders are never listed."""
    values = []
    for g in judged(review):
        if g.recomputed is None or (flagged_only and g.verdict not in ACTION_VERDICTS):
            continue
        if g.recomputed != g.proposed or tolerance_too_tight(g):
            values.append((g, rule_text(g)))
    return values


def rebaseline_command(values: Sequence[tuple[GateReview, str]], *, named: bool) -> str:
    """The ``/rebaseline`` command that writes ``values`` (:func:`rule_values`): the gates
    by name when ``named``, with ``--tolerance`` when a reference's tolerance is too tight."""
    words = ["/rebaseline"]
    if named:
        words += list(dict.fromkeys(g.name for g, _ in values))
    if any(tolerance_too_tight(g) for g, _ in values):
        words.append("--tolerance")
    return " ".join(words)


def verdict_counts(gates: Iterable[GateReview]) -> Counter[str]:
    """How many gates got each verdict."""
    return Counter(g.verdict for g in gates)


def check_title(review: Review) -> str:
    """The check run's title, untruncated: ``2 of 5 gates need attention``."""
    gates = judged(review)
    total = plural(len(gates), "gate")
    attention = flagged(review)
    if review.error and all(g.verdict == "no_data" for g in attention):
        return "Run history unavailable"
    if not gates:
        if review.gates:
            return f"{plural(len(review.gates), 'placeholder')}, nothing to judge"
        return (
            "No gate bound; values like thresholds listed" if review.hints else "No threshold gates"
        )
    if attention:
        verb = "needs" if len(attention) == 1 else "need"
        return f"{len(attention)} of {total} {verb} attention"
    missing = sum(g.verdict == "no_data" for g in gates)
    if missing:
        return f"{missing} of {total} cannot be verified"
    return f"{total} {'fits' if len(gates) == 1 else 'fit'} the recent runs"
