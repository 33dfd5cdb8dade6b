"""The desk benchmark's watchers ratio is taken round by round: the machine's other load drifts
between rounds, and one slowed pair must not decide it."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
try:
    from desk import pair_ratios
finally:
    sys.path.remove(str(ROOT / "bench"))


def test_it_pairs_each_watched_run_with_the_unwatched_run_beside_it():
    unwatched, watched = [50.0, 30.0, 48.0], [45.0, 27.0, 29.0]  # the machine slowed round 2
    assert pair_ratios(unwatched, watched) == [0.9, 0.9, 29.0 / 48.0]
    assert statistics.median(pair_ratios(unwatched, watched)) == 0.9
    # the ratio of the medians sets the slowed round's watched run against a quick round's
    # unwatched one: 0.604
    assert statistics.median(watched) / statistics.median(unwatched) < 0.61
