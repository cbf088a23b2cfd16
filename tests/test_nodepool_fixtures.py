"""The recorded KafkaNodePool UPDATEs and ``/scale`` requests (fixtures 032-047) through both
webhooks, as ``v1`` and as ``v1beta2`` (converted by ``matchPolicy: Equivalent``).

The view: the recorded pools and pods, each broker in the zone stszone placed it in
(``tests/test_nodepools.py``: brokers 0-5 in a, b, c, a, b, c; controllers 6-8 in a, b, c).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests import poolsim as sim
from webhook.config import Defaults
from webhook.model.nodepools import nodepool_info, poolpod_info
from webhook.model.store import Store
from webhook.wire import review

PLACED = {i: sim.ZONES[i % 3] for i in range(9)}


def view() -> Store:
    store = sim.store()
    store.replace(
        "nodepools", [nodepool_info(p) for p in sim.objects("kafkanodepools.v1beta2.json")]
    )
    pods = []
    for pod in sim.objects("pods.json"):
        node_id = int(pod["metadata"]["name"].rsplit("-", 1)[1])
        pod["metadata"].setdefault("annotations", {})["stszone.io/zone"] = PLACED[node_id]
        pods.append(poolpod_info(pod))
    store.replace("poolpods", pods)
    return store


def chain(number: int, which: str) -> review.Answer:
    body: Any = sim.recorded(f"{number:03d}-{which}")
    parsed = review.from_dict(body)
    return review.chain(parsed, store=view(), defaults=Defaults())


@pytest.mark.parametrize("which", ["all", "pinned"])
@pytest.mark.parametrize("number", [32, 34, 36, 38, 40, 46])
def test_recorded_changes_that_keep_every_zone_pass_unchanged(number: int, which: str) -> None:
    """6->5 by /scale (5 leaves zone c), 5->4 dry run (4 leaves b), [1, 3] named then 5->3
    (0a 2c 4b left), the annotation removed at 3, the controller back to 3: all allowed, and
    nothing written (the default order is already as even; an annotation given is kept)."""
    answered = chain(number + (1 if which == "pinned" else 0), which)
    assert answered.allowed, answered.message
    assert not answered.patch and not answered.warnings


@pytest.mark.parametrize("which", ["all", "pinned"])
def test_recorded_patch_to_two_brokers_is_refused_naming_the_broker_and_zone(which: str) -> None:
    """042: 3->2 with brokers 0a 2c 4b: any removal empties a zone; the default (4) drops b."""
    answered = chain(42 if which == "all" else 43, which)
    assert not answered.allowed and answered.reason == "ZoneLoss"
    assert "my-cluster-broker-4" in answered.message and "zone-b" in answered.message
    assert "kubectl annotate" not in answered.message  # no choice keeps every zone


@pytest.mark.parametrize("which", ["all", "pinned"])
def test_recorded_scale_of_the_controllers_to_two_is_refused(which: str) -> None:
    """044: controllers 6a 7b 8c to 2: 8 leaves zone c empty; no choice would keep it."""
    answered = chain(44 if which == "all" else 45, which)
    assert not answered.allowed
    assert "my-cluster-controller-8" in answered.message and "zone-c" in answered.message
    assert "stszone.io/allow-zone-loss" in answered.message


def without_old(number: int, which: str) -> review.Review:
    """A recorded review as a hand-written one (``stszone review``) may be: no oldObject."""
    body: Any = sim.recorded(f"{number:03d}-{which}")
    del body["request"]["oldObject"]
    return review.from_dict(body)


@pytest.mark.parametrize(("number", "which"), [(42, "all"), (36, "all"), (43, "pinned")])
def test_pool_update_without_its_old_object_says_so(number: int, which: str) -> None:
    """042 (3->2, drops zone-b) and 036 (remove-node-ids named) without oldObject: the brokers
    the change removes are the old status's, so the pool is refused naming oldObject, as an
    apps/v1 set is, not allowed unjudged nor refused as a pool whose metadata.name is missing."""
    answered = review.answer(
        "validate", without_old(number, which), store=view(), defaults=Defaults()
    )
    assert not answered.allowed and answered.code == 400, answered.message
    assert "oldObject" in answered.message and "metadata.name" not in answered.message
    assert answered.message.startswith("KafkaNodePool broker UPDATE")


@pytest.mark.parametrize("which", ["all", "pinned"])
def test_pool_scale_without_its_old_object_is_judged_from_the_view(which: str) -> None:
    """044 without oldObject: the count the Scale lowers is the pool's in the view (3
    controllers, 6a 7b 8c), so 2 drops zone-c as it does with oldObject."""
    number = 44 if which == "all" else 45
    answered = review.answer(
        "validate", without_old(number, which), store=view(), defaults=Defaults()
    )
    assert not answered.allowed and answered.reason == "ZoneLoss", answered.message
    assert "my-cluster-controller-8" in answered.message and "zone-c" in answered.message
