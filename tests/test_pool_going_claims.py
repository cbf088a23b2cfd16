"""A broker re-added while the claim of its earlier self is still being deleted.

With ``deleteClaim: true`` a scale-down ends with the operator deleting the removed broker's
claims (``KafkaReconciler.deletePersistentClaims``, after the StrimziPodSet was scaled down);
while the old pod is Terminating the claim waits on ``kubernetes.io/pvc-protection``. Scaled up
again meanwhile, the StrimziPodSet controller creates the broker's pod as soon as the old one is
gone, without looking at its claims (``maybeCreateOrPatchPod``), and the claim it names goes at
the same moment; the operator's next pass creates a new, empty claim. That broker has no data:
it goes where the pool has fewest, and its new claim with it.

The pool: zones a, b, c; brokers 0 (a), 1 (b), 2 (c), 3 (c: its volume pv-3 is there).
"""

from __future__ import annotations

from tests import builders as b
from tests import poolsim as sim
from webhook.model.extract import claim_info, volume_info
from webhook.model.nodepools import nodepool_info, poolpod_info
from webhook.model.store import Store

CLAIM = "data-my-cluster-pool-3"


def _scaled_back() -> Store:
    """The pool scaled from 4 to 3 (broker 3 removed, its claim still being deleted) and back
    to 4: the operator's pass adds ID 3 again."""
    view = sim.store()
    volume = b.pv("pv-3", "zone-c", claim=("kafka", CLAIM))
    volume["spec"]["claimRef"]["uid"] = "uid-claim-my-cluster-pool-3-data"  # the first claim's
    view.put("volumes", volume_info(volume))
    cluster = sim.Cluster(view)
    cluster.create_pool("pool", 4)
    cluster.reconcile()
    assert cluster.zones("pool") == {0: "zone-a", 1: "zone-b", 2: "zone-c", 3: "zone-c"}
    cluster.set_pool("pool", replicas=3)
    cluster.reconcile()  # broker 3's pod is gone
    old = sim.claim_object("my-cluster", "pool", 3)
    old["metadata"]["annotations"] = {"stszone.io/zone": "zone-c"}
    old["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    old["metadata"]["finalizers"] = ["kubernetes.io/pvc-protection"]
    old["spec"]["volumeName"] = "pv-3"
    old["status"] = {"phase": "Bound"}
    view.put("claims", claim_info(old))
    view.put("nodepools", nodepool_info(sim.pool_object("pool", replicas=4, node_ids=[0, 1, 2])))
    return view


def test_a_re_added_broker_is_not_placed_by_a_claim_being_deleted() -> None:
    """Brokers 0, 1, 2 hold a, b and c once each: broker 3 goes to the first listed, a, not to
    c where the old claim's volume is."""
    view = _scaled_back()
    pod = sim.admit(view, sim.pod_object("my-cluster", "pool", 3))
    assert pod.allowed, pod.message
    assert pod.edited["metadata"]["annotations"]["stszone.io/zone"] == "zone-a"


def test_the_new_claim_and_the_pod_agree() -> None:
    """The old claim gone, the operator creates a new one: it gets the zone the pod was pinned
    to, so the pod can mount it (with a storage-class template, its class is that zone's)."""
    view = _scaled_back()
    pod = sim.admit(view, sim.pod_object("my-cluster", "pool", 3))
    view.put("poolpods", poolpod_info(pod.edited))
    view.delete("claims", ("kafka", CLAIM))
    fresh = sim.claim_object("my-cluster", "pool", 3)
    fresh["metadata"]["uid"] = "uid-new-claim"
    claim = sim.admit(view, fresh)
    assert claim.allowed, claim.message
    zone = claim.edited["metadata"]["annotations"]["stszone.io/zone"]
    assert zone == pod.edited["metadata"]["annotations"]["stszone.io/zone"]


def test_a_claim_kept_still_holds_the_broker() -> None:
    """The same pool with deleteClaim: false: the re-added broker goes back to its data, c."""
    view = _scaled_back()
    kept = sim.claim_object("my-cluster", "pool", 3)
    kept["metadata"]["annotations"] = {"stszone.io/zone": "zone-c"}
    kept["spec"]["volumeName"] = "pv-3"
    kept["status"] = {"phase": "Bound"}
    view.put("claims", claim_info(kept))
    pod = sim.admit(view, sim.pod_object("my-cluster", "pool", 3))
    assert pod.edited["metadata"]["annotations"]["stszone.io/zone"] == "zone-c"
