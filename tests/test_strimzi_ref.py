"""tests/strimzi_ref.py against the examples of Strimzi's own unit tests (0.49.1).

Each case names its source: ``NodeIdRangeTest.java`` and ``NodeIdAssignorTest.java`` in
``cluster-operator/src/test/java/io/strimzi/operator/cluster/model/nodepools/``.
"""

from __future__ import annotations

import itertools

import pytest

from tests.strimzi_ref import (
    Assignment,
    DuplicateNodeIdError,
    Pool,
    assign,
    node_id_order,
    parse_node_ids,
    reconcile,
    removed_ids,
)

# NodeIdRangeTest.java:18-29 and :31-45
VALID = [
    "[5]",
    "[5-10]",
    "[ 5 ]",
    "[ 5 - 10    ]",
    "[0, 1, 2]",
    "[0,1,2]",
    "[5,7-9]",
    "[5 , 7-9, 13]",
    "[1874-1919]",
    "[0-999, 10000-10999, 20000-20999]",
]
INVALID = [
    "[-5]",
    "[-5-10]",
    "[5-]",
    "[5,]",
    "[-10]",
    " 5 - 10 ]",
    "[0, 1, 2",
    "[0,,2]",
    "[0, a, 2]",
    "[5,7---9]",
    "foo, bar",
    "[foo-bar]",
]


@pytest.mark.parametrize("value", VALID)
def test_valid_ranges_parse(value: str) -> None:
    """NodeIdRangeTest.testRangeValidation (:47-56): these are read."""
    assert parse_node_ids(value)


@pytest.mark.parametrize("value", INVALID)
def test_invalid_ranges_are_ignored(value: str) -> None:
    """NodeIdRangeTest.testRangeValidation: these make the operator ignore the annotation."""
    assert parse_node_ids(value) is None
    assert list(node_id_order(value)) == []


def test_empty_list_is_valid_and_empty() -> None:
    """``[]`` fails isValidNodeIdRange (:32) but the constructor takes it as empty (:40-44, :89)."""
    assert parse_node_ids("[]") == ()


@pytest.mark.parametrize(
    ("value", "order"),
    [  # NodeIdRangeTest.testNextNodeId (:85-101)
        ("", []),
        ("   ", []),
        ("[]", []),
        ("[  ]", []),
        (" [ ] ", []),
        ("[ 1 ]", [1]),
        ("[ 1, 2, 3 ]", [1, 2, 3]),
        ("[ 1, 3, 2 ]", [1, 3, 2]),
        ("[ 1-3 ]", [1, 2, 3]),
        ("[ 1-3, 10 - 12 ]", [1, 2, 3, 10, 11, 12]),
        ("[ 1-3, 6, 7, 8, 10 - 12 ]", [1, 2, 3, 6, 7, 8, 10, 11, 12]),
        ("[ 1-1 ]", [1]),
        ("[ 3-1 ]", [3, 2, 1]),
        ("[ 1-3, 12 - 10 ]", [1, 2, 3, 12, 11, 10]),
    ],
)
def test_ids_come_in_listed_order(value: str, order: list[int]) -> None:
    """Ranges run either way; items keep their order."""
    assert list(node_id_order(value)) == order


@pytest.mark.parametrize(
    "value", ["[999999999999999999999999999999999]", "[0-999999999999999999999999999999999]"]
)
def test_an_id_beyond_java_int_voids_the_annotation(value: str) -> None:
    """NodeIdRangeTest.testNodeIdRangeConstructor (:76-82): parseInt throws, the value is ignored."""
    assert parse_node_ids(value) is None


def test_int_max_is_still_an_id() -> None:
    """2147483647 is Integer.MAX_VALUE: parseInt accepts it."""
    assert list(node_id_order("[2147483647]")) == [2147483647]


def test_a_huge_range_is_read_lazily() -> None:
    """``[0-2000000000]`` hands out IDs one at a time, as the Java iterator does."""
    assert list(itertools.islice(node_id_order("[2000000000-0]"), 3)) == [
        2000000000,
        1999999999,
        1999999998,
    ]


def _one(pool: Pool) -> Assignment:
    return assign([pool])[pool.name]


NEXT = "next"
REMOVE = "remove"


def _pool(
    replicas: int, ids: list[int] | None = None, *, name: str = "my-pool", **annotations: str
) -> Pool:
    return Pool(
        name,
        replicas,
        tuple(ids) if ids is not None else None,
        next_node_ids=annotations.get(NEXT),
        remove_node_ids=annotations.get(REMOVE),
    )


