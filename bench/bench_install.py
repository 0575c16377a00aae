"""The Action's install step, as ``action.yml`` runs it: ``pip install`` of the action's
checkout with its constraints (constraints-action.txt), into a new virtualenv, with a warm pip
cache (what the action's ``actions/cache`` step restores); seconds and the megabytes installed.

Plain (a history file's review) and with the ``wandb`` extra.  Targets: ≤ 15 s with a warm
cache, ≤ 150 MB installed for the plain install.  Each case installs once into a throwaway
virtualenv to fill the cache (not counted), then ``RUNS`` times into new ones.  Run from the
repository root on a quiet machine: ``.venv/bin/python bench/bench_install.py [--keep DIR]``
(``--keep``: leave the plain virtualenv there, e.g. for ``bench_startup.py --bin``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.clean_install import ROOT, copy_checkout

RUNS = 3
CASES = (("plain", ""), ("wandb", "[wandb]"))  # the Action's: timed against the targets
OTHERS = ("mlflow", "app", "postgres", "redis", "all")  # sized for docs/stack.md (--all)
TARGET_SECONDS, TARGET_MB = 15.0, 150.0


def size_mb(path: Path) -> float:
    """Megabytes of the files under ``path`` (apparent sizes)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def install(venv: Path, source: Path, extras: str, cache: Path) -> tuple[float, float]:
    """A new virtualenv at ``venv`` with the checkout installed: seconds, MB added."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    before = size_mb(venv)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "--quiet"]
    command = [
        *pip,
        "install",
        "--no-compile",
        "--constraint",
        str(source / "constraints-action.txt"),
        f"{source}{extras}",
    ]
    start = time.perf_counter()
    subprocess.run(command, check=True, env={**os.environ, "PIP_CACHE_DIR": str(cache)})
    return time.perf_counter() - start, size_mb(venv) - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="leave the plain virtualenv at this path")
    parser.add_argument("--all", action="store_true", help="also size every other extra")
    args = parser.parse_args()
    keep: Path | None = args.keep
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        source = copy_checkout(work / "action", ROOT)  # what actions/checkout gives the action
        cache = work / "pip-cache"
        for name, extras in CASES:
            install(work / f"warm-{name}", source, extras, cache)  # fills the cache
            samples = [install(work / f"{name}-{i}", source, extras, cache) for i in range(RUNS)]
            seconds = statistics.median(s[0] for s in samples)
            mb = statistics.median(s[1] for s in samples)
            verdict = "ok" if seconds <= TARGET_SECONDS else "OVER"
            size = f"{mb:.0f} MB installed" + (
                f" (target {TARGET_MB:.0f} MB: {'ok' if mb <= TARGET_MB else 'OVER'})"
                if name == "plain"
                else ""
            )
            print(
                f"{name:<6} install, warm cache: {seconds:.1f} s median of {RUNS} "
                f"(target {TARGET_SECONDS:.0f} s: {verdict}); {size}"
            )
        for extra in OTHERS if args.all else ():
            install(work / f"warm-{extra}", source, f"[{extra}]", cache)
            seconds, mb = install(work / extra, source, f"[{extra}]", cache)
            print(f"{extra:<6} install, warm cache: {seconds:.1f} s; {mb:.0f} MB installed")
        if keep is not None:
            shutil.rmtree(keep, ignore_errors=True)
            install(keep.resolve(), source, "", cache)
            print(f"kept a plain install in {keep}")


if __name__ == "__main__":
    main()
