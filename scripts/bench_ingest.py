#!/usr/bin/env python3
"""Ingest benchmark: full build vs unchanged re-ingest, per shipped manifest, side by side.

Each ingest runs in its own process so its peak memory (max RSS) is its own. Prints one table:
build seconds, no-op seconds, the ratio, peak MiB, and the collection's size. Manifests whose
data is absent (no ../shared beside the repo) are listed as skipped.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

# the measuring code shared by the benchmarks (scripts/benchkit.py); importing it imports nothing
# heavy
sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import ROOT, ChildError, child_main, emit, measured, peak_rss_mib, ratio, run_child

SCRIPT = Path(__file__).resolve()


def _ingest(payload: dict) -> None:
    """In the child: one timed ingest, its peak memory and what it read."""
    from nrp import ingest

    start = time.perf_counter()
    result = ingest(payload["manifest"], indexes_dir=payload["indexes"], force=payload["force"])
    emit(
        {
            "seconds": time.perf_counter() - start,
            "rebuilt": result.rebuilt,
            "peak_mib": peak_rss_mib(),
            "judgment_lines": result.counts.get("judgment lines read", 0),
        }
    )


def run_ingest(manifest: Path, indexes: Path, force: bool) -> dict:
    payload = {"manifest": str(manifest), "indexes": str(indexes), "force": force}
    return run_child(SCRIPT, "--_ingest", payload)


def main() -> int:
    if child_main({"--_ingest": _ingest}):
        return 0
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("manifests", nargs="*", type=Path)
    args = parser.parse_args()
    manifests = args.manifests or sorted((ROOT / "manifests").glob("*.yaml"))
    manifests.append(ROOT / "nrp" / "data" / "demo" / "manifest.yaml")
    print(
        f"{'manifest':<28} {'build s':>8} {'no-op s':>8} {'ratio':>7} "
        f"{'peak MiB':>9} {'judgments':>10}"
    )
    with tempfile.TemporaryDirectory() as indexes:
        for manifest in manifests:
            if not manifest.exists():
                continue
            try:
                build = run_ingest(manifest, Path(indexes), force=True)
            except ChildError as err:
                print(f"{manifest.stem:<28} skipped: {err.tail[:90]}")
                continue
            noop = run_ingest(manifest, Path(indexes), force=False)
            assert not noop["rebuilt"], "unchanged re-ingest rebuilt the collection"
            print(
                f"{manifest.parent.name if manifest.stem == 'manifest' else manifest.stem:<28} "
                f"{build['seconds']:>8.2f} {noop['seconds']:>8.2f} "
                f"{ratio(build['seconds'], noop['seconds']):>6.1f}x "
                f"{build['peak_mib']:>9.0f} {build['judgment_lines']:>10,}"
            )
    print(measured("in-process times, one process per ingest"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