@pytest.mark.parametrize(
    ("pool", "desired", "added", "removed"),
    [
        # testNewSinglePoolCluster (:28-40)
        (_pool(3), {0, 1, 2}, {0, 1, 2}, set()),
        # testNewSinglePoolClusterWithNextIds (:42-54)
        (_pool(3, next="[1000-1999]"), {1000, 1001, 1002}, {1000, 1001, 1002}, set()),
        # testNewSinglePoolClusterWithNextIdsForSomeNodes (:56-68)
        (_pool(5, next="[1000-1002]"), {0, 1, 1000, 1001, 1002}, {0, 1, 1000, 1001, 1002}, set()),
        # testExistingSinglePoolClusterOutOfSequenceWithoutChange (:84-96)
        (_pool(3, [2, 3, 5]), {2, 3, 5}, set(), set()),
        # testNewSinglePoolClusterWithRemoveIdsWithoutChange (:112-124)
        (_pool(3, [1000, 1001, 1002], remove="[2000-2999]"), {1000, 1001, 1002}, set(), set()),
        # testExistingSinglePoolClusterScaleDown (:126-138)
        (_pool(3, [0, 1, 2, 3, 4]), {0, 1, 2}, set(), {3, 4}),
        # testExistingSinglePoolClusterScaleDownWithRemoveIds (:140-152)
        (_pool(3, [0, 1, 2, 3, 4], remove="[1-3]"), {0, 3, 4}, set(), {1, 2}),
        # testExistingSinglePoolClusterScaleDownWithUnusedRemoveIds (:154-166)
        (_pool(3, [0, 1, 2, 3, 4], remove="[1000-1999]"), {0, 1, 2}, set(), {3, 4}),
        # testExistingSinglePoolClusterScaleUp (:178-190)
        (_pool(5, [0, 1, 2], next="[1000-1999]"), {0, 1, 2, 1000, 1001}, {1000, 1001}, set()),
        # testExistingSinglePoolClusterScaleUpWithNextIds (:192-204)
        (_pool(5, [0, 1, 2]), {0, 1, 2, 3, 4}, {3, 4}, set()),
    ],
)
def test_single_pool(pool: Pool, desired: set[int], added: set[int], removed: set[int]) -> None:
    """NodeIdAssignorTest, one pool at a time."""
    got = _one(pool)
    assert got.desired == desired
    assert set(got.added) == added
    assert set(got.removed) == removed


def test_big_cluster_scale_down_takes_listed_ids_that_exist() -> None:
    """testExistingSinglePoolClusterScaleDownBigClusterWithRemoveIds (:168-176)."""
    pool = _pool(5000, list(range(5002)), remove="[10000-19999, 4613, 1919, 1874]")
    assert _one(pool).removed == (4613, 1919)


def test_big_cluster_scale_up_skips_used_ids_of_the_range() -> None:
    """testExistingSinglePoolBigClusterScaleUpWithNextIds (:206-215)."""
    pool = _pool(5003, list(range(5000)), next="[1000-1999, 6000, 7000, 8000]")
    assert _one(pool).added == (6000, 7000, 8000)


@pytest.mark.parametrize(
    ("pools", "want"),
    [
        (  # testNewMultiPoolCluster (:217-239)
            [_pool(3, name="my-pool"), _pool(3, name="my-pool2")],
            {"my-pool": ({0, 1, 2}, ()), "my-pool2": ({3, 4, 5}, ())},
        ),
        (  # testNewMultiPoolClusterWithNextIds (:241-263)
            [
                _pool(3, name="my-pool", next="[1000-1999]"),
                _pool(3, name="my-pool2", next="[2000-2999]"),
            ],
            {"my-pool": ({1000, 1001, 1002}, ()), "my-pool2": ({2000, 2001, 2002}, ())},
        ),
        (  # testExistingMultiPoolClusterScaleUp (:289-311): gaps are filled across pools
            [_pool(5, [0, 1, 2], name="my-pool"), _pool(5, [3, 4, 5], name="my-pool2")],
            {"my-pool": ({0, 1, 2, 6, 7}, ()), "my-pool2": ({3, 4, 5, 8, 9}, ())},
        ),
        (  # testExistingMultiPoolClusterScaleDownWithRemoveIds (:361-382)
            [
                _pool(3, [0, 1, 2, 3, 4], name="my-pool", remove="[3, 2, 1]"),
                _pool(3, [5, 6, 7, 8, 9], name="my-pool2", remove="[6-8]"),
            ],
            {"my-pool": ({0, 1, 4}, (3, 2)), "my-pool2": ({5, 8, 9}, (6, 7))},
        ),
        (  # testExistingMultiPoolClusterScaleDownUp (:384-406): IDs being removed stay in use
            [_pool(3, [0, 1, 2, 3, 4], name="my-pool"), _pool(5, [5, 6, 7], name="my-pool2")],
            {"my-pool": ({0, 1, 2}, (4, 3)), "my-pool2": ({5, 6, 7, 8, 9}, ())},
        ),
        (  # testExistingMultiPoolClusterScaleUpDown (:408-430)
            [_pool(5, [0, 1, 2], name="my-pool"), _pool(3, [3, 4, 5, 6, 7], name="my-pool2")],
            {"my-pool": ({0, 1, 2, 8, 9}, ()), "my-pool2": ({3, 4, 5}, (7, 6))},
        ),
        (  # testExistingMultiPoolClusterScaleUpDownWithNodeIds (:432-454)
            [
                _pool(5, [0, 1, 2], name="my-pool", next="[1000-1999]"),
                _pool(3, [3, 4, 5, 6, 7], name="my-pool2", remove="[5-8]"),
            ],
            {"my-pool": ({0, 1, 2, 1000, 1001}, ()), "my-pool2": ({3, 4, 7}, (5, 6))},
        ),
    ],
)
def test_pools_share_ids(
    pools: list[Pool], want: dict[str, tuple[set[int], tuple[int, ...]]]
) -> None:
    """NodeIdAssignorTest, several pools of one cluster; removal order as chosen."""
    got = assign(pools)
    assert {name: (set(a.desired), a.removed) for name, a in got.items()} == want


