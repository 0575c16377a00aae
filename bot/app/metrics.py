"""Prometheus metrics of the webhook intake and the workers, served on ``GET /metrics``.

Each ``Metrics`` owns its registry, so several apps (tests) never share counters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bot.features.drift.watch import WatchReport
from bot.features.redelivery import RedeliveryReport

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_ACK_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_RUN_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class _StatusCollector(Collector):
    """Deliveries per status, read from the store at scrape time."""

    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "threshold_bot_deliveries", "Stored deliveries by status.", labels=["status"]
        )
        for status, n in sorted(self._counts().items()):
            family.add_metric([status], n)
        yield family


class Metrics:
    """Counters and histograms of deliveries received, processed, retried and failed."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.received = Counter(
            "threshold_bot_deliveries_received",
            "Deliveries accepted and stored, by event.",
            ["event"],
            registry=r,
        )
        self.duplicates = Counter(
            "threshold_bot_deliveries_duplicate",
            "Deliveries whose id was already stored.",
            registry=r,
        )
        self.rejected = Counter(
            "threshold_bot_deliveries_rejected",
            "Webhook requests refused, by HTTP status.",
            ["status"],
            registry=r,
        )
        self.processed = Counter(
            "threshold_bot_deliveries_processed",
            "Deliveries finished, by event and outcome (done, ignored).",
            ["event", "outcome"],
            registry=r,
        )
        self.retried = Counter(
            "threshold_bot_deliveries_retried",
            "Transient failures scheduled for another attempt, by event.",
            ["event"],
            registry=r,
        )
        self.failed = Counter(
            "threshold_bot_deliveries_failed",
            "Deliveries failed for good, by event.",
            ["event"],
            registry=r,
        )
        self.unverified_bytes = Gauge(
            "threshold_bot_webhook_unverified_bytes",
            "Bytes of webhook bodies reserved before their signature is checked.",
            registry=r,
        )
        self.ack_seconds = Histogram(
            "threshold_bot_webhook_ack_seconds",
            "Time to answer an accepted webhook (store + enqueue).",
            buckets=_ACK_BUCKETS,
            registry=r,
        )
        self.run_seconds = Histogram(
            "threshold_bot_delivery_run_seconds",
            "Time spent running the handlers of one delivery attempt, by event.",
            ["event"],
            buckets=_RUN_BUCKETS,
            registry=r,
        )
        self.latency_seconds = Histogram(
            "threshold_bot_delivery_latency_seconds",
            "Time from receiving a delivery to finishing it, by event.",
            ["event"],
            buckets=_RUN_BUCKETS,
            registry=r,
        )

        self.redeliveries = Counter(
            "threshold_bot_redeliveries",
            "Failed webhook deliveries GitHub was asked to send again (requested), left"
            " (skipped: stored, succeeded since, or asked before), or whose request GitHub"
            " refused (failed: asked again next look).",
            ["outcome"],
            registry=r,
        )
        self.drift_rounds = Counter(
            "threshold_bot_drift_rounds",
            "Rounds of the drift watch, and those stopped early by the rate limit.",
            ["outcome"],
            registry=r,
        )
        self.drift_files = Counter(
            "threshold_bot_drift_files",
            "Threshold files the drift watch looked at, by what it did (opened, updated, closed,"
            " unchanged, skipped: not evaluated — an outage or an unreadable file —, busy,"
            " forbidden, dismissed).",
            ["action"],
            registry=r,
        )
        self.drift_failures = Counter(
            "threshold_bot_drift_repository_failures",
            "Repositories (or installations) the drift watch could not read from GitHub.",
            registry=r,
        )

        self.drift_cuts = Counter(
            "threshold_bot_drift_cut",
            "Work the drift watch's per-round budgets cut, by whose budget ran out (repository,"
            " installation); it resumes next round where it stopped.",
            ["scope"],
            registry=r,
        )

    def record_drift(self, report: WatchReport) -> None:
        """Count one drift-watch round."""
        for cut in report.cut:
            self.drift_cuts.labels(cut.scope).inc()
        self.drift_rounds.labels("stopped_early" if report.stopped_early else "complete").inc()
        for acted in report.acted:
            self.drift_files.labels(acted.action).inc()
        problems = sum(1 for r in report.repositories if r.problem) + len(report.failed)
        if problems:
            self.drift_failures.inc(problems)

    def watch_store(self, counts: Callable[[], dict[str, int]]) -> None:
        """Also export the number of stored deliveries per status."""
        self.registry.register(_StatusCollector(counts))

    def record_redelivery(self, report: RedeliveryReport) -> None:
        """Count one look for failed webhook deliveries."""
        for outcome in ("requested", "skipped", "failed"):
            self.redeliveries.labels(outcome).inc(getattr(report, outcome))

    def render(self) -> bytes:
        """The text exposition of every metric."""
        return generate_latest(self.registry)
