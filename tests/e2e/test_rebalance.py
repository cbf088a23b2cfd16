"""`stszone rebalance --apply` against a real control plane: a set placed before stszone, with
its ordinals in the wrong zones, brought to zones[i mod k] one pod at a time.

The set is made while the namespace is opted out (the webhook leaves it alone) and every zone
but the one wanted for the next ordinal is cordoned; the nodes are uncordoned and the namespace
opted in again whatever happens. A watch of the set's pods runs through the rebalance and
counts the Ready ones after every event: never more than one may be missing. Skipped unless
``STSZONE_E2E_KUBECONFIG`` names a cluster (see conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.e2e.kube import (
    RUN_LABEL,
    ZONE_KEY,
    Cluster,
    Kubectl,
    KubectlError,
    Obj,
    pod_template,
    wait_for,
)
from tests.e2e.server import ROOT

ENABLED = "stszone.io/enabled"


def wrong_zones(zones: tuple[str, ...], count: int) -> list[str]:
    """Where each ordinal is put before stszone: with three zones the seed's story (the lowest
    three in two zones: a a b c c b, ordinal 0 alone in place), else one zone off."""
    if len(zones) == 3 and count == 6:
        a, b, c = zones
        return [a, a, b, c, c, b]
    return [zones[(i + 1) % len(zones)] for i in range(count)]


@contextmanager
def opted_out(kubectl: Kubectl, namespace: str) -> Iterator[None]:
    """The namespace without stszone.io/enabled (the webhook ignores it), then with it again."""
    kubectl.run("label", "namespace", namespace, f"{ENABLED}-")
    try:
        yield
    finally:
        kubectl.run("label", "namespace", namespace, f"{ENABLED}=true", "--overwrite")


@dataclass
class Cordons:
    """Cordons nodes to steer the scheduler; uncordons exactly those it cordoned, always."""

    kubectl: Kubectl
    zone_of: dict[str, str]
    mine: set[str] = field(default_factory=set)

    def only(self, zone: str) -> None:
        """Leave only ``zone``'s nodes schedulable (of those that were)."""
        for node, where in sorted(self.zone_of.items()):
            if where != zone and node not in self.mine:
                self.mine.add(node)
                self.kubectl.run("cordon", node)
            elif where == zone and node in self.mine:
                self.mine.discard(node)
                self.kubectl.run("uncordon", node)

    def release(self) -> None:
        """Uncordon each node it cordoned, whatever another one's uncordon did: a node left
        cordoned takes its zone's capacity from every later run."""
        with ExitStack() as each:
            for node in sorted(self.mine):
                each.callback(self.kubectl.run, "uncordon", node)
        self.mine.clear()


def schedulable_nodes(kubectl: Kubectl) -> dict[str, str]:
    """node -> zone of the nodes new pods may land on now (never touch the others)."""
    found = {}
    for node in kubectl.get("nodes")["items"]:
        labels = node["metadata"].get("labels", {})
        if not node.get("spec", {}).get("unschedulable") and ZONE_KEY in labels:
            found[node["metadata"]["name"]] = labels[ZONE_KEY]
    return found


def pod_zones(cluster: Cluster, app: str, zone_of: dict[str, str]) -> dict[int, str | None]:
    pods = cluster.kubectl.get("pods", "-l", f"app={app}")["items"]
    return {
        int(p["metadata"]["name"].rsplit("-", 1)[1]): zone_of.get(p["spec"].get("nodeName", ""))
        for p in pods
    }


def ready(pod: Obj) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    live = not pod["metadata"].get("deletionTimestamp")
    return live and any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


class ReadyWatch:
    """`kubectl get pods --watch`: after every event, how many of the set's pods are Ready."""

    def __init__(self, kubectl: Kubectl, app: str) -> None:
        command = [kubectl.binary, "--kubeconfig", kubectl.kubeconfig]
        command += ["--namespace", str(kubectl.namespace), "get", "pods", "-l", f"app={app}"]
        command += ["--watch", "--output-watch-events", "-o", "json"]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        self.pods: dict[str, bool] = {}
        self.counts: list[int] = []
        self.deleted = 0
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        decoder, buffer = json.JSONDecoder(), ""
        for line in self.process.stdout:
            buffer += line
            try:
                event, end = decoder.raw_decode(buffer.lstrip())
            except ValueError:
                continue  # an event spans several lines: read on
            buffer = buffer.lstrip()[end:]
            name = event["object"]["metadata"]["name"]
            if event["type"] == "DELETED":
                self.pods.pop(name, None)
                self.deleted += 1
            else:
                self.pods[name] = ready(event["object"])
            self.counts.append(sum(self.pods.values()))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self._thread.join(timeout=10)


