"""A JBOD broker whose volumes allow different zones: its pod must reach every one of them.

The recorded broker-0 mounts ``data-0-my-cluster-broker-0`` and ``data-1-my-cluster-broker-0``
(``spec.storage.type: jbod``, volumes 0 and 1). A volume pins the pod to the zones its node
affinity allows; with two, only the zones both allow can run it, as for a StatefulSet's claims.
data-0 is on a regional disk usable from a and b, data-1 in b alone: only b runs the pod.
"""

from __future__ import annotations

from tests import builders as b
from tests import poolsim as sim
from webhook.model.extract import claim_info, volume_info
from webhook.model.nodepools import nodepool_info, poolpod_info
from webhook.model.store import Store
from webhook.rules.poolaudit import audit_pool

DATA_0, DATA_1 = "data-0-my-cluster-broker-0", "data-1-my-cluster-broker-0"


def _store(zones_0: tuple[str, ...], zones_1: tuple[str, ...]) -> Store:
    view = sim.store()
    pool = sim.pool_object("broker", replicas=6, jbod=True, node_ids=[0, 1, 2, 3, 4, 5])
    view.put("nodepools", nodepool_info(pool))
    for claim, volume, zones in ((DATA_0, "pv-0", zones_0), (DATA_1, "pv-1", zones_1)):
        view.put("volumes", volume_info(b.pv(volume, *zones, claim=("kafka", claim))))
        bound = b.pvc(claim, namespace="kafka", volume=volume)
        bound["metadata"]["labels"] = {
            "strimzi.io/cluster": "my-cluster",
            "strimzi.io/pool-name": "broker",
        }
        view.put("claims", claim_info(bound))
    return view


def _pod() -> sim.JSON:
    pod: sim.JSON = sim.recorded("023-all-Pod-CREATE-my-cluster-broker-0")["request"]["object"]
    return pod


def test_a_broker_goes_to_the_zone_every_volume_allows() -> None:
    """data-0 on a regional disk usable from a and b, data-1 in b alone: only b runs the pod."""
    answered = sim.admit(_store(("zone-a", "zone-b"), ("zone-b",)), _pod())
    assert answered.allowed, answered.message
    assert answered.edited["metadata"]["annotations"]["stszone.io/zone"] == "zone-b"


def test_the_audit_expects_it_there() -> None:
    """Running in b, the broker is where its data is: ok, not MISPLACED (its first volume
    alone would say a)."""
    view = _store(("zone-a", "zone-b"), ("zone-b",))
    pod = sim.admit(view, _pod()).edited
    pod["spec"]["nodeName"] = "n-zone-b-0"
    view.put("poolpods", poolpod_info(pod))
    pool = view.nodepool("kafka", "broker")
    assert pool is not None
    row = next(r for r in audit_pool(pool, store=view).rows if r.node_id == 0)
    assert (row.expected_zone, row.zone, row.status) == ("zone-b", "zone-b", "ok")
