"""bench/kafka_balance.py: its figures, on a few pools (the full run is in docs/kafka.md)."""

from __future__ import annotations

import random

from bench.kafka_balance import Tally, best_possible, one_pool


def test_stszone_is_never_worse_and_at_the_best_possible_on_random_pools() -> None:
    tally = Tally([], [], [])
    rng = random.Random(5)
    for _ in range(60):
        one_pool(rng, tally)
    assert tally.chosen
    assert all(c <= d for c, d in zip(tally.chosen, tally.default, strict=True))
    assert tally.chosen == tally.possible


def test_best_possible_is_worked_from_zone_counts() -> None:
    # 4 in a, 1 in b, 1 in c; removing 2: the best leaves 2/1/1 (imbalance 1).
    placed = {0: "zone-a", 1: "zone-a", 2: "zone-a", 3: "zone-a", 4: "zone-b", 5: "zone-c"}
    assert best_possible(placed, 2) == 1
    assert best_possible(placed, 1) == 2
    assert best_possible(placed, 5) == 1  # one broker left: two zones empty
