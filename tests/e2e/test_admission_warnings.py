"""Admission warnings as kubectl prints them: a scale-down of a set being deleted, allowed
unjudged, and an update that leaves malformed annotations as they were.

Skipped unless ``STSZONE_E2E_KUBECONFIG`` names a cluster; see ``conftest.py`` for the knobs
and for what is created and always deleted. A set here carries the finalizer
``e2e.stszone.io/hold`` while it is being deleted; it is always taken off again, since a set
that keeps it keeps the test namespace from ever being deleted.
"""

from __future__ import annotations

from contextlib import ExitStack

from tests.e2e.kube import HOLD, RUN_LABEL, Cluster, Kubectl, Obj, release, wait_for, workload


def _pods(kubectl: Kubectl, name: str) -> list[Obj]:
    pods: list[Obj] = kubectl.get("pods", "-l", f"app={name}")["items"]
    return pods


def test_a_scale_down_of_a_set_being_deleted_is_allowed_and_removes_no_pod(
    cluster: Cluster,
) -> None:
    """k replicas over k zones, held by a finalizer and deleted: the set has a
    deletionTimestamp and stays. Scaling it to 1, which would drop every zone but the first,
    is allowed with the warning that it is not judged; its controller takes the new count in
    (status.observedGeneration) and removes no pod."""
    name, kubectl, k = "held", cluster.kubectl, len(cluster.zones)
    sts = workload(
        "StatefulSet", name, image=cluster.image, replicas=k, labels={RUN_LABEL: cluster.run}
    )
    sts["metadata"]["finalizers"] = [HOLD]
    with ExitStack() as stack:
        stack.callback(release, kubectl, name)
        kubectl.create(sts)
        wait_for(
            f"{k} pods of {name}", lambda: len(_pods(kubectl, name)) == k, timeout=cluster.timeout
        )
        kubectl.delete("statefulset", name)
        assert kubectl.get("statefulset", name)["metadata"].get("deletionTimestamp")
        said = f"{name}: not judged: the StatefulSet is being deleted"
        scale = ("scale", "statefulset", name, "--replicas=1")

        # A Scale carries no deletionTimestamp: the webhook reads it from its view's set,
        # which follows the watch; a server-side dry run shows when it has it.
        dry = wait_for(
            f"a dry-run scale of {name} to 1 to be allowed",
            lambda: kubectl.warned(*scale, "--dry-run=server"),
            timeout=30,
        )
        assert any(said in w for w in dry), dry
        warned = kubectl.warned(*scale)
        assert any(said in w for w in warned), warned

        def observed() -> Obj | None:
            got = kubectl.get("statefulset", name)
            seen = got.get("status", {}).get("observedGeneration")
            return got if seen == got["metadata"]["generation"] else None

        held = wait_for(f"{name}'s controller to see replicas 1", observed, timeout=30)
        assert held["spec"]["replicas"] == 1
        pods = _pods(kubectl, name)
        assert len(pods) == k, [p["metadata"]["name"] for p in pods]
        assert not [p["metadata"]["name"] for p in pods if p["metadata"].get("deletionTimestamp")]


def test_an_update_leaving_malformed_annotations_warns_of_them_and_of_a_key_not_read(
    cluster: Cluster,
) -> None:
    """A set made while labelled stszone.io/skip=true (never sent to stszone) with a zone list
    holding an empty entry and a stszone.io/node-label in affinity mode: the update that takes
    the label off leaves both as they were, and is allowed with a warning of each."""
    name, kubectl, zones = "unread", cluster.kubectl, cluster.zones
    labels = {RUN_LABEL: cluster.run, "stszone.io/skip": "true"}
    sts = workload("StatefulSet", name, image=cluster.image, replicas=0, labels=labels)
    sts["metadata"]["annotations"] = {
        "stszone.io/zones": f"{zones[0]},,{zones[-1]}",
        "stszone.io/node-label": "example.io/node",
    }
    with ExitStack() as stack:
        stack.callback(release, kubectl, name)
        kubectl.create(sts)
        warned = kubectl.warned("label", "statefulset", name, "stszone.io/skip-")
        assert any(
            w.startswith(f"StatefulSet {name}: ")
            and w.endswith("(unchanged by this update; fix it)")
            for w in warned
        ), warned
        unread = f"{name}: stszone.io/node-label 'example.io/node' does nothing in affinity mode"
        assert any(w.startswith(unread) for w in warned), warned
