"""A Strimzi broker whose node is deleted, on a real API server, the operator played as in
``test_strimzi.py``: the broker holds no zone, in the scale-down guard and in the audit.

Pool ``gone`` of 4 brokers, IDs 10-13 (its ``strimzi.io/next-node-ids``), its claims placed by
stszone in zones a b c a. Broker 10's pod is bound (``spec.nodeName``) to a Node this test
creates in zone a; then a volume in zone b, pre-bound to its claim, puts its data in zone b (a
restored volume): broker 10 runs away from its data. Broker 13, the highest, is zone a's other
broker. While the node exists, scaling the pool 4 -> 3 (which removes broker 13) is allowed:
broker 10 holds zone a. Once the node is deleted, PodGC deletes broker 10's pod and the
StrimziPodSet controller re-creates it with its data, in zone b: the same scale is refused
(zone a would be lost), and ``stszone audit`` marks broker 10 going, while its pod is still
there.

The node (tainted, so nothing else is scheduled to it), the pool, its StrimziPodSet, pods,
claims and the volume are deleted afterwards, however the test ends.
"""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import ExitStack

import pytest

from tests.e2e.kube import HOSTNAME, RUN_LABEL, ZONE_KEY, Cluster, Kubectl, KubectlError, wait_for
from tests.e2e.strimzilab import (
    KAFKA,
    broker_claim,
    broker_pod,
    kafka_nodepool,
    pool_podset,
    restored_volume,
    view_holds_every,
    wait_for_pools_in_view,
    write_pool_status,
)
from tests.rendered import ROOT

NAME = "gone"
#: Node IDs no other pool of the cluster holds (test_strimzi's has 0-5): the operator takes
#: the pool's ``strimzi.io/next-node-ids``.
IDS = (10, 11, 12, 13)


def _scale_refusal(kubectl: Kubectl, *dry_run: str) -> str:
    """The webhook's refusal of scaling pool ``gone`` to 3, or "" when it is allowed."""
    try:
        kubectl.run("scale", "kafkanodepool", NAME, "--replicas=3", *dry_run)
    except KubectlError as err:
        return err.stderr
    return ""


def _clean(kubectl: Kubectl, broker: str) -> None:
    """Delete the pool and what the played operator made; the pod on the deleted node first
    and at once, as no kubelet finishes its deletion."""
    with ExitStack() as each:
        for kind, name in (("kafkanodepool", NAME), ("strimzipodset", f"{KAFKA}-{NAME}")):
            each.callback(kubectl.delete, kind, name)
        pool = f"strimzi.io/pool-name={NAME}"
        each.callback(kubectl.run, "delete", "pods,pvc", "-l", pool, "--wait=false")
        each.callback(
            kubectl.run,
            "delete",
            "pod",
            broker,
            "--ignore-not-found",
            "--grace-period=0",
            "--force",
        )


def test_a_broker_on_a_deleted_node_holds_no_zone(
    strimzi_crds: None, cluster: Cluster, request: pytest.FixtureRequest
) -> None:
    kubectl = cluster.kubectl
    everywhere = Kubectl(kubectl.binary, kubectl.kubeconfig)
    wait_for_pools_in_view(request)
    a, b, c = cluster.zones[:3]
    node, broker = f"stszone-e2e-{cluster.run}-{NAME}", f"{KAFKA}-{NAME}-{IDS[0]}"
    with ExitStack() as stack:
        stack.callback(everywhere.delete, "node", node)
        everywhere.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": node,
                    "labels": {ZONE_KEY: a, HOSTNAME: node, RUN_LABEL: cluster.run},
                },
                "spec": {"taints": [{"key": "e2e.stszone.io/gone", "effect": "NoSchedule"}]},
            }
        )
        stack.callback(_clean, kubectl, broker)
        pool = kafka_nodepool(cluster, 4, NAME)
        pool["metadata"]["annotations"]["strimzi.io/next-node-ids"] = f"[{IDS[0]}-{IDS[-1]}]"
        pool = kubectl.create(pool)

        def pool_seen() -> bool:  # a dry-run claim gets a zone once the pool is in the view
            probe = kubectl.create(broker_claim(cluster, pool, IDS[0], NAME), dry_run=True)
            return "stszone.io/zone" in probe["metadata"].get("annotations", {})

        wait_for("the pool to reach the webhook's view", pool_seen, timeout=20)
        claims: dict[int, str] = {}
        for node_id in IDS:  # each placed with the ones before it in the view
            created = kubectl.create(broker_claim(cluster, pool, node_id, NAME))
            claims[node_id] = created["metadata"]["annotations"]["stszone.io/zone"]
            wait_for("the view to hold the claim", lambda: view_holds_every(cluster), timeout=20)
        assert claims == dict(zip(IDS, (a, b, c, a), strict=True))
        write_pool_status(kubectl, list(IDS), NAME)
        podset = kubectl.create(pool_podset(cluster, NAME))
        for node_id in IDS:
            pod = broker_pod(cluster, podset, node_id, NAME)
            if node_id == IDS[0]:
                pod["spec"]["nodeName"] = node
            kubectl.create(pod)
        pv = restored_volume(cluster, IDS[0], b, NAME)
        stack.callback(everywhere.delete, "persistentvolume", pv["metadata"]["name"])
        everywhere.create(pv)
        wait_for(
            "the view to hold the volume",
            lambda: view_holds_every(cluster, "pv", "volumes"),
            timeout=20,
        )
        # With the volume in the view, only broker 10's pod on the node keeps zone a held.
        wait_for(
            "a dry-run scale to 3 to be allowed while broker 10's node exists",
            lambda: _scale_refusal(kubectl, "--dry-run=server") == "",
            timeout=20,
        )

        everywhere.delete("node", node)
        lost = f"would drop zone {a} ({KAFKA}-{NAME}-{IDS[-1]} is its only broker)"
        wait_for(
            f"the guard to refuse losing zone {a} once {node} is deleted",
            lambda: lost in _scale_refusal(kubectl, "--dry-run=server"),
            timeout=20,
        )
        refusal = _scale_refusal(kubectl)
        assert lost in refusal, refusal
        assert kubectl.get("kafkanodepool", NAME)["spec"]["replicas"] == 4
        # Its pod is still there, bound to the deleted node (PodGC waits before deleting it).
        assert kubectl.get("pod", broker)["spec"]["nodeName"] == node

        command = [sys.executable, "-m", "webhook", "audit", "-o", "json"]
        command += ["--kubeconfig", kubectl.kubeconfig, "-n", cluster.namespace]
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode in (0, 1), done.stderr
        pools = {p["name"]: p for p in json.loads(done.stdout)["kafkaNodePools"]}
        row = next(r for r in pools[NAME]["brokers"] if r["nodeId"] == IDS[0])
        assert (row["dataZone"], row["node"], row["zone"], row["status"]) == (
            b,
            node,
            None,
            "going",
        ), row
