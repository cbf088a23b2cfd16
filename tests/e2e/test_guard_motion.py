"""Facts in motion on a real control plane: a Terminating pod, volumes, a moved start.

Skipped unless ``STSZONE_E2E_KUBECONFIG`` names a cluster; see ``conftest.py`` for the knobs
and for what is created and always deleted. Besides the test namespace, these tests

- restart the lab's fake kubelet with ``FAKE_KUBELET_FINALIZE_DELETES=0`` for a while, so that
  a deleted pod stays Terminating (as it does behind a finalizer or an unreachable kubelet),
  and always put the default kubelet back, force-deleting the pods left Terminating first.
  They need the lab's scripts (``$STSZONE_LAB_SCRIPTS``, else ``../shared/lab`` beside the
  repository) and its folder (``$STSZONE_LAB``, else ``~/stszone-lab``), and must run while
  holding the lab lock, as every run against the shared lab does;
- create local PersistentVolumes (cluster-scoped, labelled with the run) and delete them.

With k zones Z0..Zk-1, the rule puts ordinal i in Zi mod k.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from tests.e2e.kube import (
    LAB,
    RUN_LABEL,
    ZONE_KEY,
    Cluster,
    Kubectl,
    KubectlError,
    Obj,
    lab_file,
    owned_pod,
    place_on,
    skipped_statefulset,
    wait_for,
    workload,
)
from tests.e2e.pinning import delete_volume, local_volume, nodes_by_zone, with_data_claim

HANG = "FAKE_KUBELET_FINALIZE_DELETES"


def _fake_kubelet(
    kubelet: Path, action: str, *, hang: bool = False
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != HANG}
    env["LAB"] = str(LAB)
    if hang:
        env[HANG] = "0"
    return subprocess.run(
        [str(kubelet), action],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _force_delete_terminating(kubectl: Kubectl) -> None:
    """Finish off every pod left Terminating, as the default fake kubelet would (grace 0)."""
    for pod in kubectl.get("pods", "--all-namespaces")["items"]:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            kubectl.run(
                "delete",
                "pod",
                meta["name"],
                "-n",
                meta["namespace"],
                "--grace-period=0",
                "--force",
                "--ignore-not-found",
                "--wait=false",
            )


@contextmanager
def deletions_hang(everywhere: Kubectl) -> Iterator[None]:
    """The fake kubelet leaves deleted pods Terminating for the block; afterwards those pods
    are force-deleted and the kubelet runs as before (default settings), however it ends."""
    kubelet = lab_file("fake-kubelet.sh")
    if not kubelet.is_file():
        pytest.skip("no lab scripts (fake-kubelet.sh): set STSZONE_LAB_SCRIPTS to run this test")
    was_running = _fake_kubelet(kubelet, "status").returncode == 0
    if not was_running:
        pytest.skip("the lab's fake kubelet is not running: start it (fake-kubelet.sh start)")
    try:
        started = _fake_kubelet(kubelet, "restart", hang=True)
        assert started.returncode == 0, f"fake-kubelet.sh restart: {started.stdout}{started.stderr}"
        yield
    finally:
        try:
            _force_delete_terminating(everywhere)
        finally:
            back = _fake_kubelet(kubelet, "restart")
            assert back.returncode == 0, f"fake-kubelet.sh restart: {back.stdout}{back.stderr}"


@pytest.fixture
def everywhere(cluster: Cluster) -> Kubectl:
    """kubectl on the same cluster, not scoped to the test namespace."""
    return Kubectl(cluster.kubectl.binary, cluster.kubectl.kubeconfig)


def _dry_scale(kubectl: Kubectl, name: str, replicas: int) -> str | None:
    """The webhook's refusal of a server-side dry-run scale, or None when it is allowed."""
    try:
        kubectl.run("scale", "statefulset", name, f"--replicas={replicas}", "--dry-run=server")
    except KubectlError as err:
        return err.stderr
    return None


def _replicas(kubectl: Kubectl, name: str) -> int:
    count: int = kubectl.get("statefulset", name)["spec"]["replicas"]
    return count


def test_a_scale_down_relying_on_a_terminating_pod_is_refused(
    cluster: Cluster, everywhere: Kubectl
) -> None:
    """Placed before stszone: ordinal 0 in Zk-1 (its rule zone is Z0), 1..k-2 in their zones,
    k-1 in Z0, k in Zk-1. Scaling k+1 -> k removes ordinal k and keeps Zk-1 through ordinal 0.
    Once pod 0 is Terminating (its deletion hangs), its replacement is due in Z0, Zk-1 rests on
    ordinal k alone, and the same scale-down is refused, naming pod 0 and why."""
    if not cluster.schedulable or len(cluster.zones) < 2:
        pytest.skip(f"zones {', '.join(cluster.zones)} do not all have schedulable nodes")
    zones, k = cluster.zones, len(cluster.zones)
    nodes = nodes_by_zone(cluster.kubectl, zones)
    last, first = zones[-1], zones[0]
    homes = [nodes[last][0], *[nodes[zones[i]][0] for i in range(1, k - 1)], nodes[first][0]]
    homes.append(nodes[last][-1])
    name, kubectl = "going", cluster.kubectl
    with ExitStack() as stack:
        # The set goes at the end (other tests audit the namespace), after the kubelet is back.
        stack.callback(kubectl.delete, "statefulset", name)
        kubectl.create(skipped_statefulset(cluster, name))
        _relying_on_a_terminating_pod(cluster, everywhere, name=name, homes=homes)


