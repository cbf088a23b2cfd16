"""OpenKruise Advanced StatefulSets on a real control plane, the test playing kruise-manager.

Skipped unless ``STSZONE_E2E_KUBECONFIG`` names a cluster; see ``conftest.py`` for the knobs
and for what is created and always deleted. The CRD (``statefulsets.apps.kruise.io``) is
applied from ``$STSZONE_KRUISE_CRDS`` (else the lab's ``crds/openkruise.yaml``,
``kube.lab_file``) when the cluster does not serve it, and deleted afterwards only then. No
Kruise controller runs: the test creates the pods of the live ordinals as its source does
(``stateful_set_utils.go``: owner ``apps.kruise.io/v1beta1`` StatefulSet with the set's uid,
``controller: true``, labels ``statefulset.kubernetes.io/pod-name`` and
``apps.kubernetes.io/pod-index``), and the lab's scheduler binds them where stszone's node
affinity says.

With zones Z0, Z1, Z2 and ``replicas: 4, reserveOrdinals: [1]`` the live ordinals are 0, 2, 3,
4, ranks 0..3, so stszone puts them in Z0, Z1, Z2, Z0 (``ordinal mod 3`` would leave Z1 out of
the first three).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from tests.e2e.kube import (
    RUN_LABEL,
    ZONE_KEY,
    Cluster,
    Kubectl,
    KubectlError,
    Obj,
    applied_crds,
    crd_file,
    pod_template,
    wait_for,
)

#: ``$STSZONE_KRUISE_CRDS``, else the lab scripts' ``crds/openkruise.yaml``.
CRD_FILE = crd_file("STSZONE_KRUISE_CRDS", "openkruise.yaml")
CRD = "statefulsets.apps.kruise.io"
RESOURCE = "statefulsets.apps.kruise.io"


@pytest.fixture(scope="module")
def kruise_crd(cluster: Cluster) -> Iterator[None]:
    """The Advanced StatefulSet CRD, applied for this module when the cluster lacks it."""
    kubectl = Kubectl(cluster.kubectl.binary, cluster.kubectl.kubeconfig)
    if not kubectl.gone("crd", CRD):
        yield
        return
    path = CRD_FILE
    if not path.is_file():
        pytest.fail(f"the cluster lacks {CRD} and {path} does not exist; set STSZONE_KRUISE_CRDS")
    with applied_crds(kubectl, path):
        yield


def advanced_statefulset(cluster: Cluster, name: str, *, replicas: int, reserve: list[int]) -> Obj:
    return {
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "labels": {RUN_LABEL: cluster.run}},
        "spec": {
            "serviceName": name,
            "replicas": replicas,
            "reserveOrdinals": reserve,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": pod_template(cluster.image),
            },
        },
    }


def kruise_pod(owner: Obj, ordinal: int, *, image: str, run: str) -> Obj:
    """Ordinal ``ordinal``'s pod as kruise-manager v1.8.4 creates it."""
    name = owner["metadata"]["name"]
    pod_name = f"{name}-{ordinal}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "labels": {
                "app": name,
                RUN_LABEL: run,
                "statefulset.kubernetes.io/pod-name": pod_name,
                "apps.kubernetes.io/pod-index": str(ordinal),
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps.kruise.io/v1beta1",
                    "kind": "StatefulSet",
                    "name": name,
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {**pod_template(image), "hostname": pod_name, "subdomain": name},
    }


def _node_zones(kubectl: Kubectl) -> dict[str, str]:
    nodes = kubectl.get("nodes")["items"]
    return {n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE_KEY, "") for n in nodes}


def _patch(kubectl: Kubectl, name: str, reserve: list[int], *, dry_run: bool) -> str | None:
    """The webhook's refusal of a reserveOrdinals patch, or None when it is allowed."""
    body = json.dumps({"spec": {"reserveOrdinals": reserve}})
    args = ["patch", RESOURCE, name, "--type=merge", "-p", body]
    try:
        kubectl.run(*args, *(["--dry-run=server"] if dry_run else []))
    except KubectlError as err:
        return err.stderr
    return None


def test_reserve_ordinals_cover_every_zone_and_are_guarded(
    cluster: Cluster, kruise_crd: None
) -> None:
    """Live 0, 2, 3, 4 land in Z0, Z1, Z2, Z0; reserving 3 (Z2's only member) is refused,
    naming it and the zone; reserving 4 (Z0 keeps ordinal 0) is allowed."""
    if not cluster.schedulable or len(cluster.zones) != 3:
        pytest.skip(f"needs three zones with schedulable nodes, has {', '.join(cluster.zones)}")
    kubectl, zones, name = cluster.kubectl, cluster.zones, "kweb"
    live = (0, 2, 3, 4)
    with ExitStack() as stack:
        stack.callback(kubectl.run, "delete", RESOURCE, name, "--ignore-not-found", "--wait=false")
        owner = kubectl.create(advanced_statefulset(cluster, name, replicas=4, reserve=[1]))
        # The set must reach stszone's view before its pods are placed: until it has, a pod
        # is refused for retry, as kruise-manager retries its creates.
        for ordinal in live:
            pod = kruise_pod(owner, ordinal, image=cluster.image, run=cluster.run)
            stack.callback(kubectl.run, "delete", "pod", pod["metadata"]["name"], "--wait=false")
            wait_for(
                f"{name}-{ordinal} created",
                lambda pod=pod: kubectl.create(pod),  # type: ignore[misc]
                timeout=cluster.timeout,
                interval=2.0,
            )
        node_zones = _node_zones(kubectl)

        def bound() -> dict[int, str] | None:
            found = {}
            for ordinal in live:
                node = kubectl.get("pod", f"{name}-{ordinal}")["spec"].get("nodeName")
                if not node:
                    return None
                found[ordinal] = node_zones[node]
            return found

        where = wait_for("the members bound", bound, timeout=cluster.timeout)
        assert where == {0: zones[0], 2: zones[1], 3: zones[2], 4: zones[0]}, where
        assert set(where.values()) == set(zones)

        wanted = f"would drop zone {zones[2]} (ordinal 3 is its only pod)"

        def refused() -> str | None:
            answer = _patch(kubectl, name, [1, 3], dry_run=True) or ""
            return answer if wanted in answer else None

        message = wait_for("the guard to see every member", refused, timeout=cluster.timeout)
        assert "reserveOrdinals [1] -> [1, 3]" in message, message
        assert "stszone.io/allow-zone-loss" in message
        denied = _patch(kubectl, name, [1, 3], dry_run=False)
        assert denied is not None and wanted in denied, denied
        assert kubectl.get(RESOURCE, name)["spec"]["reserveOrdinals"] == [1]

        assert _patch(kubectl, name, [1, 4], dry_run=False) is None
        assert kubectl.get(RESOURCE, name)["spec"]["reserveOrdinals"] == [1, 4]
