"""Which zone list a KafkaNodePool's messages name: the pool's own ``stszone.io/zones``,
else the server's (``--zones``, else the zones nodes carry), which is the list the guard then
protects and its brokers are placed over; and what a refused broker is told to change.

In the scale-downs, pool has six brokers placed by stszone over zone-a, zone-b, zone-c; 6 -> 2
keeps 0 and 1 only.
"""

from __future__ import annotations

import pytest

from tests import builders as b
from tests import poolsim as sim
from webhook.model.extract import claim_info, volume_info
from webhook.model.nodepools import nodepool_info
from webhook.model.store import Store


def _cluster(**annotations: str) -> Store:
    """The pool, reconciled to six brokers, then stored with ``annotations`` in place of its
    ``stszone.io/*`` ones."""
    view = sim.store()
    cluster = sim.Cluster(view)
    cluster.create_pool("pool", 6)
    cluster.reconcile()
    assert set(cluster.zones("pool").values()) == set(sim.ZONES)
    info = view.nodepool("kafka", "pool")
    assert info is not None
    made = sim.pool_object("pool", replicas=6, node_ids=list(info.node_ids or ()))
    made["metadata"]["annotations"] = annotations
    view.put("nodepools", nodepool_info(made))
    return view


def _refusals(view: Store) -> list[str]:
    """The messages refusing 6 -> 2 by kubectl scale and by an update of spec.replicas."""
    new, old = sim.scale("pool", old=6, new=2)
    info = view.nodepool("kafka", "pool")
    assert info is not None
    before = sim.pool_object("pool", replicas=6, node_ids=list(info.node_ids or ()))
    before["metadata"]["annotations"] = dict(info.annotations)
    after = sim.pool_object("pool", replicas=2, node_ids=list(info.node_ids or ()))
    after["metadata"]["annotations"] = dict(info.annotations)
    said = []
    for answered in (
        sim.admit(view, new, old=old, operation="UPDATE"),
        sim.admit(view, after, old=before, operation="UPDATE", endpoint="validate"),
    ):
        assert (answered.allowed, answered.reason) == (False, "ZoneLoss"), answered.message
        said.append(answered.message)
    return said


@pytest.mark.parametrize(
    ("annotations", "override", "named"),
    [
        ({"stszone.io/zones": "zone-a,zone-b,zone-c"}, False, "of stszone.io/zones;"),
        ({}, False, "of the nodes' zones (topology.kubernetes.io/zone);"),
        ({}, True, "of the server's zones (--zones);"),
        # Malformed: the guard reads none of them, the server's zones stand in.
        ({"stszone.io/zones": "zone-a,,zone-c"}, False, "of the nodes' zones"),
    ],
)
def test_a_refusal_names_the_zone_list_it_protects(
    annotations: dict[str, str], override: bool, named: str
) -> None:
    view = _cluster(**annotations)
    if override:
        view.zones_override = sim.ZONES
    for message in _refusals(view):
        assert named in message, message
        if "stszone.io/zones" not in named:
            assert "of stszone.io/zones" not in message, message


# --- a broker's pod: the list its claim's zone is outside, and what changes its zone ----------

ZONE_KEY = "topology.kubernetes.io/zone"


def _bare_pool(annotations: dict[str, str]) -> Store:
    """Pool ``pool`` with ``annotations`` as its only ones and no broker yet, on nodes in
    zone-a, zone-b and zone-c."""
    view = sim.store()
    made = sim.pool_object("pool", replicas=1)
    made["metadata"]["annotations"] = annotations
    view.put("nodepools", nodepool_info(made))
    return view


def _with_volume(view: Store, zone: str) -> Store:
    """Broker 0's claim bound to a volume in ``zone``."""
    claim = "data-my-cluster-pool-0"
    view.put("volumes", volume_info(b.pv("pv-0", zone, claim=("kafka", claim))))
    view.put("claims", claim_info(b.pvc(claim, namespace="kafka", volume="pv-0")))
    return view


def test_a_broker_following_its_claim_out_of_the_servers_list_names_that_list() -> None:
    """The pool has no stszone.io/zones; --zones lists zone-a and zone-b; broker 0's data is
    in zone-c: its pod goes there, and the warning names --zones, the list in force."""
    view = _with_volume(_bare_pool({}), "zone-c")
    view.zones_override = ("zone-a", "zone-b")
    answered = sim.admit(view, sim.pod_object("my-cluster", "pool", 0), endpoint="mutate")
    assert answered.allowed, answered.message
    assert answered.warnings == (
        "my-cluster-pool-0 follows its claim data-my-cluster-pool-0 to zone-c, not in the "
        "server's zones (--zones)",
    )


