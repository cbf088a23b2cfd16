"""A set whose ``stszone.io/*`` annotations are malformed: its new pods are refused until they
are fixed, but a scale-down cannot change them, so the guard judges it on the defaults (the
server's zones, ordinal mode) with a warning, for a StatefulSet and an Advanced StatefulSet
alike.

db: six members on nodes in zone-a, zone-a, zone-b, zone-c, zone-b, zone-a (the zones of the
server: zone-a, zone-b, zone-c). Keeping 0-3 keeps every zone; keeping 0-2 loses zone-c.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests import builders as b
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.rules.admission import Request, validate
from webhook.rules.decision import Decision

KRUISE = "apps.kruise.io"
KINDS = pytest.mark.parametrize("group", ["", KRUISE], ids=["apps", "kruise"])
NODES = ("a1", "a2", "b1", "c1", "b2", "a3")
BAD = {"stszone.io/mode": "bogus"}


def _cluster(group: str) -> Store:
    sts = b.statefulset("db", replicas=6, annotations=BAD)
    pods: list[dict[str, Any]] = [b.sts_pod("db", i, node=n) for i, n in enumerate(NODES)]
    if group:
        sts["apiVersion"] = f"{KRUISE}/v1beta1"
        for pod in pods:
            pod["metadata"]["ownerReferences"][0]["apiVersion"] = f"{KRUISE}/v1beta1"
    nodes = [b.node(n, f"zone-{n[0]}") for n in NODES]
    return store_from_objects([*nodes, sts, *pods])


def _scale(store: Store, new: int, *, group: str) -> Decision:
    """``kubectl scale --replicas NEW`` of db (six replicas), as /validate gets it."""
    request = Request(
        "Scale", "autoscaling", "statefulsets", "scale", "UPDATE", "ns", "db",
        b.scale(replicas=new), b.scale(replicas=6), resource_group=group or "apps",
    )  # fmt: skip
    return validate(request, store=store, defaults=Defaults())


@KINDS
def test_a_scale_down_of_a_malformed_set_is_judged_on_the_defaults_with_a_warning(
    group: str,
) -> None:
    """6 -> 3 loses zone-c and is refused; 6 -> 4 keeps every zone and is allowed, warned that
    the annotations are malformed, for an Advanced StatefulSet as for a StatefulSet."""
    store = _cluster(group)
    refused = _scale(store, 3, group=group)
    assert (refused.allowed, refused.reason) == (False, "ZoneLoss"), refused.message
    allowed = _scale(store, 4, group=group)
    assert allowed.allowed, allowed.message
    assert any("stszone.io/mode 'bogus'" in w for w in allowed.warnings), allowed.warnings
