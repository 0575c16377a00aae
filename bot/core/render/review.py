"""Rendering of a Review: the PR comment, the check-run output and the JSON review.

Pure functions over ``bot.core.models.Review``.  Layout lives in the Jinja templates under
``templates/``; this module prepares the values.  The Jinja environment escapes every
``{{ … }}`` output through ``bot.core.render.markdown.escape`` (its ``finalize`` hook) unless the value
is already ``Markdown``, so a template cannot forget to escape outside text.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from functools import cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from pydantic import BaseModel, ConfigDict

from bot.core.analysis.review import ACTION_VERDICTS
from bot.core.models import Change, GateReview, Regime, Review, WindowInfo
from bot.core.render.markdown import Markdown, bold, code, escape, join, link, truncate

MARKER = "<!-- threshold-bot:review -->"
TEMPLATES = Path(__file__).resolve().parent / "templates"  # shipped as package data
GITHUB_TEXT_LIMIT = 65_535  # check-run summary / text, and (minus one) an issue comment body
TITLE_LIMIT = 100
FOLD_GATES = 12  # more gates than this: the gates table is folded into <details>
FOLD_REGIMES = 8  # likewise for the regime table
MOVED_METRICS = 2  # ungated metrics that moved most, shown in the regime table
MAX_EXTRA_METRICS = 4  # ungated metric columns at most
MAX_PULLS = 4  # PRs named per regime change (the newest)

OP_SIGNS = {">=": "≥", ">": ">", "<=": "≤", "<": "<"}
VERDICT_WORDS = {
    "ok": "ok",
    "unchanged": "unchanged",
    "too_tight": "too tight",
    "looser_than_rule": "looser than the rule",
    "unchanged_failing": "failing, unchanged",
    "no_data": "no data",
}
VERDICT_ICONS = {
    "ok": "✅",
    "unchanged": "✅",
    "too_tight": "❌",
    "looser_than_rule": "⚠️",
    "unchanged_failing": "❌",
    "no_data": "❔",
}
_TRUNCATED = (
    "*Truncated to fit GitHub's size limit: run `threshold-bot review --format json`"
    " for the whole review.*"
)


class CheckOutput(BaseModel):
    """The ``output`` of a GitHub check run."""

    model_config = ConfigDict(frozen=True)

    title: str
    summary: str
    text: str


# --------------------------------------------------------------------------- formatting


def fmt_date(moment: date | None) -> str:
    """``30 Jun 2026`` (an em dash for no date)."""
    return "—" if moment is None else f"{moment.day} {moment:%b %Y}"


def _repr_decimals(value: float) -> int:
    text = repr(float(value))
    if "e" in text or "E" in text:
        mantissa, exponent = text.lower().split("e")
        digits = len(mantissa.split(".")[1]) if "." in mantissa else 0
        return max(0, digits - int(exponent))
    return len(text.split(".")[1].rstrip("0")) if "." in text else 0


def fmt_value(value: float | None, decimals: int, *, extra: int = 12) -> str:
    """``value`` with at least ``decimals`` decimals, and up to ``extra`` more when needed
    to show it exactly (so ``0.01764`` at 3 decimals stays ``0.01764``)."""
    if value is None:
        return "—"
    places = min(max(decimals, _repr_decimals(value)), decimals + extra)
    return f"{value:.{places}f}"


def fmt_sig(value: float, digits: int = 4) -> str:
    """``value`` to ``digits`` significant digits, without exponent or trailing zeros."""
    if value == 0:
        return "0"
    text = f"{value:.{digits}g}"
    if "e" in text:
        magnitude = abs(value)
        places = 0 if magnitude >= 1 else digits - 1 - int(f"{magnitude:e}".split("e")[1])
        text = f"{value:.{places}f}"
    return text


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _short(sha: str | None) -> str:
    return (sha or "?")[:7]


# --------------------------------------------------------------------------- view model


@dataclass(frozen=True)
class GateRow:
    """One gate, with every cell of its table row ready to print."""

    gate: GateReview
    op: str
    change: Markdown
    rule: str
    window: str
    old_fails: Markdown
    new_fails: Markdown
    verdict: str


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


def gate_row(g: GateReview) -> GateRow:
    """The cells of ``g``'s row in the gates table."""
    old, new = fmt_value(g.old, g.decimals), fmt_value(g.proposed, g.decimals)
    if not g.changed:
        change = Markdown(old)
    elif g.old == g.proposed:
        change = Markdown(f"**{new}** (new)")
    else:
        change = Markdown(f"{old} → **{new}**")
    spread = "—"
    if g.window_min is not None and g.window_max is not None:
        low, high = g.window_min, g.window_max
        places = min(max(g.decimals, _repr_decimals(low), _repr_decimals(high)), g.decimals + 2)
        spread = f"{low:.{places}f} – {high:.{places}f}"
    return GateRow(
        gate=g,
        op=OP_SIGNS[g.op],
        change=change,
        rule=fmt_value(g.recomputed, g.decimals),
        window=spread,
        old_fails=_fails(g.old_failures.failed, g.old_failures.total),
        new_fails=_fails(g.proposed_failures.failed, g.proposed_failures.total),
        verdict=f"{VERDICT_ICONS[g.verdict]} {VERDICT_WORDS[g.verdict]}",
    )


