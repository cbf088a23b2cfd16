"""A Strimzi KafkaNodePool on a real API server, the operator's part played by the test.

No operator runs: the test creates what the Strimzi cluster operator creates, in its order
(``tests/fixtures/strimzi/README.md``): the pool, then each broker's claim (PVC-first), the
pool's ``status.nodeIds`` through the status subresource, a StrimziPodSet and each broker's
pod owned by it. Brokers 1 and 3 have data already: PersistentVolumes in zones a and b
pre-bound to their claims (restored volumes), so the pool is placed 0a 1a 2b 3b 4c 5c, even
but with the highest IDs in zones b and c. Then:

- ``kubectl scale kafkanodepool --replicas=4`` (default order: 5 and 4, all of zone c) is
  refused with the ``kubectl annotate`` that removes 5 and 3; after that command the same
  scale passes;
- with the annotation removed, a patch to 3 replicas gets ``remove-node-ids`` ``[1]`` written
  (zone a held two, zone c's only broker would have gone by default).

The Strimzi CRDs are applied from ``$STSZONE_STRIMZI_CRDS`` (else the lab's
``crds/strimzi.yaml``, ``kube.lab_file``) when the cluster lacks them, and left installed (other
runs and tests use them); the PersistentVolumes made here are deleted afterwards.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.e2e.kube import Cluster, Kubectl, KubectlError, wait_for
from tests.e2e.strimzilab import (
    KAFKA,
    POOL,
    broker_claim,
    broker_claim_name,
    broker_pod,
    kafka_nodepool,
    pool_podset,
    pvs,
    restored_volume,
    view_holds_every,
    wait_for_pools_in_view,
    write_pool_status,
)

__all__ = ["pvs"]  # the fixture, imported for pytest

REMOVE = "strimzi.io/remove-node-ids"


def _remove_broker(kubectl: Kubectl, node_id: int) -> None:
    kubectl.run("delete", "pod", f"{KAFKA}-{POOL}-{node_id}", "--wait=false")
    kubectl.run("delete", "pvc", broker_claim_name(node_id), "--wait=false")


def test_a_pool_is_placed_balanced_guarded_and_scaled_down_by_zone(
    strimzi_crds: None, cluster: Cluster, pvs: list[str], request: pytest.FixtureRequest
) -> None:
    kubectl = cluster.kubectl
    wait_for_pools_in_view(request)
    a, b, c = cluster.zones[:3]
    for node_id, zone in ((1, a), (3, b)):
        pv = restored_volume(cluster, node_id, zone)
        pvs.append(pv["metadata"]["name"])
        kubectl.create(pv)

    pool = kubectl.create(kafka_nodepool(cluster, 6))
    assert pool["metadata"]["annotations"]["stszone.io/zones"] == ",".join(cluster.zones)

    def pool_seen() -> bool:  # a dry-run claim gets a zone once the pool is in the view
        probe = kubectl.create(broker_claim(cluster, pool, 0), dry_run=True)
        return "stszone.io/zone" in probe["metadata"].get("annotations", {})

    wait_for("the pool to reach the webhook's view", pool_seen, timeout=20)
    claims: dict[int, str] = {}
    for node_id in range(6):  # PVC-first, as KafkaReconciler.pvcs()
        made = kubectl.create(broker_claim(cluster, pool, node_id))
        zone = made["metadata"]["annotations"]["stszone.io/zone"]
        claims[node_id] = zone
        if node_id in (1, 3):  # pre-bound to a restored volume: its class is kept
            assert made["spec"]["storageClassName"] == "ssd"
        else:
            assert made["spec"]["storageClassName"] == f"ssd-{zone}"
        # The next claim's zone counts this one: it must be in the view first.
        wait_for(
            f"the view to hold claim {made['metadata']['name']}",
            lambda: view_holds_every(cluster),
            timeout=20,
        )
    assert claims == {0: a, 1: a, 2: b, 3: b, 4: c, 5: c}
    write_pool_status(kubectl, list(range(6)))
    podset = kubectl.create(pool_podset(cluster))
    zones: dict[int, str] = {}
    for node_id in range(6):
        made = kubectl.create(broker_pod(cluster, podset, node_id))
        zones[node_id] = made["metadata"]["annotations"]["stszone.io/zone"]
        terms = made["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        wanted = {
            "key": "topology.kubernetes.io/zone",
            "operator": "In",
            "values": [zones[node_id]],
        }
        assert wanted in terms[0]["matchExpressions"]
    assert zones == claims
    assert Counter(zones.values()) == {a: 2, b: 2, c: 2}

    # kubectl scale: the default order (5, 4) empties zone c.
    command = (
        f"kubectl annotate kafkanodepool {POOL} -n {cluster.namespace} "
        f"{REMOVE}='[5, 3]' --overwrite"
    )

    def refused(*dry_run: str) -> str:
        try:
            kubectl.run("scale", "kafkanodepool", POOL, "--replicas=4", *dry_run)
        except KubectlError as err:
            return err.stderr
        return ""

    # The pods reach the view a moment after their creation: asked as a dry run until then.
    wait_for(
        "the view to hold the brokers", lambda: command in refused("--dry-run=server"), timeout=20
    )
    denial = refused()
    assert c in denial and command in denial, denial
    kubectl.run("annotate", "kafkanodepool", POOL, f"{REMOVE}=[5, 3]", "--overwrite")

    def scaled() -> bool:
        try:
            kubectl.run("scale", "kafkanodepool", POOL, "--replicas=4")
        except KubectlError:
            return False
        return True

    wait_for("the same scale to pass once annotated", scaled, timeout=20)
    for node_id in (5, 3):  # the played operator removes the annotation's IDs, in order
        _remove_broker(kubectl, node_id)
    write_pool_status(kubectl, [0, 1, 2, 4])
    kubectl.run("annotate", "kafkanodepool", POOL, f"{REMOVE}-")

    # A patch to 3 replicas names no broker: stszone writes zone a's highest (1), not 4 (c).
    def to_3(*dry_run: str) -> str | None:
        patched = json.loads(
            kubectl.run(
                "patch", "kafkanodepool", POOL, "--type=merge", "-p", '{"spec":{"replicas":3}}',
                "-o", "json", *dry_run,
            )
        )  # fmt: skip
        removed: str | None = patched["metadata"].get("annotations", {}).get(REMOVE)
        return removed

    # The status and the pods' removal reach the view a moment later: asked as a dry run
    # until its answer is the one wanted, however long that takes on a loaded machine.
    wait_for(
        "the view to hold the status and the removals",
        lambda: to_3("--dry-run=server") == "[1]",
        timeout=20,
    )
    assert to_3() == "[1]"
    _remove_broker(kubectl, 1)
    write_pool_status(kubectl, [0, 2, 4])
    left = {i: zones[i] for i in (0, 2, 4)}
    assert Counter(left.values()) == {a: 1, b: 1, c: 1}