def _relying_on_a_terminating_pod(
    cluster: Cluster, everywhere: Kubectl, *, name: str, homes: list[str]
) -> None:
    """Place ordinal i of ``name`` on ``homes[i]``, then check the guard before and while pod 0
    is Terminating."""
    kubectl, zones, k = cluster.kubectl, cluster.zones, len(cluster.zones)
    last, first = zones[-1], zones[0]
    for ordinal, node in enumerate(homes):
        place_on(cluster, name, ordinal, node)
    assert _dry_scale(kubectl, name, k) is None, "with pod 0 running, k replicas keep every zone"

    with deletions_hang(everywhere):
        kubectl.run("delete", "pod", f"{name}-0", "--wait=false")
        wanted = (
            f"would drop zone {last} (ordinal {k} is its only pod not going away; {name}-0 is "
            f"Terminating on node {homes[0]} in {last}; its replacement goes to {first})"
        )

        def refused() -> bool:
            pod = kubectl.get("pod", f"{name}-0")
            assert pod["metadata"].get("deletionTimestamp"), "pod 0 is Terminating"
            return wanted in (_dry_scale(kubectl, name, k) or "")

        wait_for("the guard to see pod 0 Terminating", refused, timeout=cluster.timeout)
        with pytest.raises(KubectlError) as denied:
            kubectl.run("scale", "statefulset", name, f"--replicas={k}")
        assert wanted in denied.value.stderr and "stszone.io/allow-zone-loss" in denied.value.stderr
        assert _replicas(kubectl, name) == k + 1
        assert kubectl.get("pod", f"{name}-0")["metadata"].get("deletionTimestamp")


def _zone_of(pod: Obj) -> str | None:
    zone: str | None = pod["metadata"].get("annotations", {}).get("stszone.io/zone")
    return zone


