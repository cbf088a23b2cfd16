"""The extender at the sizes kube-scheduler really sends on a large cluster.

With ``nodeCacheCapable: false`` kube-scheduler marshals every node that passed its own filters
(``pkg/scheduler/extender.go``, ``HTTPExtender.Filter``). It stops looking once it has found
``numFeasibleNodesToFind`` of them (``pkg/scheduler/schedule_one.go``): with the default
``percentageOfNodesToScore`` that is ``50 - n/125`` percent of ``n`` nodes, at least 5 % and 100
nodes: 420 of 1,000, 680 of 2,000. A kubelet reports up to 50 images
(``--node-status-max-images``), besides conditions, addresses, capacity and managedFields, so
a Node is 10-30 KB of JSON. kube-scheduler reads the body of a 200 only: any other status
reaches the pod's FailedScheduling Event as ``failed filter with extender at URL ..., code N``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tests import builders as b
from tests.conftest import ServeFactory
from tests.test_extender import SETTINGS, cluster
from webhook.config import MAX_BODY


def feasible_nodes_to_find(nodes: int) -> int:
    """kube-scheduler's ``numFeasibleNodesToFind`` with the default (adaptive) percentage."""
    if nodes < 100:
        return nodes
    percentage = max(50 - nodes // 125, 5)
    return max(nodes * percentage // 100, 100)


def kubelet_node(index: int) -> dict[str, Any]:
    """A Node as a kubelet reports it: 50 images, each under its digest and its tag."""
    node: dict[str, Any] = copy.deepcopy(b.fixture_api("nodes-list-limit2")["items"][0])
    name = f"worker-{index:05d}"
    zone = "zone-" + "abc"[index % 3]
    node["metadata"]["name"] = name
    node["metadata"]["labels"].update(
        {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}
    )
    node["status"]["images"] = [
        {
            "names": [
                f"registry.example.io/platform/service-{i:02d}@sha256:{i:064x}",
                f"registry.example.io/platform/service-{i:02d}:v1.{i}.0",
            ],
            "sizeBytes": 100_000_000 + i,
        }
        for i in range(50)
    ]
    return node


async def test_full_nodes_of_a_large_cluster_get_an_error_kube_scheduler_shows(
    serve: ServeFactory,
) -> None:
    """On 2,000 nodes kube-scheduler sends 680 full Nodes, over the 7 MiB body cap. The refusal
    must reach the pod's Event with its advice: in ``Error`` of a 200, the one body
    kube-scheduler reads (a 413's text is dropped: the Event says only ``code 413``)."""
    served = await serve(store=cluster(full=False), settings=SETTINGS)
    count = feasible_nodes_to_find(2000)
    assert count == 680
    items = [kubelet_node(i) for i in range(count)]
    pod = b.sts_pod(ordinal=0, annotations={"stszone.io/zone": "zone-a"})
    body = json.dumps(
        {"Pod": pod, "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}
    ).encode()
    assert len(body) / count > 10_000 and len(body) > MAX_BODY
    status, text = await served.post_raw("/extender/filter", body)
    assert status == 200, text
    result = json.loads(text)
    assert "nodeCacheCapable: true" in result["Error"]
    assert result["Nodes"] is None and result["NodeNames"] is None
