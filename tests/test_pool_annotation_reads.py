"""A KafkaNodePool's ``stszone.io/*`` annotations read one way by every path: its brokers'
pods, its ``/scale``, the guard of an UPDATE and the check of CREATE. A pool's brokers are
always pinned to a zone by a required node affinity, so ``stszone.io/mode`` (other than
``affinity``), ``node-label`` and ``scheduler-name`` mean nothing on it (docs/kafka.md): a
pool carrying one (given before stszone judged it) is malformed on every path, never taken by
one path and refused by another.

pool: six brokers placed by stszone over zone-a, zone-b, zone-c; 6 -> 2 keeps 0 and 1 only.
"""

from __future__ import annotations

import copy

import pytest

from tests import poolsim as sim
from webhook.model.nodepools import nodepool_info
from webhook.model.store import Store

CASES = [
    {"stszone.io/mode": "scheduler"},
    {"stszone.io/mode": "bogus"},
    {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"},
    {"stszone.io/scheduler-name": "my-scheduler"},
]


def _malformed_by_path(view: Store, pool: sim.JSON) -> dict[str, bool]:
    """Whether each path takes the pool's annotations as malformed."""
    new, old = sim.scale("pool", old=6, new=5)
    scaled = sim.admit(view, new, old=old, operation="UPDATE")
    created = sim.admit(view, pool, operation="CREATE", endpoint="validate")
    pod = sim.admit(view, sim.pod_object("my-cluster", "pool", 6))
    claim = sim.admit(view, sim.claim_object("my-cluster", "pool", 6))
    return {
        "scale": any("unchanged by this scale" in w for w in scaled.warnings),
        "create": created.reason == "Invalid",
        "pod": pod.reason == "Invalid",
        "claim": claim.reason == "Invalid",
    }


@pytest.mark.parametrize("annotations", [*CASES, {"stszone.io/mode": "affinity"}, {}])
def test_every_path_reads_a_pools_annotations_alike(annotations: dict[str, str]) -> None:
    view, pool = sim.stored_pool(**annotations)
    said = _malformed_by_path(view, pool)
    assert set(said.values()) == {bool(annotations) and annotations in CASES}, said


@pytest.mark.parametrize("annotations", CASES)
def test_the_way_out_of_a_scale_refusal_is_taken(annotations: dict[str, str]) -> None:
    """kubectl scale 6 -> 2 loses zone-c; the refusal says how to force it, and the update
    doing just that is allowed (not refused for a key the scale took as read)."""
    view, pool = sim.stored_pool(**annotations)
    new, old = sim.scale("pool", old=6, new=2)
    refused = sim.admit(view, new, old=old, operation="UPDATE")
    assert (refused.allowed, refused.reason) == (False, "ZoneLoss"), refused.message
    forced = copy.deepcopy(pool)
    forced["metadata"]["annotations"]["stszone.io/allow-zone-loss"] = "true"
    if "malformed annotations" in refused.message:
        for key in annotations:
            assert key in refused.message, refused.message
            del forced["metadata"]["annotations"][key]
    taken = sim.admit(view, forced, old=pool, operation="UPDATE")
    assert taken.allowed, taken.message
    view.put("nodepools", nodepool_info(forced))
    allowed = sim.admit(view, new, old=old, operation="UPDATE")
    assert allowed.allowed, allowed.message