WAY_IN = "PodNodeSelector's namespace annotation, a Kyverno or Gatekeeper mutation"
#: What can add a node affinity or a nodeName on a pod's way in: PodNodeSelector writes only the
#: nodeSelector (its namespace annotation scheduler.alpha.kubernetes.io/node-selector).
WEBHOOK_WAY_IN = "a Kyverno or Gatekeeper mutation"


@pytest.mark.parametrize(
    ("annotations", "fix"),
    [
        ({"stszone.io/zones": "zone-a,zone-b,zone-c"}, "change its stszone.io/zones"),
        ({}, "give the pool stszone.io/zones"),
    ],
    ids=["own list", "server's list"],
)
def test_a_broker_refused_its_zone_is_told_the_list_that_chose_it(
    annotations: dict[str, str], fix: str
) -> None:
    """Broker 0 goes to zone-a (the first listed); its pod's nodeSelector asks for zone-b. A
    pool without a list of its own changes its brokers' zones by being given one. Strimzi's
    pod template has no nodeSelector: the refusal says the pod got it on its way in, and sends
    nobody to a template."""
    pod = sim.pod_object("my-cluster", "pool", 0)
    pod["spec"]["nodeSelector"] = {ZONE_KEY: "zone-b"}
    answered = sim.admit(_bare_pool(annotations), pod, endpoint="mutate")
    assert (answered.allowed, answered.reason) == (False, "ZoneConflict")
    assert answered.message == (
        f"pod my-cluster-pool-0 of KafkaNodePool pool has nodeSelector {ZONE_KEY}=zone-b, which "
        f"admits no node of {ZONE_KEY}=zone-a, the zone stszone chose for it; Strimzi never writes a "
        "broker's nodeSelector, so an admission plugin or webhook added it on the pod's way in "
        f"({WAY_IN}): remove it there, or {fix}"
    ), answered.message


def test_a_brokers_affinity_is_said_to_come_from_a_template_or_on_its_way_in() -> None:
    """Broker 0 goes to zone-a; its pod's required node affinity asks for zone-b. Strimzi
    writes it from the pool's spec.template.pod.affinity, else the Kafka's
    spec.kafka.template.pod.affinity; stszone reads neither, so the refusal names both, and
    the way in, without claiming which holds it."""
    pod = sim.pod_object("my-cluster", "pool", 0)
    term = {"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": ["zone-b"]}]}
    pod["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [term]}}
    }  # fmt: skip
    answered = sim.admit(_bare_pool({}), pod, endpoint="mutate")
    assert (answered.allowed, answered.reason) == (False, "ZoneConflict")
    assert answered.message.endswith(
        "the zone stszone chose for it; Strimzi writes a broker's node affinity from "
        "spec.template.pod.affinity of KafkaNodePool pool (or, when the pool has no "
        "spec.template, from spec.kafka.template.pod.affinity of Kafka my-cluster); stszone "
        "does not read those, so if neither holds it, a mutating webhook added it on the pod's "
        f"way in ({WEBHOOK_WAY_IN}): remove it where it is, or give the pool stszone.io/zones"
    ), answered.message


def test_a_brokers_node_name_is_said_to_come_from_a_webhook() -> None:
    """Broker 0 goes to zone-a; its pod is created with spec.nodeName n-zone-b-0. Strimzi never
    writes a nodeName, and PodNodeSelector writes only a nodeSelector: the refusal names a
    webhook as the way in, not the namespace's node-selector annotation."""
    pod = sim.pod_object("my-cluster", "pool", 0)
    pod["spec"]["nodeName"] = "n-zone-b-0"
    answered = sim.admit(_bare_pool({}), pod, endpoint="mutate")
    assert (answered.allowed, answered.reason) == (False, "ZoneConflict")
    assert answered.message.endswith(
        "the zone stszone chose for it; Strimzi never writes a broker's spec.nodeName, so a "
        f"mutating webhook added it on the pod's way in ({WEBHOOK_WAY_IN}): remove it there, "
        "or give the pool stszone.io/zones"
    ), answered.message


def test_a_broker_held_by_its_data_is_not_told_to_change_the_zone_list() -> None:
    """Broker 0's data is in zone-c and its pod asks for zone-b: no zone list moves it."""
    view = _with_volume(_bare_pool({}), "zone-c")
    pod = sim.pod_object("my-cluster", "pool", 0)
    pod["spec"]["nodeSelector"] = {ZONE_KEY: "zone-b"}
    answered = sim.admit(view, pod, endpoint="mutate")
    assert (answered.allowed, answered.reason) == (False, "ZoneConflict")
    assert answered.message.endswith(
        f"({WAY_IN}): remove it there, or give the broker a new claim "
        "(its data decides its zone, whatever the nodes' zones (topology.kubernetes.io/zone) "
        "says; deleting claim data-my-cluster-pool-0 deletes that data)"
    ), answered.message
