"""What judging a scale-down of a KafkaNodePool of thousands of brokers costs, counted in
operations on its node IDs (a shared machine makes seconds meaningless): a pool's IDs are
compared and hashed a number of times that grows with the IDs, never with their square."""

from __future__ import annotations

from typing import Any

import msgspec

from tests import poolsim as sim
from tests.work import line_budget
from webhook.model.nodepools import (
    KafkaNodePoolInfo,
    nodepool_info,
    poolpod_info,
    removal_order,
)
from webhook.model.store import Store
from webhook.rules.explain_pools import explain_pool
from webhook.rules.homes import pool_slots
from webhook.rules.poolaudit import audit_pool
from webhook.rules.poolguard import balanced, judge
from webhook.rules.poolzones import policy_of

BROKERS = 2_000
#: Operations per node ID allowed: a sort's log2(2000) comparisons and a few lookups each.
PER_ID = 40
#: Lines of webhook code per broker allowed for the removal plan of a pool.
LINES_PER_BROKER = 400


class Counted(int):
    """A node ID that counts the comparisons and hashes made of every such ID."""

    ops = 0

    def __hash__(self) -> int:
        Counted.ops += 1
        return int.__hash__(self)

    def __eq__(self, other: object) -> bool:
        Counted.ops += 1
        return int.__eq__(self, other)

    def __lt__(self, other: Any) -> bool:
        Counted.ops += 1
        return int.__lt__(self, other)

    def __le__(self, other: Any) -> bool:
        Counted.ops += 1
        return int.__le__(self, other)

    def __gt__(self, other: Any) -> bool:
        Counted.ops += 1
        return int.__gt__(self, other)

    def __ge__(self, other: Any) -> bool:
        Counted.ops += 1
        return int.__ge__(self, other)


def _ids() -> list[int]:
    return [Counted(i) for i in range(BROKERS)]


def test_the_removal_order_of_thousands_of_brokers_is_linear_in_their_ids() -> None:
    """5,000 brokers scaled to 1 took 2 s of ``max`` over the IDs left, one per removed ID."""
    ids = _ids()
    Counted.ops = 0
    removed = removal_order(ids, 1, None)
    assert removed == tuple(range(BROKERS - 1, 0, -1))
    assert Counted.ops <= PER_ID * BROKERS


def test_many_remove_node_ids_items_do_not_each_scan_the_pool() -> None:
    """Each item of ``remove-node-ids`` looks up its IDs, not every ID of the pool: thousands
    of items naming IDs the pool does not hold, then a range of the lowest."""
    ids = _ids()
    annotation = "[" + ", ".join(map(str, range(BROKERS, 2 * BROKERS))) + ", 0-9]"
    Counted.ops = 0
    removed = removal_order(ids, BROKERS - 12, annotation)
    assert removed == (*range(10), BROKERS - 1, BROKERS - 2)
    assert Counted.ops <= PER_ID * BROKERS


def test_judging_the_removal_of_thousands_of_brokers_is_linear_in_their_ids() -> None:
    """The guard's verdict on 5,000 brokers scaled to 1 took seconds (the removed IDs made
    into a set again for every kept one): 26 s at 20,000, past the webhook's timeout."""
    ids = _ids()
    pool = nodepool_info(sim.pool_object("broker", replicas=1, node_ids=list(range(BROKERS))))
    policy = policy_of(msgspec.structs.replace(pool, node_ids=tuple(ids)), store=sim.store())
    where = {i: sim.ZONES[i % 3] for i in ids}
    removed = removal_order(ids, 1, None)
    Counted.ops = 0
    result = judge(policy, where, removed)
    assert result.kept == (0,)
    assert set(result.lost) == {"zone-b", "zone-c"}
    assert Counted.ops <= PER_ID * BROKERS


def test_the_balanced_choice_among_thousands_of_brokers_is_linear_in_their_ids() -> None:
    """Writing ``remove-node-ids`` on an UPDATE that scales 5,000 brokers of known zones down
    took 11 s (every zone counted again for each broker chosen), past the webhook's timeout."""
    ids = _ids()
    where = {i: sim.ZONES[i % 3] for i in ids}
    Counted.ops = 0
    chosen = balanced(ids, where, BROKERS - 3)
    # zone-a and zone-b hold 667 each, zone-c 666: the fullest zone's highest ID goes first,
    # and the three kept are the lowest, one a zone.
    assert chosen[:3] == (BROKERS - 1, BROKERS - 2, BROKERS - 3)
    assert set(ids) - set(chosen) == {0, 1, 2}
    assert Counted.ops <= PER_ID * BROKERS