def misplace(
    cluster: Cluster,
    name: str,
    wrong: list[str],
    *,
    zone_of: dict[str, str],
    claim_template: Obj | None = None,
) -> None:
    """Create StatefulSet ``name`` as the default scheduler would have left it before stszone:
    ordinal i in zone ``wrong[i]`` (the namespace opted out, every other zone cordoned)."""
    kubectl = cluster.kubectl
    spec: Obj = {
        "serviceName": name,
        "replicas": 0,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": pod_template(cluster.image)},
    }
    if claim_template is not None:
        spec["volumeClaimTemplates"] = [claim_template]
        mount = {"name": claim_template["metadata"]["name"], "mountPath": "/data"}
        spec["template"]["spec"]["containers"][0]["volumeMounts"] = [mount]
    kubectl.create(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {
                "name": name,
                "labels": {RUN_LABEL: cluster.run},
                "annotations": {"stszone.io/zones": ",".join(cluster.zones)},
            },
            "spec": spec,
        }
    )
    with opted_out(kubectl, cluster.namespace), ExitStack() as steer:
        cordons = Cordons(kubectl, zone_of)
        steer.callback(cordons.release)
        for ordinal, zone in enumerate(wrong):
            cordons.only(zone)
            kubectl.run("scale", "statefulset", name, f"--replicas={ordinal + 1}")

            def placed(o: int = ordinal, z: str = zone) -> bool:
                return pod_zones(cluster, name, zone_of).get(o) == z and ready(
                    kubectl.get("pod", f"{name}-{o}")
                )

            wait_for(f"{name}-{ordinal} Ready in {zone}", placed, timeout=cluster.timeout)


