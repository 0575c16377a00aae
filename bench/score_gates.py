"""Recall, bound-or-hinted share and precision of gate discovery on the corpora of
``tests/fixtures/gates`` (``corpus``: shapes described to earlier rounds; ``holdout``,
``holdout2``, ``holdout3``: the flows of issue 28, written before, while and after the
analysis that reads them was built: tests/fixtures/gates/README.md).  Definitions in
``tests/gate_scores.py``.  Run: ``.venv/bin/python bench/score_gates.py [-v]``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.gate_scores import cases, score, write_history

CORPORA = ("corpus", "holdout", "holdout2", "holdout3")


def main(verbose: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        history = write_history(Path(tmp))
        print(
            f"{'corpus':8} {'files':>5} {'recall+cfg':>10} {'recall-cfg':>10} "
            f"{'bound|hint':>10} {'precision':>9} {'file+cfg':>8} {'file-cfg':>8}"
        )
        for corpus in CORPORA:
            with_config, seen = score(corpus, history, configured=True)
            without, seen_bare = score(corpus, history, configured=False)
            pooled = (with_config.reported_faithful + without.reported_faithful) / max(
                1, with_config.reported + without.reported
            )
            print(
                f"{corpus:8} {len(cases(corpus)):5} {with_config.recall:10.2f} "
                f"{without.recall:10.2f} {without.bound_or_hinted:10.2f} {pooled:9.2f} "
                f"{with_config.file_share:8.2f} {without.file_share:8.2f}"
            )
            if verbose:
                for case in cases(corpus):
                    for label, reading, configured in (
                        ("cfg", seen[case.name], True),
                        ("bare", seen_bare[case.name], False),
                    ):
                        wanted = case.wanted(configured)
                        missed, false = wanted - reading.gates, reading.gates - wanted
                        if missed or false:
                            print(
                                f"  {case.name} [{label}] missed={sorted(missed)} "
                                f"false={sorted(false)} hints={sorted(reading.hinted)}"
                            )


if __name__ == "__main__":
    main("-v" in sys.argv)