def _pull_link(number: int, review: Review, repo_url: str | None) -> Markdown:
    ref = review.pulls.get(number)
    url = (ref.url if ref and ref.url else None) or (
        f"{repo_url.rstrip('/')}/pull/{number}" if repo_url else None
    )
    label = link(Markdown(f"#{number}"), url)
    return Markdown(f"{label} {escape(ref.title, 120)}") if ref and ref.title else label


def _started_by(change: Change, review: Review, repo_url: str | None) -> Markdown:
    if change.pulls:
        shown = [_pull_link(n, review, repo_url) for n in change.pulls[-MAX_PULLS:]]
        more = len(change.pulls) - len(shown)
        return Markdown(", ".join(shown) + (f" and {more} earlier" if more else ""))
    commits = f"{_short(change.before_commit)}…{_short(change.after_commit)}"
    if repo_url and change.before_commit and change.after_commit:
        url = f"{repo_url.rstrip('/')}/compare/{change.before_commit}...{change.after_commit}"
        return link(commits, url)
    if change.before_commit or change.after_commit:
        return code(commits)
    return Markdown("—")


def _effect(change: Change, metric: str) -> float:
    shift = change.metrics[metric]
    return shift.sigma if shift.sigma is not None else abs(shift.relative or 0.0)


def regime_metrics(review: Review, extra: int = MOVED_METRICS) -> list[str]:
    """Columns of the regime table: the gated metrics; for each change that moved none of
    them, the metric it moved most; then the ungated metrics that moved most, up to ``extra``
    of these, and never more than ``MAX_EXTRA_METRICS`` in all."""
    present = {m for r in review.regimes for m in r.medians}
    columns = [m for m in dict.fromkeys(g.metric for g in review.gates) if m in present]
    added: list[str] = []
    for change in review.changes:
        moved = [m for m in change.metrics if m in present]
        if moved and not any(m in columns or m in added for m in moved):
            added.append(max(moved, key=lambda m: _effect(change, m)))
    effects: dict[str, float] = {}
    for change in review.changes:
        for metric in change.metrics:
            effects[metric] = max(effects.get(metric, 0.0), _effect(change, metric))
    ranked = sorted(effects, key=lambda m: (-effects[m], m))
    for metric in ranked:
        if len(added) >= extra:
            break
        if metric in present and metric not in columns and metric not in added:
            added.append(metric)
    return columns + added[:MAX_EXTRA_METRICS]


