"""A Terminating pod whose claim is being deleted: its replacement gets a new claim and goes to
its rule zone, and the guard counts it there, not in the old volume's zone.

Skipped unless ``STSZONE_E2E_KUBECONFIG`` names a cluster; see ``conftest.py`` for the knobs
and for what is created and always deleted. This test also creates local PersistentVolumes
(cluster-scoped, labelled with the run) and deletes them, and holds one of its own pods
Terminating with a finalizer of its own, which it always takes off.

With zones Z0, Z1, Z2: ordinal 0's volume is in Z0, ordinal 1's in Z2 (its rule zone is Z1),
ordinal 2's in Z2. A user moves ordinal 1 to its rule zone by deleting its claim and its pod
(the claim stays, Terminating, while the pod mounts it). While the pod is Terminating, 3 -> 2
would keep Z2 only if ordinal 1 came back on its old volume; it comes back on a new claim in
Z1, so the scale-down, which removes ordinal 2 (Z2), is refused.
"""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from tests.e2e.kube import RUN_LABEL, Cluster, Kubectl, KubectlError, wait_for, workload
from tests.e2e.pinning import delete_volume, local_volume, nodes_by_zone, with_data_claim

HOLD = "stszone.io/e2e-hold"


@pytest.fixture
def everywhere(cluster: Cluster) -> Kubectl:
    """kubectl on the same cluster, not scoped to the test namespace (for the volumes)."""
    return Kubectl(cluster.kubectl.binary, cluster.kubectl.kubeconfig)


def _scheduled(kubectl: Kubectl, pod: str, *, timeout: float) -> str:
    """The node ``pod`` is bound to, once it is."""

    def node() -> str | None:
        found: str | None = kubectl.get("pod", pod)["spec"].get("nodeName")
        return found

    return wait_for(f"{pod} to be scheduled", node, timeout=timeout)


def _release(kubectl: Kubectl, pod: str) -> None:
    """Take the test's finalizer off ``pod`` (absent is fine)."""
    try:
        kubectl.run("patch", "pod", pod, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    except KubectlError as err:
        if "NotFound" not in err.stderr:
            raise


def test_a_terminating_pod_whose_claim_is_deleted_counts_in_its_rule_zone(
    cluster: Cluster,
    everywhere: Kubectl,
) -> None:
    if not cluster.schedulable or len(cluster.zones) < 3:
        pytest.skip(f"zones {', '.join(cluster.zones)} are not three with schedulable nodes")
    zones = cluster.zones
    nodes = nodes_by_zone(cluster.kubectl, zones)
    homes = [nodes[zones[0]][0], nodes[zones[2]][0], nodes[zones[2]][-1]]
    name, kubectl = "regrown", cluster.kubectl
    with ExitStack() as stack:
        # Deleted in reverse: the pod's hold, the set, its claims, then the volumes.
        for ordinal, node in enumerate(homes):
            volume, claim = f"stszone-e2e-{cluster.run}-{name}-{ordinal}", f"data-{name}-{ordinal}"
            stack.callback(delete_volume, everywhere, volume)
            everywhere.create(local_volume(cluster, volume, node=node, claim=claim))
            stack.callback(kubectl.delete, "pvc", claim)
        stack.callback(kubectl.delete, "statefulset", name)
        sts = workload(
            "StatefulSet", name, image=cluster.image, replicas=3, labels={RUN_LABEL: cluster.run}
        )
        sts["metadata"].setdefault("annotations", {})["stszone.io/zones"] = ",".join(zones[:3])
        kubectl.create(with_data_claim(sts))

        for ordinal, node in enumerate(homes):
            assert _scheduled(kubectl, f"{name}-{ordinal}", timeout=cluster.timeout) == node
        pod = f"{name}-1"
        stack.callback(_release, kubectl, pod)
        kubectl.run(
            "patch", "pod", pod, "--type=merge", "-p", f'{{"metadata":{{"finalizers":["{HOLD}"]}}}}'
        )
        kubectl.run("delete", "pvc", f"data-{name}-1", "--wait=false")
        kubectl.run("delete", "pod", pod, "--wait=false")

        def refusal() -> str | None:
            assert kubectl.get("pod", pod)["metadata"].get("deletionTimestamp"), "held Terminating"
            try:
                kubectl.run("scale", "statefulset", name, "--replicas=2", "--dry-run=server")
            except KubectlError as err:
                return err.stderr
            return None

        refused = wait_for("the guard to count ordinal 1 in its rule zone", refusal, timeout=60)
        assert f"would drop zone {zones[2]}" in refused, refused
        assert f"its replacement goes to {zones[1]}" in refused, refused
        assert f"claim data-{name}-1 is deleted with {pod}" in refused, refused
