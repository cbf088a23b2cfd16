"""tests/kruise_ref.py against the examples of OpenKruise's own unit tests (v1.8.4).

Sources: ``pkg/util/api/asts_test.go`` (TestGetIntSet), ``pkg/controller/statefulset/
stateful_set_utils_test.go`` (TestGetStatefulSetReplicasRange), ``stateful_set_control_test.go``
(TestStatefulSetControlWithStartOrdinal), ``stateful_pod_control_test.go`` and the
``reserveOrdinals`` doc comment in ``apis/apps/v1beta1/statefulset_types.go``.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.kruise_ref import (
    Reserved,
    change,
    end_ordinal,
    live_ordinals,
    parse_range,
    reserved,
)


def _expanded(value: Reserved | None) -> set[int] | None:
    if value is None:
        return None
    return {i for lo, hi in value.intervals for i in range(lo, hi + 1)}


@pytest.mark.parametrize(
    ("entries", "want"),
    [  # asts_test.go TestGetIntSet (:26-118); None is the Go test's wantErr (a nil set)
        ([1, 2, 3], {1, 2, 3}),
        (["1-3"], {1, 2, 3}),
        (["1-%"], None),
        (["%-2"], None),
        (["1-2-3"], None),
        ([1, "2-3"], {1, 2, 3}),
        ([], set()),
        ([1, 1, 2, 3], {1, 2, 3}),
        (["1-3", "2-4"], {1, 2, 3, 4}),
        ([2, "1-3"], {1, 2, 3}),
        ([2, 1], {1, 2}),
        (["03-001"], None),
        (["0003-005"], {3, 4, 5}),
    ],
)
def test_reserved_set(entries: list[int | str], want: set[int] | None) -> None:
    """GetReserveOrdinalIntSet: one malformed entry voids the list."""
    assert _expanded(reserved(entries)) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("1-3", (1, 3)),
        ("1-1", (1, 1)),
        ("+1-+3", (1, 3)),  # strconv.Atoi takes a sign
        ("5", None),  # a string must be a range; "5" is not an integer entry
        ("3-1", None),
        (" 1-3", None),
        ("1 - 3", None),
        ("-1-3", None),
        ("", None),
        ("1-", None),
        ("1-9223372036854775808", None),  # beyond Go's int
    ],
)
def test_parse_range(text: str, want: tuple[int, int] | None) -> None:
    """api.ParseRange."""
    assert parse_range(text) == want


@pytest.mark.parametrize(
    ("replicas", "start", "reserve", "live"),
    [
        # statefulset_types.go reserveOrdinals doc: pods [0,1,2], reserve [1] -> [0,2,3]; with 2 -> [0,2]
        (3, 0, [1], (0, 2, 3)),
        (2, 0, [1], (0, 2)),
        # stateful_pod_control_test.go (:1227-1253): replicas 5, [1, "3-5"] -> [0, 2, 6, 7, 8]
        (5, 0, [1, "3-5"], (0, 2, 6, 7, 8)),
        # stateful_set_control_test.go TestStatefulSetControlWithStartOrdinal (:4675-4710)
        (3, 2, [], (2, 3, 4)),
        (3, 2, [0, 4], (2, 3, 5)),
        (3, 2, [0, 2, 3, 4, 5], (6, 7, 8)),
        (4, 1, [], (1, 2, 3, 4)),
        (4, 1, [1, 3, 4], (2, 5, 6, 7)),
        # a malformed entry reserves nothing at all
        (3, 0, [1, "5"], (0, 1, 2)),
        (3, 0, [], (0, 1, 2)),
        (0, 0, [0], ()),
        (2, 0, [-1, -5], (0, 1)),
        (2, 0, ["0-4000000000"], (4000000001, 4000000002)),
    ],
)
def test_live_ordinals(
    replicas: int, start: int, reserve: list[int | str], live: tuple[int, ...]
) -> None:
    """The first ``replicas`` ordinals at or above the start that are not reserved."""
    assert live_ordinals(replicas, start=start, reserve=reserve) == live


@pytest.mark.parametrize(
    ("start", "count"),
    [  # stateful_set_utils_test.go TestGetStatefulSetReplicasRange (:901-985): replicas 4, reserve 1 and 3
        (0, 6),
        (2, 5),
        (3, 5),
        (4, 4),
    ],
)
def test_end_ordinal(start: int, count: int) -> None:
    """getStatefulSetReplicasRange's span: the Go test's expectedCount is ``end - start``."""
    assert end_ordinal(4, start=start, reserve=[1, 3]) - start == count


def test_reserving_a_live_ordinal_deletes_that_pod_and_adds_one_above() -> None:
    """The reserveOrdinals doc example as a change: reserve [1] at 3 replicas."""
    got = change((0, 1, 2), live_ordinals(3, reserve=[1]))
    assert got.deleted == (1,)
    assert got.created == (3,)
    assert got.kept == (0, 2)


def test_scale_down_deletes_highest_live_first() -> None:
    """descendingOrdinal: condemned pods go highest first."""
    before = live_ordinals(5, reserve=[1])
    got = change(before, live_ordinals(2, reserve=[1]))
    assert before == (0, 2, 3, 4, 5)
    assert got.deleted == (5, 4, 3)


def test_a_malformed_change_brings_reserved_ordinals_back() -> None:
    """[1] -> [1, "x"]: the controller drops the whole list, so ordinal 1 is live again."""
    got = change(live_ordinals(3, reserve=[1]), live_ordinals(3, reserve=[1, "x"]))
    assert got.deleted == (3,)
    assert got.created == (1,)


entries = st.lists(
    st.one_of(
        st.integers(min_value=-3, max_value=25),
        st.tuples(st.integers(0, 25), st.integers(0, 25)).map(lambda t: f"{t[0]}-{t[1]}"),
    ),
    max_size=6,
)


@given(replicas=st.integers(0, 12), start=st.integers(0, 6), reserve=entries)
def test_intervals_agree_with_a_plain_walk(
    replicas: int, start: int, reserve: list[int | str]
) -> None:
    """The interval walk gives what the controller's one-by-one loop gives."""
    valid = reserved(reserve)
    held = _expanded(valid) or set()
    walk: list[int] = []
    ordinal = start
    while len(walk) < replicas:
        if ordinal not in held:
            walk.append(ordinal)
        ordinal += 1
    assert live_ordinals(replicas, start=start, reserve=reserve) == tuple(walk)