def _regime_rows(review: Review, metrics: Sequence[str], repo_url: str | None) -> list[RegimeRow]:
    rows: list[RegimeRow] = []
    for i, regime in enumerate(review.regimes):
        change = review.changes[i - 1] if 0 < i <= len(review.changes) else None
        moved = change.metrics if change else {}
        medians = tuple(_median(regime, m, m in moved) for m in metrics)
        rows.append(
            RegimeRow(
                period=f"{fmt_date(regime.start)} – {fmt_date(regime.end)}",
                runs=regime.runs,
                medians=medians,
                started_by=_started_by(change, review, repo_url) if change else Markdown("—"),
            )
        )
    return rows


def _median(regime: Regime, metric: str, moved: bool) -> Markdown:
    if metric not in regime.medians:
        return Markdown("—")
    text = fmt_sig(regime.medians[metric])
    return Markdown(f"**{text}**" if moved else text)


def headline(review: Review) -> Markdown:
    """The one-line verdict that opens the comment."""
    gates = review.gates
    if review.conclusion == "neutral":
        reason = escape(review.error or "the run history could not be read", 300)
        return Markdown(f"⚪ **Not reviewed:** the run history could not be read ({reason}).")
    if not gates:
        return Markdown("✅ **No threshold gates** in this change: nothing to review.")
    flagged = [g for g in gates if g.verdict in ACTION_VERDICTS]
    if flagged:
        if len(flagged) <= 3:
            what = ", ".join(f"{code(g.name)} {VERDICT_WORDS[g.verdict]}" for g in flagged)
        else:
            counts = verdict_counts(flagged)
            what = ", ".join(f"{n} {VERDICT_WORDS[v]}" for v, n in counts.items())
        noun = "gate needs" if len(flagged) == 1 else "gates need"
        return Markdown(
            f"❌ **Action required:** {len(flagged)} of {len(gates)} {noun} attention ({what})."
        )
    missing = sum(g.verdict == "no_data" for g in gates)
    fit = len(gates) - missing
    text = f"✅ **No action needed:** {_plural(fit, 'gate')} fit the recent runs"
    if missing:
        names = join(code(g.name) for g in gates if g.verdict == "no_data")
        text += f"; {missing} without data ({names})"
    return Markdown(text + ".")


def _window_phrase(info: WindowInfo, review: Review) -> str:
    spec = review.rule.window
    if spec.kind == "last":
        what = f"the last {_plural(spec.runs, 'finished run')} with the metric"
    elif spec.kind == "regime":
        what = "the finished runs since the metric's latest regime change"
    else:
        what = f"the finished runs since {fmt_date(spec.since)}"
    if info.runs and info.first and info.last:
        count = "" if spec.kind == "last" and info.runs == spec.runs else f"{info.runs} runs, "
        what += f" ({count}{fmt_date(info.first)} – {fmt_date(info.last)})"
    return what


def _windows(review: Review) -> list[tuple[str, list[str]]]:
    """Each distinct window used, with the gates that used it."""
    groups: dict[str, list[str]] = {}
    for g in review.gates:
        groups.setdefault(_window_phrase(g.window, review), []).append(g.name)
    return list(groups.items())


def _history_phrase(review: Review) -> str:
    stats = review.history
    parts = [f"{stats.finished} finished"] + [
        f"{n} {state}" for state, n in sorted(stats.by_state.items()) if state != "finished" and n
    ]
    text = f"{_plural(stats.total, 'run')}: {', '.join(parts)}"
    ignored = [
        (stats.non_finite_values, "non-finite value"),
        (stats.non_numeric_values, "non-numeric value"),
        (stats.duplicate_ids, "duplicate run id"),
        (stats.skipped_lines, "malformed line"),
    ]
    notes = [_plural(n, word) for n, word in ignored if n]
    if notes:
        text += f"; ignored {', '.join(notes)}"
    return text