def test_duplicate_ids_stop_the_assignment() -> None:
    """testDuplicateIds (:481-489)."""
    with pytest.raises(
        DuplicateNodeIdError, match="Found duplicate node ID 2 in node pool my-pool2"
    ):
        assign([_pool(3, [0, 1, 2], name="my-pool"), _pool(3, [2, 3, 4], name="my-pool2")])


@pytest.mark.parametrize(
    ("used", "lowest"),
    [  # testFindingIdsInGaps (:491-501), through a one-ID scale-up of a pool holding ``used``
        ({0, 2}, 1),
        ({0, 2, 3, 4, 5}, 1),
        ({0, 1, 3, 4, 5}, 2),
        ({0, 1, 2, 4, 5}, 3),
        ({0, 1, 2, 3, 5}, 4),
        ({0, 3, 4, 5}, 1),
        ({0, 4, 5}, 1),
        ({0, 5}, 1),
    ],
)
def test_scale_up_fills_the_lowest_gap(used: set[int], lowest: int) -> None:
    """The lowest unused ID is handed out first."""
    assert _one(_pool(len(used) + 1, sorted(used))).added == (lowest,)


def test_a_broker_pool_can_hold_ids_equal_mod_k() -> None:
    """Two pools scaled up in turn get interleaved IDs: a pool may hold only even IDs."""
    pools = [_pool(0, [], name="a"), _pool(0, [], name="b")]
    for _ in range(3):
        pools = list(reconcile([Pool("a", (pools[0].replicas + 1), pools[0].node_ids), pools[1]]))
        pools = list(reconcile([pools[0], Pool("b", (pools[1].replicas + 1), pools[1].node_ids)]))
    assert pools[0].node_ids == (0, 2, 4)
    assert pools[1].node_ids == (1, 3, 5)


def test_reconcile_writes_the_desired_ids_ascending() -> None:
    """KafkaPool.generateNodePoolStatus: ``status.nodeIds`` from the TreeSet, ascending."""
    (pool,) = reconcile([_pool(3, [0, 1, 2, 3, 4], remove="[1-3]")])
    assert pool.node_ids == (0, 3, 4)


@pytest.mark.parametrize(
    ("node_ids", "replicas", "annotation", "want"),
    [
        ([0, 1, 2, 3, 4, 5], 5, None, (5,)),
        ([0, 1, 2, 3, 4], 3, "[1, 3]", (1, 3)),
        ([0, 1, 2, 3, 4], 3, "[3]", (3, 4)),  # listed first, then the highest
        ([0, 1, 2, 3, 4], 3, "[9, 1]", (1, 4)),  # IDs the pool does not hold are skipped
        ([0, 1, 2, 3, 4], 3, "[1, x]", (4, 3)),  # an invalid value is ignored as a whole
        ([0, 1, 2], 3, "[1]", ()),  # no scale-down: the annotation is not read
    ],
)
def test_removed_ids(
    node_ids: list[int], replicas: int, annotation: str | None, want: tuple[int, ...]
) -> None:
    """NodeIdAssignor.nextRemoveId: the annotation's IDs in order, then the highest."""
    assert removed_ids(node_ids, replicas, annotation) == want
