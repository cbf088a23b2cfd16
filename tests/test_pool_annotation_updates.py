"""An UPDATE of a KafkaNodePool meets its ``stszone.io/*`` annotations as an UPDATE of a
StatefulSet does: one that changes any ``stszone.io/`` key into a malformed set (a misspelt key
added, say) is refused; one that leaves malformed ones as they were is allowed, and warned of
them whatever else it changes (a label, a scale-up), since the pool's new brokers are refused
until they are fixed.

pool: six brokers placed by stszone over zone-a, zone-b, zone-c; db: the same StatefulSet.
"""

from __future__ import annotations

import copy

import pytest

from tests import builders as b
from tests import poolsim as sim
from tests.test_validate import validate
from webhook.cluster.clusterfile import store_from_objects
from webhook.wire.review import Answer

ZONES = {"stszone.io/zones": "zone-a,zone-b,zone-c"}
MISSPELT = {"stszone.io/allow-zoneloss": "true"}
EMPTY_ENTRY = {"stszone.io/zones": "zone-a,,zone-b"}


def _pool_update(before: dict[str, str], after: dict[str, str], *, replicas: int = 6) -> Answer:
    """/validate of an UPDATE of the pool (stored with ``before``) to ``after`` with a new
    label and ``replicas``."""
    view, old = sim.stored_pool(**before)
    new = copy.deepcopy(old)
    new["metadata"]["annotations"] = {**ZONES, **after}
    new["metadata"].setdefault("labels", {})["team"] = "payments"
    new["spec"]["replicas"] = replicas
    return sim.admit(view, new, old=old, operation="UPDATE")


def _set_update(before: dict[str, str], after: dict[str, str]) -> Answer:
    old = b.statefulset(annotations={"stszone.io/zones": "a,b,c", **before})
    new = b.statefulset(annotations={"stszone.io/zones": "a,b,c", **after})
    new["metadata"].setdefault("labels", {})["team"] = "payments"
    return validate(new, operation="UPDATE", old=old)


def test_an_update_adding_a_misspelt_key_is_refused_as_for_a_set() -> None:
    """allow-zoneloss for allow-zone-loss: the set's update is refused naming the key, and so
    is the pool's (allowed, the user would believe the guard disarmed)."""
    assert not _set_update({}, MISSPELT).allowed
    for replicas in (6, 5):
        answer = _pool_update({}, MISSPELT, replicas=replicas)
        assert (answer.allowed, answer.code, answer.reason) == (False, 422, "Invalid")
        assert answer.message.startswith(
            "KafkaNodePool pool: unknown annotation(s) stszone.io/allow-zoneloss; known: "
        ), answer.message


@pytest.mark.parametrize(
    ("kept", "said"),
    [
        (EMPTY_ENTRY, "stszone.io/zones has an empty entry"),
        (MISSPELT, "unknown annotation(s) stszone.io/allow-zoneloss"),
    ],
)
@pytest.mark.parametrize("replicas", [6, 7])
def test_an_update_leaving_malformed_annotations_warns_as_for_a_set(
    kept: dict[str, str], said: str, replicas: int
) -> None:
    """A label added (and a scale-up) with the malformed annotations left: the set is told,
    and the pool alike, whether or not the update is a scale-down."""
    tail = " (unchanged by this update; fix it)"
    assert f"StatefulSet db: {said}{tail}" in _set_update(kept, kept).warnings
    answer = _pool_update(kept, kept, replicas=replicas)
    assert answer.allowed, answer.message
    assert answer.warnings == (f"KafkaNodePool pool: {said}{tail}",)


def test_a_scale_down_leaving_them_warns_once() -> None:
    """6 -> 5 keeps every zone: one warning of the malformed annotations, not two."""
    answer = _pool_update(EMPTY_ENTRY, EMPTY_ENTRY, replicas=5)
    assert answer.allowed, answer.message
    assert answer.warnings == (
        "KafkaNodePool pool: stszone.io/zones has an empty entry (unchanged by this update; "
        "fix it)",
    )


def test_a_scale_down_beside_a_misspelt_key_is_guarded_on_the_defaults_as_for_a_set() -> None:
    """allow-zone-loss beside a misspelt key, both left as they were, and 6 -> 2 (zone-c's
    brokers go): the set's update is guarded on the defaults and refused, and so is the
    pool's: neither reads allow-zone-loss beside the misspelt key."""
    forced = {**MISSPELT, "stszone.io/allow-zone-loss": "true"}
    old = b.statefulset(replicas=3, annotations={"stszone.io/zones": "a,b,c", **forced})
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 2
    store = store_from_objects([*(b.node(f"n-{z}", z) for z in "abc"), old])
    assert validate(new, store, operation="UPDATE", old=old).reason == "ZoneLoss"
    answer = _pool_update(forced, forced, replicas=2)
    assert (answer.allowed, answer.reason) == (False, "ZoneLoss"), answer.message
    assert "fix KafkaNodePool pool's malformed annotations (unknown" in answer.message


def test_a_misspelt_key_on_a_pool_is_told_only_the_keys_a_pool_reads() -> None:
    """The list of known keys that follows a misspelt one names only the keys a pool reads,
    not stszone.io/mode, node-label and scheduler-name, which a pool refuses as not applying
    to it."""
    asked = sim.pool_object("pool", replicas=3, annotations={**ZONES, **MISSPELT})
    refused = sim.admit(sim.store(), asked)
    assert (refused.allowed, refused.code) == (False, 422)
    assert refused.message == (
        "KafkaNodePool pool: unknown annotation(s) stszone.io/allow-zoneloss; known: "
        "stszone.io/allow-zone-loss, stszone.io/storage-class-template, "
        "stszone.io/topology-key, stszone.io/zones"
    ), refused.message
    # A StatefulSet reads them all, and is told them all.
    told = _set_update({}, MISSPELT).message
    for key in ("stszone.io/mode", "stszone.io/node-label", "stszone.io/scheduler-name"):
        assert key in told, told
