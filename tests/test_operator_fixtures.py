"""The recorded operator fixtures agree with the reference models of the operators.

``tests/fixtures/strimzi`` and ``tests/fixtures/kruise`` were recorded while a test played the
operators; these checks hold the recording to what ``tests/strimzi_ref.py`` and
``tests/kruise_ref.py`` (read from the operators' source) say the operators do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.kruise_ref import change, live_ordinals
from tests.strimzi_ref import Pool, assign, removed_ids

FIXTURES = Path(__file__).parent / "fixtures"
REMOVE = "strimzi.io/remove-node-ids"


def _review(operator: str, number: str) -> Any:
    (path,) = (FIXTURES / operator / "admission").glob(f"{number}-all-*.json")
    return json.loads(path.read_text())["request"]


def _items(operator: str, name: str) -> list[Any]:
    items: list[Any] = json.loads((FIXTURES / operator / "objects" / name).read_text())["items"]
    return items


def test_new_pools_get_ids_in_name_order() -> None:
    """Two new pools of one cluster: ``broker`` (by name first) takes 0-5, ``controller`` 6-8."""
    pools = {p["metadata"]["name"]: p for p in _items("strimzi", "kafkanodepools.v1beta2.json")}
    want = assign([Pool(name, pools[name]["spec"]["replicas"]) for name in sorted(pools)])
    for name, pool in pools.items():
        assert tuple(pool["status"]["nodeIds"]) == tuple(sorted(want[name].desired))


def _broker_ids_at_start() -> tuple[int, ...]:
    (broker,) = (
        p
        for p in _items("strimzi", "kafkanodepools.v1beta2.json")
        if p["metadata"]["name"] == "broker"
    )
    return tuple(broker["status"]["nodeIds"])


@pytest.mark.parametrize(
    ("decrease", "after"),
    [
        ("032", "036"),  # /scale 6 -> 5: the highest goes
        ("038", "040"),  # UPDATE 5 -> 3 with remove-node-ids "[1, 3]"
    ],
)
def test_scale_downs_remove_what_the_operator_removes(decrease: str, after: str) -> None:
    """Each recorded decrease removes the IDs the next recording's pool no longer holds."""
    request = _review("strimzi", decrease)
    if request["kind"]["kind"] == "Scale":  # a Scale carries no IDs: the pool's before it
        ids = _broker_ids_at_start()
    else:
        ids = tuple(request["oldObject"]["status"]["nodeIds"])
    annotation = (request["object"]["metadata"].get("annotations") or {}).get(REMOVE)
    gone = removed_ids(ids, request["object"]["spec"]["replicas"], annotation)
    kept = _review("strimzi", after)["oldObject"]["status"]["nodeIds"]
    assert sorted(set(ids) - set(gone)) == kept


def test_last_decrease_without_annotation_takes_the_highest() -> None:
    """UPDATE 3 -> 2 after the user removed the annotation: ID 4 goes, [0, 2] stay."""
    request = _review("strimzi", "042")
    assert REMOVE not in (request["object"]["metadata"].get("annotations") or {})
    ids = tuple(request["oldObject"]["status"]["nodeIds"])
    assert removed_ids(ids, request["object"]["spec"]["replicas"], None) == (4,)
    (broker,) = (
        p
        for p in _items("strimzi", "after-scale-down/kafkanodepools.v1beta2.json")
        if p["metadata"]["name"] == "broker"
    )
    assert broker["status"]["nodeIds"] == [0, 2]


def test_the_annotation_outlives_its_scale_down() -> None:
    """After the operator removed 1 and 3 the pool still carries ``[1, 3]`` until the user drops it."""
    request = _review("strimzi", "040")
    assert request["oldObject"]["status"]["nodeIds"] == [0, 2, 4]
    assert request["oldObject"]["metadata"]["annotations"][REMOVE] == "[1, 3]"
    assert REMOVE not in (request["object"]["metadata"].get("annotations") or {})


def test_kruise_created_the_live_ordinals() -> None:
    """replicas 3 with ``reserveOrdinals: [1]`` gave pods web-0, web-2, web-3."""
    spec = _review("kruise", "001")["object"]["spec"]
    created = [_review("kruise", n)["name"] for n in ("004", "006", "008")]
    want = live_ordinals(spec["replicas"], reserve=spec["reserveOrdinals"])
    assert created == [f"web-{o}" for o in want]


def test_kruise_reserve_change_deletes_web_0() -> None:
    """``[1] -> ["0-1"]`` at replicas 2: web-0 goes, web-3 comes, web-2 stays."""
    request = _review("kruise", "011")
    old, new = request["oldObject"]["spec"], request["object"]["spec"]
    got = change(
        live_ordinals(old["replicas"], reserve=old["reserveOrdinals"]),
        live_ordinals(new["replicas"], reserve=new["reserveOrdinals"]),
    )
    assert (got.deleted, got.created, got.kept) == ((0,), (3,), (2,))


def test_a_v1alpha1_write_hides_reserve_ordinals_from_both_sides() -> None:
    """The pinned (v1beta1) copy of a v1alpha1 patch: neither object has ``reserveOrdinals``."""
    (path,) = (FIXTURES / "kruise" / "admission").glob("016-pinned-*.json")
    request = json.loads(path.read_text())["request"]
    assert request["requestKind"]["version"] == "v1alpha1"
    assert request["kind"]["version"] == "v1beta1"
    assert "reserveOrdinals" not in request["oldObject"]["spec"]
    assert "reserveOrdinals" not in request["object"]["spec"]