def test_the_audit_of_a_pool_of_thousands_of_brokers_judges_few_counts() -> None:
    """The pool zone-risk gauges, computed on every scrape on the server's event loop, took
    2 s at 2,000 brokers of unknown zone (each count judged in turn, up to the last); the
    lowest safe count is found by bisection, the same as ``stszone audit``'s."""
    view = sim.store()
    view.put(
        "nodepools",
        nodepool_info(sim.pool_object("broker", replicas=1_000, node_ids=[*range(1_000)])),
    )
    pool = view.nodepool("kafka", "broker")
    assert pool is not None
    with line_budget(300_000):
        report = audit_pool(pool, store=view)
    # No broker's zone is known: only keeping them all is safe.
    assert report.lowest == 1_000


def _pool_of_brokers_without_data() -> tuple[KafkaNodePoolInfo, Store]:
    """Brokers 0..1,999 run on nodes of zone-a, zone-b and zone-c in turn, but every fifth
    (4, 9, ..., 1,999), which has no pod yet; none has data."""
    view = sim.store()
    view.put(
        "nodepools",
        nodepool_info(sim.pool_object("pool", replicas=BROKERS, node_ids=[*range(BROKERS)])),
    )
    for node_id in range(BROKERS):
        if node_id % 5 != 4:
            pod = sim.pod_object("my-cluster", "pool", node_id)
            pod["spec"]["nodeName"] = f"n-{sim.ZONES[node_id % 3]}-{node_id % 2}"
            view.put("poolpods", poolpod_info(pod))
    pool = view.nodepool("kafka", "pool")
    assert pool is not None
    return pool, view


#: Each broker's zone when created anew, by the pool's fewest. Running: 534 in zone-a, 533 in
#: b and c (each 15 IDs hold 4 of each, and 1,995-1,998 add a, b, c, a); 400 IDs have no pod.
#: A broker created anew alone leaves its own zone's count and takes, after the IDs with no
#: pod below it, the fewest, ties to the first listed. 0: 533 each -> a; 1: 534, 532, 533 ->
#: b; 2 -> c; 3 -> a; 4 (no pod): 534, 533, 533 -> b. 1,997 (c): 534, 533, 532 after 399 IDs
#: (c, b, c, then a, b, c ...) -> a; 1,998 (a): 533 each after 399 -> a; 1,999: 534, 533,
#: 533 after 399 (b, c, then a, b, c ...) -> b.
FIRST_FIVE_LAST_THREE = [
    "zone-a", "zone-b", "zone-c", "zone-a", "zone-b", "zone-a", "zone-a", "zone-b"
]  # fmt: skip


def test_the_removal_plan_of_thousands_of_brokers_without_data_is_linear_in_them() -> None:
    """``stszone audit``'s node removal asks where each broker is re-created: for a broker
    with no data, the pool's fewest, whose counts cover every broker. Worked out again for
    each broker, with every other broker placed again, they cost the square of the brokers:
    33 s of CPU at 5,000."""
    pool, view = _pool_of_brokers_without_data()
    with line_budget(LINES_PER_BROKER * BROKERS):
        plan = pool_slots(pool, store=view)
    assert all(s.fewest for s in plan.slots)
    zones = [s.recreated for s in (*plan.slots[:5], *plan.slots[-3:])]
    assert zones == FIRST_FIVE_LAST_THREE


def test_explaining_a_pool_of_thousands_of_brokers_without_data_is_linear_in_them() -> None:
    """``stszone explain`` of a pool shows each broker's zone: for one with no pod and no
    data, where the pool's fewest would place it, the same question as the removal plan's.
    Asked of each broker with the counts worked out again, 2,000 brokers ran 105 million
    lines (15 s); its answers for each smaller size (up to 64, each judged over every
    broker) take most of what is left, about 4,500 lines a broker."""
    pool, view = _pool_of_brokers_without_data()
    with line_budget(8_000 * BROKERS):
        found = explain_pool(view, pool.namespace, pool.name)
    assert found is not None and found.problem == ""
    by_id = {b.node_id: b for b in found.brokers}
    # A broker with no pod shows the pool's fewest (worked out above), one running its zone.
    assert [(by_id[i].zone, by_id[i].zone_by) for i in (4, 1_999)] == [("zone-b", "balance")] * 2
    assert (by_id[1_997].zone, by_id[1_997].zone_by) == ("zone-c", "pod")
