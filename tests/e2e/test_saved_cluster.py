"""The saved cluster of ``stszone audit --help``, made by the real kubectl against a real API
server, with and without Strimzi's and OpenKruise's CRDs, and read back by ``stszone audit
--cluster FILE``.

kubectl refuses a whole ``get`` that names a resource type the server does not serve; the
saving command names KafkaNodePools and Advanced StatefulSets only where their CRDs are. The
CRDs are applied from the lab's ``crds/`` (``$STSZONE_STRIMZI_CRDS``, ``$STSZONE_KRUISE_CRDS``)
only where the cluster lacks them, and exactly those are deleted afterwards.
"""

from __future__ import annotations

import shlex
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.e2e.kube import (
    RUN_LABEL,
    Cluster,
    Kubectl,
    KubectlError,
    Obj,
    applied_crds,
    crd_file,
    pod_template,
)
from tests.helpexamples import help_examples, run_example

CRDS = {
    "kafkanodepools.kafka.strimzi.io": crd_file("STSZONE_STRIMZI_CRDS", "strimzi.yaml"),
    "statefulsets.apps.kruise.io": crd_file("STSZONE_KRUISE_CRDS", "openkruise.yaml"),
}


def _save_and_audit(cluster: Cluster, work: Path) -> tuple[str, str]:
    """The audit help's first two examples, run as written in ``work`` with the cluster's
    kubectl first on PATH and its kubeconfig as $KUBECONFIG: (the saved file, the audit)."""
    save, audit = help_examples("audit")[:2]
    assert save.endswith(" > cluster.yaml") and audit == "stszone audit --cluster cluster.yaml"
    kubectl = Path(cluster.kubectl.binary).parent
    env = (
        f"export PATH={shlex.quote(str(kubectl))}:$PATH "
        f"KUBECONFIG={shlex.quote(cluster.kubectl.kubeconfig)}\n"
    )
    saved = run_example(env + save, cwd=work)
    assert saved.returncode == 0 and saved.stderr == "", saved.stderr
    done = run_example(audit, cwd=work)
    # 1: a pod misplaced (or a traceback, which stderr shows); 2: the file cannot be read.
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    return (work / "cluster.yaml").read_text(), done.stdout


def _advanced_statefulset(cluster: Cluster) -> Obj:
    return {
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "StatefulSet",
        "metadata": {"name": "saved-web", "labels": {RUN_LABEL: cluster.run}},
        "spec": {
            "serviceName": "saved-web",
            "replicas": 1,
            "selector": {"matchLabels": {"app": "saved-web"}},
            "template": {
                "metadata": {"labels": {"app": "saved-web"}},
                "spec": pod_template(cluster.image),
            },
        },
    }


def _nodepool(cluster: Cluster) -> Obj:
    return {
        "apiVersion": "kafka.strimzi.io/v1beta2",
        "kind": "KafkaNodePool",
        "metadata": {
            "name": "saved-pool",
            "labels": {"strimzi.io/cluster": "saved", RUN_LABEL: cluster.run},
        },
        "spec": {
            "replicas": 0,
            "roles": ["broker"],
            "storage": {"type": "persistent-claim", "size": "1Gi", "deleteClaim": True},
        },
    }


def test_the_help_saves_a_cluster_with_or_without_the_operators_crds(
    cluster: Cluster, kubectl: Kubectl, tmp_path: Path
) -> None:
    """Saved as it is (a CRD the cluster lacks is not named: the command still works), and
    again once both CRDs are served and a KafkaNodePool and an Advanced StatefulSet exist in
    the test's opted-in namespace: the file holds them and the audit reports them. Naming a
    type the server does not serve fails the whole get, as the command must avoid."""
    with pytest.raises(KubectlError, match="doesn't have a resource type"):
        kubectl.run("get", "nodes,kafkanodepools.example.stszone.io", "-A", "-o", "name")
    lacking = [crd for crd in CRDS if kubectl.gone("crd", crd)]
    (tmp_path / "before").mkdir()
    saved, audited = _save_and_audit(cluster, tmp_path / "before")
    assert "kind: Node" in saved and f"name: {cluster.namespace}" in saved, saved[:2000]
    with ExitStack() as stack:
        for crd in lacking:
            stack.enter_context(applied_crds(kubectl, CRDS[crd]))
        made = [
            cluster.kubectl.create(_advanced_statefulset(cluster)),
            cluster.kubectl.create(_nodepool(cluster)),
        ]
        for obj in made:  # gone before their CRDs are
            stack.callback(
                cluster.kubectl.delete, f"{obj['kind']}.{obj['apiVersion'].split('/')[0]}",
                obj["metadata"]["name"],
            )  # fmt: skip
        (tmp_path / "after").mkdir()
        saved, audited = _save_and_audit(cluster, tmp_path / "after")
    ns = cluster.namespace
    assert f"Advanced StatefulSet {ns}/saved-web:" in audited, audited
    assert f"KafkaNodePool {ns}/saved-pool " in audited, audited
