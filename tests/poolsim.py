"""A Strimzi cluster played as its operator plays it, through stszone's webhooks, for the tests.

The objects come from the recorded fixtures (``tests/fixtures/strimzi``): the operator's own
claims and pods, renamed for each node ID. Node IDs come from :mod:`tests.strimzi_ref` (the
operator's assignor written again from its Java), never from stszone's code.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from tests import builders as b
from tests import strimzi_ref as ref
from webhook.config import Defaults
from webhook.model.extract import claim_info, node_info
from webhook.model.nodepools import nodepool_info, poolpod_info
from webhook.model.store import Store
from webhook.wire import review

FIXTURES = Path(__file__).parent / "fixtures" / "strimzi"
ZONES = ("zone-a", "zone-b", "zone-c")
DEFAULTS = Defaults()
JSON = dict[str, Any]


def recorded(name: str) -> JSON:
    """The request object of a recorded review, e.g. ``recorded("023-all-Pod-CREATE-...")``."""
    found = sorted((FIXTURES / "admission").glob(f"{name}*.json"))
    body: JSON = json.loads(found[0].read_text())
    return body


def objects(name: str) -> list[JSON]:
    items: list[JSON] = json.loads((FIXTURES / "objects" / name).read_text())["items"]
    return items


def store(zones: tuple[str, ...] = ZONES, *, nodes_per_zone: int = 2) -> Store:
    """A complete view of nodes in ``zones`` and no workload."""
    view = Store()
    view.replace(
        "nodes",
        [node_info(b.node(f"n-{z}-{i}", z)) for z in zones for i in range(nodes_per_zone)],
    )
    for table in ("volumes", "claims", "statefulsets", "pods", "nodepools", "poolpods"):
        view.replace(table, ())
    return view


def pool_object(
    name: str,
    *,
    replicas: int,
    cluster: str = "my-cluster",
    jbod: bool = False,
    node_ids: list[int] | None = None,
    annotations: dict[str, str] | None = None,
    namespace: str = "kafka",
) -> JSON:
    """A KafkaNodePool as the fixtures have it (``broker`` JBOD, ``controller`` one claim)."""
    base = next(
        p
        for p in objects("kafkanodepools.v1.json")
        if p["metadata"]["name"] == ("broker" if jbod else "controller")
    )
    made = copy.deepcopy(base)
    made["apiVersion"], made["kind"] = "kafka.strimzi.io/v1", "KafkaNodePool"
    made["metadata"] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "labels": {"strimzi.io/cluster": cluster},
        "annotations": {"stszone.io/zones": ",".join(ZONES), **(annotations or {})},
    }
    made["spec"]["replicas"] = replicas
    made["status"] = {} if node_ids is None else {"nodeIds": sorted(node_ids)}
    return made


def _renamed(template: JSON, old: str, new: str) -> JSON:
    made: JSON = json.loads(json.dumps(template).replace(old, new))
    return made


def claim_object(cluster: str, pool: str, node_id: int, *, prefix: str = "data") -> JSON:
    """The operator's claim for one broker, from the recorded one of controller 6."""
    base = recorded("018-all-PersistentVolumeClaim")["request"]["object"]
    made = _renamed(base, "my-cluster-controller-6", f"{cluster}-{pool}-{node_id}")
    made["metadata"]["name"] = f"{prefix}-{cluster}-{pool}-{node_id}"
    made["metadata"]["labels"]["strimzi.io/pool-name"] = pool
    made["metadata"]["labels"]["strimzi.io/cluster"] = cluster
    made["metadata"]["uid"] = f"uid-claim-{cluster}-{pool}-{node_id}-{prefix}"
    return made


def pod_object(cluster: str, pool: str, node_id: int) -> JSON:
    """The StrimziPodSet controller's pod for one broker, from the recorded controller-6."""
    base = recorded("029-all-Pod-CREATE-my-cluster-controller-6")["request"]["object"]
    made = _renamed(base, "my-cluster-controller-6", f"{cluster}-{pool}-{node_id}")
    made["metadata"]["labels"]["strimzi.io/pool-name"] = pool
    made["metadata"]["labels"]["strimzi.io/cluster"] = cluster
    return made


_KINDS = {
    "Pod": ("", "v1", "pods", ""),
    "PersistentVolumeClaim": ("", "v1", "persistentvolumeclaims", ""),
    "KafkaNodePool": ("kafka.strimzi.io", "v1", "kafkanodepools", ""),
    "Scale": ("autoscaling", "v1", "kafkanodepools", "scale"),
}


def admit(
    view: Store,
    obj: JSON,
    *,
    endpoint: str = "chain",
    old: JSON | None = None,
    operation: str = "CREATE",
    dry_run: bool = False,
) -> review.Answer:
    """Send ``obj`` through the webhooks as the API server would."""
    parsed = review.from_dict(body(obj, old=old, operation=operation, dry_run=dry_run))
    if endpoint == "chain":
        return review.chain(parsed, store=view, defaults=DEFAULTS)
    which: Any = "validate" if endpoint == "validate" else "mutate"
    return review.answer(which, parsed, store=view, defaults=DEFAULTS)