def test_a_local_volume_pinned_by_hostname_pulls_its_pod_to_that_nodes_zone(
    cluster: Cluster, everywhere: Kubectl
) -> None:
    """Ordinal 0's rule zone is Z0; its claim is pre-bound to a local volume on a node of Z1.
    stszone pins the pod to Z1 (its data's zone), and the scheduler puts it on that node."""
    if not cluster.schedulable or len(cluster.zones) < 2:
        pytest.skip(f"zones {', '.join(cluster.zones)} do not all have schedulable nodes")
    zones = cluster.zones
    node = nodes_by_zone(cluster.kubectl, zones)[zones[1]][0]
    name, kubectl = "local", cluster.kubectl
    volume, claim = f"stszone-e2e-{cluster.run}-local", f"data-{name}-0"
    with ExitStack() as stack:
        # Deleted in reverse: the set, its claim, then the volume (a bound one waits for them).
        stack.callback(delete_volume, everywhere, volume)
        everywhere.create(local_volume(cluster, volume, node=node, claim=claim))
        stack.callback(kubectl.delete, "pvc", claim)
        stack.callback(kubectl.delete, "statefulset", name)
        sts = with_data_claim(
            workload(
                "StatefulSet",
                name,
                image=cluster.image,
                replicas=0,
                labels={RUN_LABEL: cluster.run},
            )
        )
        made = kubectl.create(sts)

        # The webhook's view follows the volume watch: its dry-run answer shows when it has it.
        probe = owned_pod(made, 0, image=cluster.image, labels={"app": f"{name}-dry-run"})
        probe["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]

        def seen() -> bool:
            return _zone_of(kubectl.create(probe, dry_run=True)) == zones[1]

        wait_for(f"the webhook to see volume {volume}", seen, timeout=cluster.timeout)
        kubectl.run("scale", "statefulset", name, "--replicas=1")

        def scheduled() -> Obj | None:
            pod = kubectl.get("pod", f"{name}-0")
            return pod if pod["spec"].get("nodeName") else None

        pod = wait_for(f"{name}-0 to be scheduled", scheduled, timeout=cluster.timeout)
        assert _zone_of(pod) == zones[1]
        required = pod["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        wanted = {"key": ZONE_KEY, "operator": "In", "values": [zones[1]]}
        assert all(wanted in t["matchExpressions"] for t in required["nodeSelectorTerms"])
        assert pod["spec"]["nodeName"] == node
        bound = kubectl.get("pvc", claim)
        assert bound["spec"].get("volumeName") == volume
        assert bound["metadata"].get("annotations", {}).get("stszone.io/zone") == zones[1]


def test_a_volume_not_in_two_zones_pulls_its_pod_to_the_third_and_is_guarded(
    cluster: Cluster, everywhere: Kubectl
) -> None:
    """Ordinal 1's rule zone is Z1; its claim is pre-bound to a volume whose affinity is
    ``topology.kubernetes.io/zone NotIn [Z0, Z1]``. stszone pins the pod to Z2, the scheduler
    puts it there, and 2 -> 1, which removes the set's only Z2 ordinal, is refused naming Z2."""
    if not cluster.schedulable or len(cluster.zones) < 3:
        pytest.skip(f"zones {', '.join(cluster.zones)} are not three with schedulable nodes")
    zones = cluster.zones
    name, kubectl = "notin", cluster.kubectl
    volume, claim = f"stszone-e2e-{cluster.run}-notin", f"data-{name}-1"
    others = {"key": ZONE_KEY, "operator": "NotIn", "values": [zones[0], zones[1]]}
    with ExitStack() as stack:
        # Deleted in reverse: the set, its claim, then the volume (a bound one waits for them).
        stack.callback(delete_volume, everywhere, volume)
        everywhere.create(local_volume(cluster, volume, claim=claim, expressions=[others]))
        stack.callback(kubectl.delete, "pvc", claim)
        stack.callback(kubectl.delete, "statefulset", name)
        sts = workload(
            "StatefulSet", name, image=cluster.image, replicas=0, labels={RUN_LABEL: cluster.run}
        )
        sts["metadata"].setdefault("annotations", {})["stszone.io/zones"] = ",".join(zones[:3])
        made = kubectl.create(with_data_claim(sts))
        probe = owned_pod(made, 1, image=cluster.image, labels={"app": f"{name}-dry-run"})
        probe["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]

        def seen() -> bool:
            return _zone_of(kubectl.create(probe, dry_run=True)) == zones[2]

        wait_for(f"the webhook to see volume {volume}", seen, timeout=cluster.timeout)
        kubectl.run("scale", "statefulset", name, "--replicas=2")

        def scheduled() -> Obj | None:
            pod = kubectl.get("pod", f"{name}-1")
            return pod if pod["spec"].get("nodeName") else None

        pod = wait_for(f"{name}-1 to be scheduled", scheduled, timeout=cluster.timeout)
        assert _zone_of(pod) == zones[2]
        node = kubectl.get("node", pod["spec"]["nodeName"])
        assert node["metadata"]["labels"][ZONE_KEY] == zones[2]
        try:
            kubectl.run("scale", "statefulset", name, "--replicas=1", "--dry-run=server")
        except KubectlError as err:
            refusal = err.stderr
        else:
            raise AssertionError(f"the guard allowed scaling {name} to 1, emptying {zones[2]}")
        assert f"would drop zone {zones[2]} (ordinal 1 is " in refusal, refusal


def test_moving_ordinals_start_that_would_drop_a_zone_is_refused(cluster: Cluster) -> None:
    """k replicas placed by stszone hold Z0..Zk-1, ordinal 0 alone in Z0. Moving
    spec.ordinals.start to 1 removes ordinal 0 and adds ordinal k, which the rule (counted from
    1) puts in Zk-1: Z0 would be lost, and the update is refused, replicas unchanged."""
    if not cluster.schedulable:
        pytest.skip(f"zones {', '.join(cluster.zones)} do not all have schedulable nodes")
    k = len(cluster.zones)
    name, kubectl = "moved", cluster.kubectl
    with ExitStack() as stack:
        stack.callback(kubectl.delete, "statefulset", name)  # other tests audit the namespace
        kubectl.create(
            workload(
                "StatefulSet",
                name,
                image=cluster.image,
                replicas=k,
                labels={RUN_LABEL: cluster.run},
            )
        )
        _moving_start(cluster, name=name)


def _moving_start(cluster: Cluster, *, name: str) -> None:
    """Wait for the set's k pods, then try moving its start from 0 to 1."""
    zones, k, kubectl = cluster.zones, len(cluster.zones), cluster.kubectl

    def all_scheduled() -> bool:
        pods = kubectl.get("pods", "-l", f"app={name}")["items"]
        return len(pods) == k and all(p["spec"].get("nodeName") for p in pods)

    wait_for(f"every pod of {name} to be scheduled", all_scheduled, timeout=cluster.timeout)
    patch = '{"spec":{"ordinals":{"start":1}}}'
    with pytest.raises(KubectlError) as refused:
        kubectl.run("patch", "statefulset", name, "--type=merge", "-p", patch)
    message = refused.value.stderr
    assert (
        f"ordinals.start 0 -> 1 of {name} would drop zone {zones[0]} (ordinal 0 is its only "
        in (message)
    )
    assert "stszone.io/allow-zone-loss" in message
    assert "ordinals" not in kubectl.get("statefulset", name)["spec"]
