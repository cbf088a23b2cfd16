"""Decisions become Events on the StatefulSet, written by the running webhook: a pod placed with
its data away from its rule zone, a refused scale-down; never a dry run's.

The StatefulSet controller creates the pods, so the admission warnings are lost to it: the Event
is what ``kubectl describe statefulset`` shows instead.
"""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from tests.e2e.kube import (
    RUN_LABEL,
    ZONE_KEY,
    Cluster,
    KubectlError,
    Obj,
    pod_template,
    wait_for,
)


def _volume(name: str, *, zone: str, claim: str, namespace: str, run: str) -> Obj:
    """A PersistentVolume in ``zone``, pre-bound to ``claim`` (the lab has no provisioner)."""
    term = {"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": [zone]}]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {RUN_LABEL: run}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": namespace, "name": claim},
            "local": {"path": f"/mnt/{name}"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
    }


def _statefulset(name: str, *, zones: tuple[str, ...], replicas: int, image: str) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "annotations": {"stszone.io/zones": ",".join(zones)}},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_template(image)},
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "",
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }
            ],
        },
    }


def _mine(cluster: Cluster, name: str) -> dict[str, Obj]:
    """stszone's Events about StatefulSet ``name``, by reason."""
    events = cluster.kubectl.get("events.events.k8s.io")["items"]
    return {
        e["reason"]: e
        for e in events
        if e.get("reportingController") == "stszone.io/webhook" and e["regarding"]["name"] == name
    }


def test_a_pod_placed_with_its_data_and_a_refused_scale_down_are_described(
    cluster: Cluster,
) -> None:
    """ev-0's volume is in the last zone, not its rule zone (the first): its pod follows the data,
    and the set's description says so, naming the pod and the zone. A scale-down that would drop
    a zone is refused; as a dry run it leaves no Event, as a real request it does."""
    if len(cluster.zones) < 3 or not cluster.schedulable:
        pytest.skip("needs three zones with schedulable nodes")
    kubectl, name, run = cluster.kubectl, "ev", cluster.run
    zones = cluster.zones[:3]
    volume = f"stszone-e2e-{run}-ev-0"
    # ev-0's data in the last zone (its rule zone is the first); ev-1's and ev-2's in theirs.
    homes = {0: zones[2], 1: zones[1], 2: zones[2]}
    with ExitStack() as cleanup:
        cleanup.callback(
            kubectl.run,
            "delete",
            "pv",
            "-l",
            f"{RUN_LABEL}={run}",
            "--wait=false",
            "--ignore-not-found",
        )
        cleanup.callback(kubectl.run, "delete", "pvc", "-l", f"app={name}", "--wait=false")
        cleanup.callback(kubectl.delete, "statefulset", name)
        for ordinal, zone in homes.items():
            kubectl.create(
                _volume(
                    f"stszone-e2e-{run}-ev-{ordinal}",
                    zone=zone,
                    claim=f"data-{name}-{ordinal}",
                    namespace=cluster.namespace,
                    run=run,
                )
            )
        kubectl.create(_statefulset(name, zones=zones, replicas=3, image=cluster.image))

        def placed() -> bool:
            events = _mine(cluster, name)
            return "PlacedWithData" in events

        wait_for("stszone's PlacedWithData Event on the set", placed, timeout=cluster.timeout)
        pod = kubectl.get("pod", f"{name}-0")
        assert pod["metadata"]["annotations"]["stszone.io/zone"] == zones[2]
        described = kubectl.run("describe", "statefulset", name)
        assert "PlacedWithData" in described and f"{name}-0 follows volume {volume}" in described
        assert f"to {zones[2]}; the rule says {zones[0]}" in described, described

        # ev-0 holds the last zone (its data), ev-1 the second, ev-2 the last: 3 -> 1 leaves the
        # second zone without a pod.
        def all_running() -> bool:
            pods = kubectl.get("pods", "-l", f"app={name}")["items"]
            return len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods)

        wait_for("the set's three pods to be scheduled", all_running, timeout=cluster.timeout)
        with pytest.raises(KubectlError) as dry:
            kubectl.run("scale", "statefulset", name, "--replicas=1", "--dry-run=server")
        assert "would drop zone" in dry.value.stderr
        assert "ScaleDownRefused" not in _mine(cluster, name), "a dry run wrote an Event"
        with pytest.raises(KubectlError) as real:
            kubectl.run("scale", "statefulset", name, "--replicas=1")
        assert "would drop zone" in real.value.stderr

        def refused() -> bool:
            return "ScaleDownRefused" in _mine(cluster, name)

        wait_for("stszone's ScaleDownRefused Event on the set", refused, timeout=60)
        event = _mine(cluster, name)["ScaleDownRefused"]
        assert (
            event["type"] == "Warning"
            and event["regarding"]["uid"] == (kubectl.get("statefulset", name)["metadata"]["uid"])
        )
        assert "scale-down of ev from 3 to 1 would drop zone" in event["note"]
        assert "Warning  ScaleDownRefused" in kubectl.run("describe", "statefulset", name)