def body(
    obj: JSON, *, old: JSON | None = None, operation: str = "CREATE", dry_run: bool = False
) -> JSON:
    """The AdmissionReview the API server sends for ``obj``."""
    kind = str(obj.get("kind", "Pod"))
    group, version, resource, sub = _KINDS[kind]
    meta = obj.get("metadata", {})
    request: JSON = {
        "uid": "3e2d2552-268c-4b70-8454-5c6fb1864ae1",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {
            "group": "kafka.strimzi.io" if sub else group,
            "version": version,
            "resource": resource,
        },
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", "kafka"),
        "operation": operation,
        "userInfo": {"username": "system:serviceaccount:kafka:strimzi-cluster-operator"},
        "object": obj,
        "oldObject": old,
        "dryRun": dry_run,
    }
    if sub:
        request["subResource"] = sub
    return {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": request}


def scale(name: str, *, old: int, new: int, namespace: str = "kafka") -> tuple[JSON, JSON]:
    """The Scale objects (new, old) of ``kubectl scale kafkanodepool``."""
    made = [
        {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": n},
            "status": {"replicas": old},
        }
        for n in (new, old)
    ]
    return made[0], made[1]


class Cluster:
    """One Kafka cluster's pools, played as the operator plays them, with stszone admitting."""

    def __init__(self, view: Store, *, cluster: str = "my-cluster") -> None:
        self.view, self.cluster = view, cluster
        self.pools: dict[str, ref.Pool] = {}

    def create_pool(self, name: str, replicas: int) -> None:
        answered = admit(self.view, pool_object(name, replicas=replicas, cluster=self.cluster))
        assert answered.allowed, answered.message
        self.view.put("nodepools", nodepool_info(answered.edited))
        self.pools[name] = ref.Pool(name, replicas)

    def set_pool(self, name: str, **changes: Any) -> None:
        pool = self.pools[name]
        self.pools[name] = ref.Pool(
            name,
            changes.get("replicas", pool.replicas),
            pool.node_ids,
            remove_node_ids=changes.get("remove_node_ids", pool.remove_node_ids),
        )

    def reconcile(self) -> dict[str, ref.Assignment]:
        """One pass of the operator: claims of new brokers first, then status, then pods."""
        ordered = [self.pools[n] for n in sorted(self.pools)]
        assignments = ref.assign(ordered)
        for name, done in assignments.items():
            for node_id in done.removed:
                self.view.delete("poolpods", ("kafka", f"{self.cluster}-{name}-{node_id}"))
                self.view.delete("claims", ("kafka", f"data-{self.cluster}-{name}-{node_id}"))
            for node_id in done.added:
                claim = claim_object(self.cluster, name, node_id)
                answered = admit(self.view, claim)
                assert answered.allowed, answered.message
                self.view.put("claims", claim_info(answered.edited))
        for pool in ref.reconcile(ordered):
            self.pools[pool.name] = pool
            info = self.view.nodepool("kafka", pool.name)
            assert info is not None
            status = {"nodeIds": list(pool.node_ids or ())}
            obj = pool_object(
                pool.name,
                replicas=pool.replicas,
                cluster=self.cluster,
                node_ids=list(pool.node_ids or ()),
            )
            obj["metadata"]["annotations"] = dict(info.annotations)
            if pool.remove_node_ids is not None:
                obj["metadata"]["annotations"]["strimzi.io/remove-node-ids"] = pool.remove_node_ids
            obj["status"] = status
            self.view.put("nodepools", nodepool_info(obj))
        for name, done in assignments.items():
            for node_id in done.added:
                self.create_pod(name, node_id)
        return assignments

    def create_pod(self, pool: str, node_id: int) -> JSON:
        answered = admit(self.view, pod_object(self.cluster, pool, node_id))
        assert answered.allowed, answered.message
        self.view.put("poolpods", poolpod_info(answered.edited))
        return answered.edited

    def zones(self, pool: str) -> dict[int, str]:
        """Where each broker of ``pool`` was pinned (its pod's ``stszone.io/zone``)."""
        return {
            p.node_id: p.zone
            for p in self.view.pool_pods("kafka", self.cluster, pool)
            if p.node_id is not None
        }


def stored_pool(**annotations: str) -> tuple[Store, JSON]:
    """Pool ``pool`` of cluster my-cluster reconciled to six brokers over zone-a, zone-b,
    zone-c, then stored with ``annotations`` beside its zone list (as if given while stszone
    did not judge it); and the pool object as stored."""
    view = store()
    cluster = Cluster(view)
    cluster.create_pool("pool", 6)
    cluster.reconcile()
    info = view.nodepool("kafka", "pool")
    assert info is not None
    made = pool_object(
        "pool", replicas=6, node_ids=list(info.node_ids or ()), annotations=annotations
    )
    view.put("nodepools", nodepool_info(made))
    return view, made
