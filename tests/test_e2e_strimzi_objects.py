"""The objects the Strimzi e2e tests create as the Strimzi operator would
(``tests/e2e/strimzilab.py``), checked without a cluster: each names its Strimzi kinds at a
version Strimzi 1.0 serves.

Strimzi 1.0 removed ``v1beta2`` from its CRDs (strimzi-kafka-operator
``packaging/install/cluster-operator/042-Crd-strimzipodset.yaml`` and
``045-Crd-kafkanodepool.yaml`` list ``v1`` alone), so an e2e run against its CRDs
(``$STSZONE_STRIMZI_CRDS``) cannot create a ``core.strimzi.io/v1beta2`` StrimziPodSet, and the
operator's own ownerReferences name ``v1``. The lab's CRDs (0.49.1) serve ``v1`` as well.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tests.e2e import strimzilab as played

#: What Strimzi 1.0's CRDs serve, per group.
SERVED_BY_1_0 = {"kafka.strimzi.io": {"v1"}, "core.strimzi.io": {"v1"}}


def _served(api_version: str) -> bool:
    group, _, version = api_version.rpartition("/")
    return version in SERVED_BY_1_0.get(group, {version})


def test_the_played_operator_names_strimzi_kinds_at_versions_strimzi_1_0_serves() -> None:
    cluster: Any = SimpleNamespace(run="run", namespace="ns", image="pause")
    pool = {**played.kafka_nodepool(cluster, 3), "metadata": {"uid": "uid-pool"}}
    podset = {**played.pool_podset(cluster), "metadata": {"uid": "uid-podset"}}
    made = [played.kafka_nodepool(cluster, 3), played.pool_podset(cluster)]
    named = [o["apiVersion"] for o in made]
    for child in (played.broker_claim(cluster, pool, 0), played.broker_pod(cluster, podset, 0)):
        named += [ref["apiVersion"] for ref in child["metadata"]["ownerReferences"]]
    assert len(named) == 4
    assert [v for v in named if not _served(v)] == []
