"""Zone balance of Kafka node pool scale-downs: stszone's choice against the operator's default.

    python bench/kafka_balance.py                  # 2,000 random pools, seed 1
    python bench/kafka_balance.py --pools 500 --seed 7

Each pool has 3-30 brokers over three zones. Its node IDs are drawn from a range three times
its size (IDs are shared with the other pools of its cluster, so a pool's are not
consecutive), and its prior placement is random: half the pools were placed evenly by ID
(as stszone places a new pool), then some brokers moved or were lost; the other half are
anywhere. Then 1-4 scale steps: a scale-up adds the lowest IDs no pool holds, each in the zone
with the fewest (stszone's placement); a scale-down removes 1..n-1 brokers. For every
scale-down, the pool's ``/mutate`` decision on a KafkaNodePool UPDATE lowering
``spec.replicas`` is asked of stszone's rules (the annotation it writes, or none), and the
imbalance left (largest minus smallest zone count) is compared with the operator's default
order (the highest IDs). "Best possible" is the least imbalance any choice of brokers could
leave, found from the zone counts alone (every split of the removals over the zones).

Printed: the mean and maximum imbalance of each, how often stszone's choice is no worse than
the default, and how often it is within one wherever some choice is.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
from collections import Counter
from dataclasses import dataclass

from webhook.model.nodepools import nodepool_info, parse_node_ids, poolpod_info
from webhook.model.store import Store
from webhook.rules.decision import MetadataAnnotation
from webhook.rules.poolscaling import mutate_pool_update

ZONES = ("zone-a", "zone-b", "zone-c")
REMOVE = "strimzi.io/remove-node-ids"


def pool_object(node_ids: list[int], replicas: int) -> dict[str, object]:
    return {
        "apiVersion": "kafka.strimzi.io/v1",
        "kind": "KafkaNodePool",
        "metadata": {
            "name": "pool",
            "namespace": "kafka",
            "labels": {"strimzi.io/cluster": "c"},
            "annotations": {"stszone.io/zones": ",".join(ZONES)},
        },
        "spec": {"replicas": replicas, "storage": {"type": "persistent-claim"}},
        "status": {"nodeIds": sorted(node_ids)},
    }


def view_of(placed: dict[int, str]) -> Store:
    """An offline view holding the pool and one pod per broker, pinned to its zone."""
    store = Store()
    for table in ("nodes", "volumes", "claims", "statefulsets", "pods", "namespaces"):
        store.replace(table, ())
    store.replace("nodepools", [nodepool_info(pool_object(list(placed), len(placed)))])
    store.replace(
        "poolpods",
        [
            poolpod_info(
                {
                    "metadata": {
                        "name": f"c-pool-{i}",
                        "namespace": "kafka",
                        "labels": {"strimzi.io/cluster": "c", "strimzi.io/pool-name": "pool"},
                        "annotations": {"stszone.io/zone": zone},
                    },
                    "spec": {},
                }
            )
            for i, zone in placed.items()
        ],
    )
    return store


def imbalance(placed: dict[int, str], kept: list[int]) -> int:
    counts = Counter(placed[i] for i in kept)
    values = [counts.get(z, 0) for z in ZONES]
    return max(values) - min(values)


def best_possible(placed: dict[int, str], remove: int) -> int:
    """The least imbalance any ``remove`` brokers' removal leaves (from zone counts alone)."""
    counts = Counter(placed.values())
    have = [counts.get(z, 0) for z in ZONES]
    best = max(have)
    for split in itertools.product(*(range(n + 1) for n in have)):
        if sum(split) == remove:
            left = [n - r for n, r in zip(have, split, strict=True)]
            best = min(best, max(left) - min(left))
    return best


def stszone_choice(placed: dict[int, str], replicas: int) -> list[int]:
    """The IDs removed after stszone's /mutate of the UPDATE (its annotation, else default)."""
    before = pool_object(list(placed), len(placed))
    after = pool_object(list(placed), replicas)
    decided = mutate_pool_update(after, old=before, namespace="kafka", store=view_of(placed))
    written = next(
        (e.value for e in decided.edits if isinstance(e, MetadataAnnotation) and e.key == REMOVE),
        None,
    )
    order = [
        i
        for first, last in parse_node_ids(written or "") or ()
        for i in range(first, last + (1 if last >= first else -1), 1 if last >= first else -1)
    ]
    left = sorted(placed)
    removed = [i for i in order if i in left][: len(placed) - replicas]
    for i in removed:
        left.remove(i)
    while len(left) > replicas:
        removed.append(left.pop())
    return removed


@dataclass
class Tally:
    default: list[int]
    chosen: list[int]
    possible: list[int]


def fewest(placed: dict[int, str]) -> str:
    counts = Counter(placed.values())
    return min(ZONES, key=lambda z: counts.get(z, 0))


def one_pool(rng: random.Random, tally: Tally) -> None:
    size = rng.randint(3, 30)
    universe = list(range(size * 3))
    others = set(rng.sample(universe, size))  # IDs other pools of the cluster hold
    mine = sorted(rng.sample([i for i in universe if i not in others], size))
    placed: dict[int, str] = {}
    if rng.random() < 0.5:
        for node_id in mine:
            placed[node_id] = fewest(placed)
        for node_id in rng.sample(mine, rng.randint(0, size // 3)):  # moved since
            placed[node_id] = rng.choice(ZONES)
    else:
        placed = {i: rng.choice(ZONES) for i in mine}
    for _ in range(rng.randint(1, 4)):
        if len(placed) > 1 and rng.random() < 0.7:
            replicas = rng.randint(1, len(placed) - 1)
            default = sorted(placed)[:replicas]
            removed = stszone_choice(placed, replicas)
            kept = [i for i in placed if i not in removed]
            tally.default.append(imbalance(placed, default))
            tally.chosen.append(imbalance(placed, kept))
            tally.possible.append(best_possible(placed, len(placed) - replicas))
            placed = {i: placed[i] for i in kept}
        else:
            taken = others | set(placed)
            for _ in range(rng.randint(1, 5)):
                node_id = next(i for i in itertools.count() if i not in taken)
                taken.add(node_id)
                placed[node_id] = fewest(placed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pools", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    tally = Tally([], [], [])
    for _ in range(args.pools):
        one_pool(rng, tally)
    steps = len(tally.chosen)
    never_worse = sum(c <= d for c, d in zip(tally.chosen, tally.default, strict=True))
    where_possible = [c for c, p in zip(tally.chosen, tally.possible, strict=True) if p <= 1]
    within_one = sum(c <= 1 for c in where_possible)
    default_within = sum(
        d <= 1 for d, p in zip(tally.default, tally.possible, strict=True) if p <= 1
    )
    print(f"{args.pools} pools, {steps} scale-downs (seed {args.seed})")
    print("                      mean   max")
    for name, values in (
        ("operator default", tally.default),
        ("stszone", tally.chosen),
        ("best possible", tally.possible),
    ):
        print(f"{name:<20} {statistics.fmean(values):6.2f} {max(values):5d}")
    print(f"stszone never worse than the default: {100 * never_worse / steps:.1f}%")
    print(
        f"within one wherever possible ({len(where_possible)} scale-downs): "
        f"stszone {100 * within_one / len(where_possible):.1f}%, "
        f"default {100 * default_within / len(where_possible):.1f}%"
    )
    exact = sum(c == p for c, p in zip(tally.chosen, tally.possible, strict=True))
    print(f"stszone at the best possible: {100 * exact / steps:.1f}%")


if __name__ == "__main__":
    main()
