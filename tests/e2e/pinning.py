"""Pods and volumes pinned to nodes on a real control plane, for the end-to-end tests that place
members node by node or by their data (test_guard_motion.py, test_going_claims.py,
test_unknown_zone.py): the schedulable nodes of each zone, local PersistentVolumes pinned by
hostname (or by any node selector) and pre-bound to a claim, a StatefulSet whose claims bind to
such volumes, and a volume's deletion, waited for.
"""

from __future__ import annotations

from tests.e2e.conftest import schedulable_zones
from tests.e2e.kube import HOSTNAME, RUN_LABEL, ZONE_KEY, Cluster, Kubectl, Obj, wait_for


def nodes_by_zone(kubectl: Kubectl, zones: tuple[str, ...]) -> dict[str, list[str]]:
    """Schedulable nodes of each zone, sorted by name."""
    ready = schedulable_zones(kubectl)
    found: dict[str, list[str]] = {zone: [] for zone in zones}
    for node in kubectl.get("nodes")["items"]:
        meta = node["metadata"]
        zone = meta.get("labels", {}).get(ZONE_KEY)
        if zone in found and zone in ready and not node.get("spec", {}).get("unschedulable"):
            found[zone].append(meta["name"])
    return {zone: sorted(names) for zone, names in found.items()}


def local_volume(
    cluster: Cluster,
    name: str,
    *,
    node: str = "",
    claim: str,
    expressions: list[Obj] | None = None,
) -> Obj:
    """A local PersistentVolume on ``node`` (pinned by hostname), or on the nodes
    ``expressions`` select, pre-bound to ``claim``."""
    wanted = expressions or [{"key": HOSTNAME, "operator": "In", "values": [node]}]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {RUN_LABEL: cluster.run}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "local": {"path": "/mnt/stszone-e2e"},
            "claimRef": {"namespace": cluster.namespace, "name": claim},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": wanted}]}},
        },
    }


def with_data_claim(sts: Obj) -> Obj:
    """``sts`` with a volumeClaimTemplate ``data`` (no class: binds to a pre-bound volume)."""
    sts["spec"]["volumeClaimTemplates"] = [
        {
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    ]
    return sts


def delete_volume(kubectl: Kubectl, name: str) -> None:
    """Delete the test's PersistentVolume and wait (bounded) until it is gone."""
    kubectl.delete("pv", name)
    wait_for(f"volume {name} to be deleted", lambda: kubectl.gone("pv", name), timeout=180)