def rebalance(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m webhook rebalance` with the cluster's kubeconfig, as a person runs it."""
    command = [sys.executable, "-m", "webhook", "rebalance"]
    command += ["--kubeconfig", cluster.kubectl.kubeconfig, *args]
    return subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=cluster.timeout * 8,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
    )


def test_rebalance_moves_a_misplaced_set_to_its_zones_one_pod_at_a_time(cluster: Cluster) -> None:
    """Before: 6 -> 3 would drop a zone (the guard refuses). rebalance --apply converges to
    zones[i mod k] with never more than one of six pods missing; then 6 -> 3 is allowed."""
    if not cluster.schedulable:
        pytest.skip(f"zones {', '.join(cluster.zones)} do not all have schedulable nodes")
    kubectl, name, replicas = cluster.kubectl, "rb", 6
    zone_of = schedulable_nodes(kubectl)
    wrong = wrong_zones(cluster.zones, replicas)
    with ExitStack() as cleanup:
        cleanup.callback(kubectl.delete, "poddisruptionbudget", name)
        cleanup.callback(kubectl.delete, "statefulset", name)
        misplace(cluster, name, wrong, zone_of=zone_of)
        assert pod_zones(cluster, name, zone_of) == dict(enumerate(wrong))
        kubectl.create(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "labels": {RUN_LABEL: cluster.run}},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": name}}},
            }
        )
        scale_to_3 = ("patch", "statefulset", name, "--type=merge", "-p", '{"spec":{"replicas":3}}')

        def refused() -> bool:
            try:
                kubectl.run(*scale_to_3, "--dry-run=server")
            except KubectlError as err:
                return "stszone.io/allow-zone-loss" in err.stderr
            return False

        wait_for("the guard to refuse 6 -> 3 before the rebalance", refused, timeout=60)

        plan = rebalance(cluster, "--statefulset", f"{cluster.namespace}/{name}")
        assert plan.returncode == 0, plan.stdout + plan.stderr
        moves = sum(1 for o, z in enumerate(wrong) if z != cluster.zones[o % len(cluster.zones)])
        assert f"Dry run: {moves} move(s); 0 ordinal(s) stay outside" in plan.stdout

        watch = ReadyWatch(kubectl, name)
        cleanup.callback(watch.stop)
        wait_for("the watch to list the pods", lambda: len(watch.pods) == replicas, timeout=30)
        listed = len(watch.counts)  # from here on, every event is the rebalance's doing
        done = rebalance(
            cluster, "--statefulset", f"{cluster.namespace}/{name}", "--apply", "--timeout", "120"
        )
        watch.stop()
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Converged: every ordinal is in its rule zone." in done.stdout
        expected = {o: cluster.zones[o % len(cluster.zones)] for o in range(replicas)}
        assert pod_zones(cluster, name, zone_of) == expected
        assert watch.deleted >= moves  # the watch really saw the evictions
        assert min(watch.counts[listed:]) >= replicas - 1, watch.counts[listed:]

        def allowed() -> bool:
            kubectl.run(*scale_to_3, "--dry-run=server")  # a refusal is retried by wait_for
            return True

        wait_for("the guard to allow 6 -> 3 (its view follows the new pods)", allowed, timeout=60)
        kubectl.run("scale", "statefulset", name, "--replicas=3")
        assert kubectl.get("statefulset", name)["spec"]["replicas"] == 3


def _local_volume(cluster: Cluster, name: str, zone: str, storage_class: str) -> Obj:
    """A PersistentVolume pinned to ``zone`` (no provisioner: the lab has none)."""
    term = {"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": [zone]}]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {RUN_LABEL: cluster.run}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": storage_class,
            "local": {"path": f"/mnt/{name}"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
    }


def test_move_data_gives_a_pinned_ordinal_a_fresh_volume_in_its_zone(cluster: Cluster) -> None:
    """mv-0 runs in the second zone with its volume there. `--move-data --yes` deletes its claim
    before evicting it: the StatefulSet controller waits for the protected claim to go, makes
    a new one, and the new pod and volume land in the first zone; the old volume is Released."""
    if not cluster.schedulable:
        pytest.skip(f"zones {', '.join(cluster.zones)} do not all have schedulable nodes")
    kubectl, name, run = cluster.kubectl, "mv", cluster.run
    zone_of = schedulable_nodes(kubectl)
    zones = cluster.zones
    storage_class = f"stszone-e2e-{run}"
    selector = f"{RUN_LABEL}={run}"
    with ExitStack() as cleanup:
        # Reverse order of creation; deleting a bound volume waits (pv-protection) for its claim.
        cleanup.callback(kubectl.run, "delete", "storageclass", storage_class, "--ignore-not-found")
        cleanup.callback(
            kubectl.run, "delete", "pv", "-l", selector, "--wait=false", "--ignore-not-found"
        )
        cleanup.callback(kubectl.run, "delete", "pvc", "-l", f"app={name}", "--wait=false")
        cleanup.callback(kubectl.delete, "statefulset", name)
        kubectl.create(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": storage_class, "labels": {RUN_LABEL: run}},
                "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer",
            }
        )
        for zone in zones:
            for index in range(2):
                volume_name = f"stszone-e2e-{run}-{zone}-{index}"
                kubectl.create(_local_volume(cluster, volume_name, zone, storage_class))
        claim_template = {
            "metadata": {"name": "data", "labels": {"app": name}},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": storage_class,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
        wrong = [zones[1], *zones[1 : len(zones)]]  # ordinal 0 off by one, the rest in place
        misplace(cluster, name, wrong, zone_of=zone_of, claim_template=claim_template)
        old = kubectl.get("pvc", f"data-{name}-0")
        old_volume = old["spec"]["volumeName"]

        target = f"{cluster.namespace}/{name}"
        plan = rebalance(cluster, "--statefulset", target)
        assert plan.returncode == 1, plan.stdout + plan.stderr  # pinned: left without the flag
        assert "pinned by data  keep (needs --move-data)" in plan.stdout
        done = rebalance(
            cluster, "--statefulset", target, "--apply", "--move-data", "--yes", "--timeout", "120"
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert pod_zones(cluster, name, zone_of) == {o: zones[o] for o in range(len(wrong))}
        fresh = kubectl.get("pvc", f"data-{name}-0")
        assert fresh["metadata"]["uid"] != old["metadata"]["uid"]
        volume = kubectl.get("pv", fresh["spec"]["volumeName"])
        affinity = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]
        assert affinity["matchExpressions"][0]["values"] == [zones[0]]
        wait_for(
            f"the old volume {old_volume} to be Released",
            lambda: kubectl.get("pv", old_volume)["status"]["phase"] == "Released",
            timeout=60,
        )


def test_rebalance_component_passes_a_server_side_dry_run(cluster: Cluster, tmp_path: Path) -> None:
    """deploy/components/rebalance in an overlay of the test namespace: the API server accepts
    its ServiceAccount, ClusterRole and ClusterRoleBinding (dry run: nothing is created)."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    component = os.path.relpath(ROOT / "deploy" / "components" / "rebalance", overlay)
    (overlay / "kustomization.yaml").write_text(
        json.dumps({"namespace": cluster.namespace, "components": [component]})
    )
    rendered = cluster.kubectl.run("kustomize", str(overlay))
    accepted = cluster.kubectl.run("apply", "--dry-run=server", "-f", "-", stdin=rendered)
    assert accepted.splitlines() == [
        "serviceaccount/stszone-rebalance created (server dry run)",
        "clusterrole.rbac.authorization.k8s.io/stszone-rebalance created (server dry run)",
        "clusterrolebinding.rbac.authorization.k8s.io/stszone-rebalance created (server dry run)",
    ]
    assert f"namespace: {cluster.namespace}" in rendered
