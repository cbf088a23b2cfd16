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
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.e2e.conftest import LOG_KEY
from tests.e2e.kube import (
    RUN_LABEL,
    Cluster,
    Kubectl,
    KubectlError,
    Obj,
    wait_for,
)
from tests.test_metrics import parse, value

KAFKA = "my-cluster"
POOL = "pool"
REMOVE = "strimzi.io/remove-node-ids"
#: The versions every Strimzi from 0.49 (the lab's CRDs serve v1 and v1beta2) to 1.x (v1 only)
#: serves; the operator names its objects at v1 from 1.0 on (ModelUtils.createOwnerReference).
POOL_API = "kafka.strimzi.io/v1"
PODSET_API = "core.strimzi.io/v1"


def _labels(run: str, pool_name: str = POOL) -> dict[str, str]:
    return {"strimzi.io/cluster": KAFKA, "strimzi.io/pool-name": pool_name, RUN_LABEL: run}


def _pv(cluster: Cluster, node_id: int, zone: str, pool_name: str = POOL) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{cluster.namespace}-{node_id}", "labels": {RUN_LABEL: cluster.run}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "restored",
            "hostPath": {"path": f"/tmp/{cluster.namespace}-{node_id}"},
            "claimRef": {"namespace": cluster.namespace, "name": _claim_name(node_id, pool_name)},
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


def _claim_name(node_id: int, pool_name: str = POOL) -> str:
    return f"data-{KAFKA}-{pool_name}-{node_id}"


def _claim(cluster: Cluster, pool: Obj, node_id: int, pool_name: str = POOL) -> Obj:
    """As ``PersistentVolumeClaimUtils`` makes it: labels, owner the pool (not controller)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": _claim_name(node_id, pool_name),
            "labels": _labels(cluster.run, pool_name),
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


def _podset(cluster: Cluster, pool_name: str = POOL) -> Obj:
    """The pool's StrimziPodSet, as ``KafkaCluster.generatePodSets`` makes it (pods left out)."""
    return {
        "apiVersion": PODSET_API,
        "kind": "StrimziPodSet",
        "metadata": {"name": f"{KAFKA}-{pool_name}", "labels": _labels(cluster.run, pool_name)},
        "spec": {"selector": {"matchLabels": _labels(cluster.run, pool_name)}, "pods": []},
    }


def _pod(cluster: Cluster, podset: Obj, node_id: int, pool_name: str = POOL) -> Obj:
    """As the StrimziPodSet controller makes it: owner the StrimziPodSet (controller)."""
    name = f"{KAFKA}-{pool_name}-{node_id}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {**_labels(cluster.run, pool_name), "strimzi.io/pod-name": name},
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
                    "persistentVolumeClaim": {"claimName": _claim_name(node_id, pool_name)},
                }
            ],
        },
    }


def _nodepool(cluster: Cluster, replicas: int, pool_name: str = POOL) -> Obj:
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


def _status(kubectl: Kubectl, node_ids: list[int], pool_name: str = POOL) -> None:
    """What the operator writes after a pass (``KafkaPool.generateNodePoolStatus``)."""
    body = json.dumps({"status": {"nodeIds": node_ids, "replicas": len(node_ids)}})
    kubectl.run(
        "patch", "kafkanodepool", pool_name, "--subresource=status", "--type=merge", "-p", body
    )


def _remove_broker(kubectl: Kubectl, node_id: int) -> None:
    kubectl.run("delete", "pod", f"{KAFKA}-{POOL}-{node_id}", "--wait=false")
    kubectl.run("delete", "pvc", _claim_name(node_id), "--wait=false")


def _view_holds_every(cluster: Cluster, kind: str = "pvc", resource: str = "claims") -> bool:
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


def _wait_for_pools_in_view(request: pytest.FixtureRequest) -> None:
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


def test_a_pool_is_placed_balanced_guarded_and_scaled_down_by_zone(
    strimzi_crds: None, cluster: Cluster, pvs: list[str], request: pytest.FixtureRequest
) -> None:
    kubectl = cluster.kubectl
    _wait_for_pools_in_view(request)
    a, b, c = cluster.zones[:3]
    for node_id, zone in ((1, a), (3, b)):
        pv = _pv(cluster, node_id, zone)
        pvs.append(pv["metadata"]["name"])
        kubectl.create(pv)

    pool = kubectl.create(_nodepool(cluster, 6))
    assert pool["metadata"]["annotations"]["stszone.io/zones"] == ",".join(cluster.zones)

    def pool_seen() -> bool:  # a dry-run claim gets a zone once the pool is in the view
        probe = kubectl.create(_claim(cluster, pool, 0), dry_run=True)
        return "stszone.io/zone" in probe["metadata"].get("annotations", {})

    wait_for("the pool to reach the webhook's view", pool_seen, timeout=20)
    claims: dict[int, str] = {}
    for node_id in range(6):  # PVC-first, as KafkaReconciler.pvcs()
        made = kubectl.create(_claim(cluster, pool, node_id))
        zone = made["metadata"]["annotations"]["stszone.io/zone"]
        claims[node_id] = zone
        if node_id in (1, 3):  # pre-bound to a restored volume: its class is kept
            assert made["spec"]["storageClassName"] == "ssd"
        else:
            assert made["spec"]["storageClassName"] == f"ssd-{zone}"
        # The next claim's zone counts this one: it must be in the view first.
        wait_for(
            f"the view to hold claim {made['metadata']['name']}",
            lambda: _view_holds_every(cluster),
            timeout=20,
        )
    assert claims == {0: a, 1: a, 2: b, 3: b, 4: c, 5: c}
    _status(kubectl, list(range(6)))
    podset = kubectl.create(_podset(cluster))
    zones: dict[int, str] = {}
    for node_id in range(6):
        made = kubectl.create(_pod(cluster, podset, node_id))
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
    _status(kubectl, [0, 1, 2, 4])
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
    _status(kubectl, [0, 2, 4])
    left = {i: zones[i] for i in (0, 2, 4)}
    assert Counter(left.values()) == {a: 1, b: 1, c: 1}
