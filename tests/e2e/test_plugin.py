"""``kubectl stszone`` with the real kubectl: kubectl finds ``kubectl-stszone`` on PATH, and the
plugin aims at the current context of ``$KUBECONFIG`` and its namespace, as kubectl does."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from tests.e2e.kube import RUN_LABEL, Cluster, Obj, owned_pod, wait_for, workload

#: Installed beside this interpreter by `pip install -e .` ([project.scripts]).
PLUGIN = Path(sys.executable).parent / "kubectl-stszone"


@pytest.fixture(scope="module")
def kubeconfig(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cluster's kubeconfig with a current context whose namespace is the test's."""
    config = yaml.safe_load(Path(cluster.kubectl.kubeconfig).read_text())
    current = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    config["contexts"].append(
        {"name": "e2e", "context": {**current["context"], "namespace": cluster.namespace}}
    )
    config["current-context"] = "e2e"
    path = tmp_path_factory.mktemp("plugin") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def kubectl_stszone(
    cluster: Cluster, kubeconfig: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """``kubectl stszone ARGS`` with only $KUBECONFIG set (no flag names the cluster)."""
    if not PLUGIN.is_file():
        pytest.fail(f"{PLUGIN} is missing: install the package (pip install -e .)")
    path = os.pathsep.join(
        [str(PLUGIN.parent), str(Path(cluster.kubectl.binary).parent), os.environ["PATH"]]
    )
    environ = {"PATH": path, "KUBECONFIG": str(kubeconfig), "HOME": os.environ.get("HOME", "/")}
    return subprocess.run(
        [cluster.kubectl.binary, "stszone", *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def placed(cluster: Cluster) -> Obj:
    """A three-replica StatefulSet placed by stszone, every pod scheduled."""
    name = "plug"
    cluster.kubectl.create(
        workload(
            "StatefulSet", name, image=cluster.image, replicas=3, labels={RUN_LABEL: cluster.run}
        )
    )

    def scheduled() -> bool:
        pods = cluster.kubectl.get("pods", "-l", f"app={name}")["items"]
        return len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods)

    if not cluster.schedulable:
        pytest.skip(f"zones {', '.join(cluster.zones)} do not all have schedulable nodes")
    wait_for(f"3 scheduled pods of {name}", scheduled, timeout=cluster.timeout)
    return cluster.kubectl.get("statefulset", name)


def test_kubectl_stszone_audit_looks_at_the_context_namespace(
    cluster: Cluster, kubeconfig: Path, placed: Obj
) -> None:
    """`kubectl stszone audit` lists the sets of the context's namespace, every pod in place."""
    done = kubectl_stszone(cluster, kubeconfig, "audit", "-o", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    sets = {(s["namespace"], s["name"]): s for s in report["statefulsets"]}
    assert {ns for ns, _ in sets} == {cluster.namespace}
    plug = sets[(cluster.namespace, "plug")]
    assert [o["status"] for o in plug["ordinals"]] == ["ok", "ok", "ok"]
    assert plug["zones"] == list(cluster.zones)
    other = kubectl_stszone(cluster, kubeconfig, "audit", "-o", "json", "-n", "kube-system")
    assert json.loads(other.stdout)["statefulsets"] == [], other.stderr


def _review(cluster: Cluster, owner: Obj, ordinal: int) -> Obj:
    pod = owned_pod(owner, ordinal, image=cluster.image, labels={"app": owner["metadata"]["name"]})
    pod["metadata"]["namespace"] = cluster.namespace
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": cluster.namespace,
        "operation": "CREATE",
        "userInfo": {"username": "e2e"},
        "object": pod,
        "dryRun": True,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def test_kubectl_stszone_review_answers_from_the_context_cluster(
    cluster: Cluster, kubeconfig: Path, placed: Obj, tmp_path: Path
) -> None:
    """The set's zone list lives in the cluster: the plugin's review finds it; `stszone review`
    with the same $KUBECONFIG stays offline and knows no zones."""
    ordinal = 4
    path = tmp_path / "review.json"
    path.write_text(json.dumps(_review(cluster, placed, ordinal)))
    done = kubectl_stszone(cluster, kubeconfig, "review", str(path))
    assert done.returncode == 0, done.stderr
    response = json.loads(done.stdout)["response"]
    assert response["allowed"] is True, response
    patch = json.loads(base64.b64decode(response["patch"]))
    zones = [op["value"] for op in patch if op["path"] == "/metadata/annotations"]
    assert zones == [{"stszone.io/zone": cluster.zones[ordinal % len(cluster.zones)]}], patch
    offline = subprocess.run(
        [sys.executable, "-m", "webhook", "review", str(path)],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert json.loads(offline.stdout)["response"]["status"]["reason"] == "NoZones", offline.stdout


def test_kubectl_stszone_explain_prints_the_decision(
    cluster: Cluster, kubeconfig: Path, placed: Obj
) -> None:
    """`kubectl stszone explain pod/plug-1`: its set and ordinal, its rule zone, the node it
    runs on in that zone, and the guard counting it there; `sts/plug` answers each size."""
    zone = cluster.zones[1 % len(cluster.zones)]
    done = kubectl_stszone(cluster, kubeconfig, "explain", "pod/plug-1")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(
        f"Pod {cluster.namespace}/plug-1: ordinal 1 of StatefulSet {cluster.namespace}/plug"
    ), done.stdout
    assert f"  rule zone:       {zone}" in lines, done.stdout
    assert f"  guard:           holds {zone} for the scale-down guard" in lines, done.stdout
    node = cluster.kubectl.get("pod", "plug-1")["spec"]["nodeName"]
    assert f"  runs on:         node {node}, zone {zone}, Ready" in lines, done.stdout
    sizes = kubectl_stszone(cluster, kubeconfig, "explain", "sts/plug", "-o", "json")
    assert sizes.returncode == 0, sizes.stderr
    answers = [(s["replicas"], s["allowed"]) for s in json.loads(sizes.stdout)["sizes"]]
    keeps = len(cluster.zones)  # one pod per zone: any smaller count but 0 drops a zone
    assert answers == [(n, n >= keeps or n == 0) for n in range(2, -1, -1)], sizes.stdout
