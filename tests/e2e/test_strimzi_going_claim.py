"""A broker re-added while its old claim is still being deleted goes where the pool has fewest.

Skipped unless ``STSZONE_E2E_KUBECONFIG`` names a cluster; see ``conftest.py`` for the knobs
and for what is created and always deleted. No operator runs: the test plays it
(``tests/e2e/test_strimzi.py``). Broker 0's claim is bound to a volume in zone c; the claim is
deleted (``deleteClaim: true``) and held there by a finalizer of the test, as
``kubernetes.io/pvc-protection`` holds it while the old pod is Terminating. The StrimziPodSet
controller then creates the broker's pod without looking at its claims, and the operator makes
a new, empty claim once the old one is gone: the pod goes to zone a (the pool holds no other
broker), not to the old volume's zone c. The pod is asked for as a dry run: none is made.
"""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from tests.e2e.kube import Cluster, Kubectl, KubectlError, wait_for
from tests.e2e.strimzilab import (
    KAFKA,
    broker_claim,
    broker_claim_name,
    broker_pod,
    kafka_nodepool,
    pool_podset,
    pvs,
    restored_volume,
    wait_for_pools_in_view,
)

__all__ = ["pvs"]  # the fixture, imported for pytest

HOLD = "stszone.io/e2e-hold"
#: A pool of its own: test_strimzi's pool stays in the namespace until the session ends.
NAME = "readded"


def _release(kubectl: Kubectl, claim: str) -> None:
    """Take the test's finalizer off ``claim`` (absent is fine)."""
    try:
        kubectl.run("patch", "pvc", claim, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    except KubectlError as err:
        if "NotFound" not in err.stderr:
            raise


def test_a_claim_being_deleted_does_not_place_the_re_added_broker(
    strimzi_crds: None, cluster: Cluster, pvs: list[str], request: pytest.FixtureRequest
) -> None:
    kubectl = cluster.kubectl
    wait_for_pools_in_view(request)
    a, c = cluster.zones[0], cluster.zones[2]
    pv = restored_volume(cluster, 0, c, NAME)
    pvs.append(pv["metadata"]["name"])
    kubectl.create(pv)
    with ExitStack() as stack:
        stack.callback(kubectl.delete, "kafkanodepool", NAME)
        pool = kubectl.create(kafka_nodepool(cluster, 1, NAME))

        def pool_seen() -> bool:  # a dry-run claim gets a zone once the pool is in the view
            probe = kubectl.create(broker_claim(cluster, pool, 0, NAME), dry_run=True)
            return "stszone.io/zone" in probe["metadata"].get("annotations", {})

        wait_for("the pool to reach the webhook's view", pool_seen, timeout=20)
        claim = broker_claim_name(0, NAME)
        stack.callback(_release, kubectl, claim)
        made = broker_claim(cluster, pool, 0, NAME)
        made["metadata"]["finalizers"] = [HOLD]
        assert kubectl.create(made)["metadata"]["annotations"]["stszone.io/zone"] == c
        kubectl.run("delete", "pvc", claim, "--wait=false")
        assert kubectl.get("pvc", claim)["metadata"].get("deletionTimestamp")
        stack.callback(kubectl.delete, "strimzipodset", f"{KAFKA}-{NAME}")
        podset = kubectl.create(pool_podset(cluster, NAME))

        def zone() -> str | None:  # the claim's deletion reaches the view a moment later
            asked = kubectl.create(broker_pod(cluster, podset, 0, NAME), dry_run=True)
            got: str = asked["metadata"]["annotations"]["stszone.io/zone"]
            return got if got == a else None

        wait_for(f"the re-added broker to be placed in {a}, not by its old claim", zone, timeout=20)