def _rule_values(review: Review, *, flagged_only: bool) -> list[tuple[GateReview, str]]:
    """Gates whose rule value differs from the proposed one, with that value formatted
    (what ``/rebaseline`` would write); ``flagged_only``: only gates that need action."""
    values = []
    for g in review.gates:
        if g.recomputed is None or (flagged_only and g.verdict not in ACTION_VERDICTS):
            continue
        value = fmt_value(g.recomputed, g.decimals)
        if value != fmt_value(g.proposed, g.decimals):
            values.append((g, value))
    return values


# --------------------------------------------------------------------------- templates


def _finalize(value: object) -> object:
    """Every ``{{ … }}`` output: trusted Markdown as is, None as a dash, the rest escaped."""
    if value is None:
        return "—"
    return escape(value)


@cache
def environment() -> Environment:
    """The Jinja environment of the templates, escaping by default."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=False,
        finalize=_finalize,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(code=code, bold=bold, date=fmt_date, join_md=join)
    return env


def _context(review: Review, repo_url: str | None, app_mode: bool) -> dict[str, object]:
    metrics = regime_metrics(review)
    return {
        "marker": Markdown(MARKER),
        "review": review,
        "headline": headline(review),
        "rows": [gate_row(g) for g in review.gates],
        "fold_gates": len(review.gates) > FOLD_GATES,
        "regime_metrics": metrics,
        "regimes": _regime_rows(review, metrics, repo_url),
        "fold_regimes": len(review.regimes) > FOLD_REGIMES,
        "regimes_since": fmt_date(review.regimes[0].start) if review.regimes else "",
        "windows": _windows(review),
        "history": _history_phrase(review),
        "allowance": review.rule.allowance_percent,
        "fixes": _rule_values(review, flagged_only=True),
        "rule_values": _rule_values(review, flagged_only=False),
        "app_mode": app_mode,
    }


def _render(template: str, context: dict[str, object]) -> str:
    text = environment().get_template(template).render(context)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.strip() + "\n"


def render_comment(
    review: Review,
    *,
    repo_url: str | None = None,
    app_mode: bool = False,
    approved: str | None = None,
) -> str:
    """The PR comment (contract section 6), starting with the hidden marker.

    ``app_mode`` words the "what to do" part for the App (``/rebaseline``, the approve
    button); otherwise it names the edits to make by hand.  ``approved`` is the note of a
    maintainer approval that covers the proposed values (shown under the verdict).
    """
    context = _context(review, repo_url, app_mode)
    context["approved"] = approved
    text = _render("comment.md.j2", context)
    return truncate(text, GITHUB_TEXT_LIMIT, _TRUNCATED)


def render_check(review: Review, *, repo_url: str | None = None) -> CheckOutput:
    """The check-run output: title, summary (verdict and gates) and text (regimes, method)."""
    context = _context(review, repo_url, True)
    title = _check_title(review)
    return CheckOutput(
        title=title if len(title) <= TITLE_LIMIT else title[: TITLE_LIMIT - 1] + "…",
        summary=truncate(_render("check_summary.md.j2", context), GITHUB_TEXT_LIMIT, _TRUNCATED),
        text=truncate(_render("check_text.md.j2", context), GITHUB_TEXT_LIMIT, _TRUNCATED),
    )


def verdict_counts(gates: Iterable[GateReview]) -> Counter[str]:
    """How many gates got each verdict."""
    return Counter(g.verdict for g in gates)


def _check_title(review: Review) -> str:
    gates = review.gates
    if review.conclusion == "neutral":
        return "Run history unavailable"
    if not gates:
        return "No threshold gates"
    flagged = sum(g.verdict in ACTION_VERDICTS for g in gates)
    if flagged:
        verb = "needs" if flagged == 1 else "need"
        return f"{flagged} of {_plural(len(gates), 'gate')} {verb} attention"
    verb = "fits" if len(gates) == 1 else "fit"
    return f"{_plural(len(gates), 'gate')} {verb} the recent runs"


def render_json(review: Review) -> str:
    """The JSON review (contract section 5): the stable fields, plus explanatory extras."""
    data = review.model_dump(mode="json")
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
