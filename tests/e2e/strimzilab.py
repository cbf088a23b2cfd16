"""What the Strimzi cluster operator creates, played on a real control plane by the Strimzi
end-to-end tests (test_strimzi.py, test_strimzi_going_claim.py, test_strimzi_gone_node.py).

- The objects, as the operator makes them (``tests/fixtures/strimzi/README.md``): a
  KafkaNodePool, each broker's claim (owned by the pool) and pod (owned by the pool's
  StrimziPodSet), the pool's ``status.nodeIds``, and PersistentVolumes pre-bound to a
  broker's claim in one zone (restored data).
- The waits on the webhook's view: until it lists KafkaNodePools, and until it holds every
  claim (or any kind) the API server lists.
- :func:`pvs`: the volumes a test makes, deleted afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.e2e.conftest import LOG_KEY
from tests.e2e.kube import RUN_LABEL, Cluster, Kubectl, Obj, wait_for
from tests.test_metrics import parse, value

KAFKA = "my-cluster"
POOL = "pool"
#: The versions every Strimzi from 0.49 (the lab's CRDs serve v1 and v1beta2) to 1.x (v1 only)
#: serves; the operator names its objects at v1 from 1.0 on (ModelUtils.createOwnerReference).
POOL_API = "kafka.strimzi.io/v1"
PODSET_API = "core.strimzi.io/v1"


def pool_labels(run: str, pool_name: str = POOL) -> dict[str, str]:
    return {"strimzi.io/cluster": KAFKA, "strimzi.io/pool-name": pool_name, RUN_LABEL: run}


def restored_volume(cluster: Cluster, node_id: int, zone: str, pool_name: str = POOL) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{cluster.namespace}-{node_id}", "labels": {RUN_LABEL: cluster.run}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "restored",
            "hostPath": {"path": f"/tmp/{cluster.namespace}-{node_id}"},
            "claimRef": {
                "namespace": cluster.namespace,
                "name": broker_claim_name(node_id, pool_name),
            },
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "topology.kubernetes.io/zone",
                                    "operator": "In",
                                    "values": [zone],
                                }
                            ]
                        }
                    ]
                }
            },
        },
    }


def broker_claim_name(node_id: int, pool_name: str = POOL) -> str:
    return f"data-{KAFKA}-{pool_name}-{node_id}"


def broker_claim(cluster: Cluster, pool: Obj, node_id: int, pool_name: str = POOL) -> Obj:
    """As ``PersistentVolumeClaimUtils`` makes it: labels, owner the pool (not controller)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": broker_claim_name(node_id, pool_name),
            "labels": pool_labels(cluster.run, pool_name),
            "annotations": {"strimzi.io/delete-claim": "true"},
            "ownerReferences": [
                {
                    "apiVersion": POOL_API,
                    "kind": "KafkaNodePool",
                    "name": pool_name,
                    "uid": pool["metadata"]["uid"],
                    "controller": False,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "ssd",
        },
    }


def pool_podset(cluster: Cluster, pool_name: str = POOL) -> Obj:
    """The pool's StrimziPodSet, as ``KafkaCluster.generatePodSets`` makes it (pods left out)."""
    return {
        "apiVersion": PODSET_API,
        "kind": "StrimziPodSet",
        "metadata": {"name": f"{KAFKA}-{pool_name}", "labels": pool_labels(cluster.run, pool_name)},
        "spec": {"selector": {"matchLabels": pool_labels(cluster.run, pool_name)}, "pods": []},
    }


def broker_pod(cluster: Cluster, podset: Obj, node_id: int, pool_name: str = POOL) -> Obj:
    """As the StrimziPodSet controller makes it: owner the StrimziPodSet (controller)."""
    name = f"{KAFKA}-{pool_name}-{node_id}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {**pool_labels(cluster.run, pool_name), "strimzi.io/pod-name": name},
            "ownerReferences": [
                {
                    "apiVersion": PODSET_API,
                    "kind": "StrimziPodSet",
                    "name": f"{KAFKA}-{pool_name}",
                    "uid": podset["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "hostname": name,
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "topology.kubernetes.io/zone", "operator": "Exists"}
                                ]
                            }
                        ]
                    }
                }
            },
            "containers": [{"name": "kafka", "image": cluster.image}],
            "volumes": [
                {
                    "name": "data",
                    "persistentVolumeClaim": {"claimName": broker_claim_name(node_id, pool_name)},
                }
            ],
        },
    }


def kafka_nodepool(cluster: Cluster, replicas: int, pool_name: str = POOL) -> Obj:
    return {
        "apiVersion": POOL_API,
        "kind": "KafkaNodePool",
        "metadata": {
            "name": pool_name,
            "labels": {"strimzi.io/cluster": KAFKA, RUN_LABEL: cluster.run},
            "annotations": {"stszone.io/storage-class-template": "ssd-{zone}"},
        },
        "spec": {
            "replicas": replicas,
            "roles": ["broker"],
            "storage": {"type": "persistent-claim", "size": "1Gi", "deleteClaim": True},
        },
    }


def write_pool_status(kubectl: Kubectl, node_ids: list[int], pool_name: str = POOL) -> None:
    """What the operator writes after a pass (``KafkaPool.generateNodePoolStatus``)."""
    body = json.dumps({"status": {"nodeIds": node_ids, "replicas": len(node_ids)}})
    kubectl.run(
        "patch", "kafkanodepool", pool_name, "--subresource=status", "--type=merge", "-p", body
    )


def view_holds_every(cluster: Cluster, kind: str = "pvc", resource: str = "claims") -> bool:
    """The webhook's view (its table ``resource``) holds as many objects of ``kind`` as the API
    server lists (every namespace).

    Listed first, read from the view after: the object the test just created is then one the
    view has had the whole list's round trip to receive. Read the other way round, the view
    was read moments after the create, and an object of someone else's deleted in between
    (a volume of an earlier test going, another user's claim) made the counts equal while
    the view still lacked the test's own."""
    everywhere = Kubectl(cluster.kubectl.binary, cluster.kubectl.kubeconfig)
    listed = len(everywhere.get(kind, "--all-namespaces")["items"])
    status, text = cluster.webhook.fetch("/metrics")
    assert status == 200, text
    return value(parse(text), "stszone_cache_objects", resource=resource) == listed


def _view_has(log: Path, what: str, *, since: int = 0) -> bool:
    return what in log.read_text(errors="replace")[since:]


def wait_for_pools_in_view(request: pytest.FixtureRequest) -> None:
    """The webhook's view lists KafkaNodePools once their CRD is served (looked for every 30 s)."""
    log = request.config.stash[LOG_KEY]
    wait_for(
        "the webhook's view to list KafkaNodePools",
        lambda: _view_has(log, "nodepools cache synced") or _view_has(log, "nodepools cache re-"),
        timeout=75,
    )


@pytest.fixture
def pvs(cluster: Cluster, kubectl: Kubectl) -> Iterator[list[str]]:
    """The names of the volumes a test makes (appended before each create), each deleted
    afterwards whatever another's deletion did."""
    made: list[str] = []
    with ExitStack() as each:
        yield made
        for name in made:
            each.callback(kubectl.delete, "persistentvolume", name)
