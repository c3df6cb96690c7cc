"""The marker server's compaction planning: how many segments it keeps and how often a
marker is rewritten (moved from the segment tests, tests/markers/test_marker_segments.py)."""

from __future__ import annotations

import random

from markerstore.server.state import compaction_target, plan_compaction


def test_compaction_plan_keeps_the_bound_at_100k_markers() -> None:
    """Flushes of 1 to 64 markers until 100,000: the count never passes the bound and each
    marker is rewritten only a few times."""
    rng = random.Random(7)
    for bound in (4, 8, 20):
        target = compaction_target(bound)
        sizes: list[int] = []
        total = rewritten = 0
        while total < 100_000:
            batch = rng.randint(1, 64)
            sizes.append(batch)
            total += batch
            assert len(sizes) <= bound
            chosen = plan_compaction(sizes, target)
            if chosen:
                merged = sum(sizes[i] for i in chosen)
                rewritten += merged
                sizes = [s for i, s in enumerate(sizes) if i not in set(chosen)] + [merged]
            assert len(sizes) <= target
        assert sum(sizes) == total
        assert rewritten / total < {4: 30, 8: 10, 20: 5}[bound]


def test_compaction_plan_merges_nothing_under_the_target() -> None:
    assert plan_compaction([5, 5, 5], 3) == []
    assert plan_compaction([100, 1, 1, 1], 3) == [1, 2, 3]
    assert len(plan_compaction([1] * 10, 4)) >= 7
