"""One W&B run's per-step series through the real client's ``Run.scan_history``.

W&B pages a run's history by step range: ``scan_history`` asks for the run's last step
(``RunHistoryKeys``), then for each range of ``page`` steps the rows holding the key
(``SampledHistoryPage``).  Only the last ``steps`` steps are scanned, so a long run costs at
most ``steps / page`` requests per metric; the job's deadline is checked on every page.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from bot.core import deadline
from bot.core.history.series import RunSeries, Steps, steps_from_rows

# wandb logs, as an ERROR, wandb-core's answer to the cleanup request a history scan sends
# when it is garbage collected (sent without waiting for the answer): not a failure
_SCAN_CLEANUP_ANSWER = "Received response with no mailbox slot: api_response"


class _ScanCleanupAnswer(logging.Filter):
    """Drops exactly wandb's log line about a history scan's cleanup answer."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _SCAN_CLEANUP_ANSWER


_QUIET = _ScanCleanupAnswer()


def quiet_scan_cleanup() -> None:
    """Keep wandb's log line about a history scan's cleanup answer out of the logs
    (idempotent: a filter is added once)."""
    logging.getLogger("wandb.sdk.mailbox.mailbox").addFilter(_QUIET)


def run_series(run: Any, keys: Mapping[str, str], page: int, steps: int) -> RunSeries:
    """The series of a ``wandb.apis.public.Run``: metric -> its history key's last ``steps``
    steps, read ``page`` steps per request (no file is written: ``use_cache=False``)."""
    last = int(run.lastHistoryStep)
    series: RunSeries = {}
    for metric, key in keys.items():
        if last < 0:  # nothing logged
            series[metric] = Steps({})
            continue
        rows = run.scan_history(
            keys=[key], page_size=page, min_step=max(0, last + 1 - steps), use_cache=False
        )
        series[metric] = steps_from_rows(_checked(rows, page), key, steps)
    return series


def _checked(rows: Iterable[dict[str, Any]], every: int) -> Iterator[dict[str, Any]]:
    """``rows`` with the job's deadline checked every ``every`` rows (about once a page)."""
    for count, row in enumerate(rows):
        if count % every == 0:
            deadline.check("reading W&B per-step history")
        yield row
