"""A StatefulSet being deleted, as its owner meets it: no warning of a zone without nodes on
its last update, no word of moves nor ZoneConflict on a manifest re-applied to it, its replicas
alone in /metrics, and no audit problem of its node labels.

Skipped unless ``STSZONE_E2E_KUBECONFIG`` names a cluster; see ``conftest.py`` for the knobs
and for what is created and always deleted. Each set carries the finalizer ``HOLD``, so it
stays while being deleted; it is always taken off again (``kube.release``). The audit test
makes its own opted-in namespace, which no webhook watches (the audit reads the cluster, not
the webhook), and always deletes it.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from contextlib import ExitStack

import pytest

from tests.e2e.conftest import delete_namespace, opted_in_namespace
from tests.e2e.kube import (
    HOLD,
    RUN_LABEL,
    Cluster,
    Kubectl,
    KubectlError,
    Obj,
    release,
    wait_for,
    workload,
)
from tests.rendered import ROOT
from tests.test_metrics import parse

IMAGE = os.environ.get("STSZONE_E2E_IMAGE", "registry.k8s.io/pause:3.10")
ZONE_KEY = "topology.kubernetes.io/zone"
FINALIZERS_OFF = '{"metadata":{"finalizers":null}}'


def _held(name: str, *, image: str, replicas: int, run: str) -> Obj:
    sts = workload("StatefulSet", name, image=image, replicas=replicas, labels={RUN_LABEL: run})
    sts["metadata"]["finalizers"] = [HOLD]
    return sts


def test_the_update_that_ends_a_deletion_hears_no_warning_of_a_zone_without_nodes(
    cluster: Cluster,
) -> None:
    """A set lists a zone no node is in: an update of it while it lives warns that its pods
    there wait for a node; once it is being deleted, the patch that takes its finalizer off
    (which ends the deletion) does not, as its controller creates no pod of it again. One
    member: a set at 0 replicas has no pod to wait, and is told only what its scale to 0 is;
    the zone is listed first, where ordinal 0 goes, as only a zone a member goes to is named."""
    name, kubectl, nowhere = "nowhere", cluster.kubectl, "e2e-zone-without-nodes"
    sts = _held(name, image=cluster.image, replicas=1, run=cluster.run)
    sts["metadata"]["annotations"] = {"stszone.io/zones": ",".join((nowhere, *cluster.zones))}
    said = f"{name}: no node in zone(s) {nowhere} "
    with ExitStack() as stack:
        stack.callback(release, kubectl, name)
        kubectl.create(sts)
        live = kubectl.warned("annotate", "statefulset", name, "e2e.stszone.io/touched=1")
        assert any(w.startswith(said) for w in live), live
        kubectl.delete("statefulset", name)
        assert kubectl.get("statefulset", name)["metadata"].get("deletionTimestamp")
        ending = kubectl.warned("patch", "statefulset", name, "--type=merge", "-p", FINALIZERS_OFF)
        assert not any(w.startswith(said) for w in ending), ending
        wait_for(f"{name} to be deleted", lambda: kubectl.gone("statefulset", name), timeout=30)


def test_a_manifest_re_applied_to_a_set_being_deleted_moves_and_excludes_nothing(
    cluster: Cluster,
) -> None:
    """While a set lives, a rotated stszone.io/zones warns that members move when re-created,
    and a pod template pinned to one zone is refused (ZoneConflict); once the set is being
    deleted (its finalizer holds it) the API server still takes both updates, and stszone lets
    them through without a word of moves: its controller re-creates no pod of it."""
    name, kubectl = "reapplied", cluster.kubectl
    zones = list(cluster.zones)
    # One member: a set with none has no pod a new zone list could move, and is told nothing.
    sts = _held(name, image=cluster.image, replicas=1, run=cluster.run)
    sts["metadata"]["annotations"] = {"stszone.io/zones": ",".join(zones)}
    moves = f"{name}: new stszone.io/zones moves"
    rotated = ",".join((*zones[1:], zones[0]))
    pinned = {"spec": {"template": {"spec": {"nodeSelector": {ZONE_KEY: zones[0]}}}}}
    with ExitStack() as stack:
        stack.callback(release, kubectl, name)
        kubectl.create(sts)
        live = kubectl.warned("annotate", "--overwrite", "statefulset", name,
                              f"stszone.io/zones={rotated}")  # fmt: skip
        assert any(w.startswith(moves) for w in live), live
        with pytest.raises(KubectlError, match="excludes zone"):
            kubectl.run("patch", "statefulset", name, "--type=merge", "-p", json.dumps(pinned))
        kubectl.delete("statefulset", name)
        assert kubectl.get("statefulset", name)["metadata"].get("deletionTimestamp")
        ending = kubectl.warned("annotate", "--overwrite", "statefulset", name,
                                f"stszone.io/zones={','.join(zones)}")  # fmt: skip
        assert not any(w.startswith(moves) for w in ending), ending
        kubectl.run("patch", "statefulset", name, "--type=merge", "-p", json.dumps(pinned))
        held = kubectl.get("statefulset", name)["spec"]["template"]["spec"]
        assert held["nodeSelector"] == {ZONE_KEY: zones[0]}


def test_a_set_being_deleted_exports_its_replicas_alone(cluster: Cluster) -> None:
    """While the set lives /metrics has its zone-risk gauges, unknown_zone_ordinals among them;
    once it is being deleted, only its replicas (no scale-down of it is judged)."""
    name, kubectl = "gauged", cluster.kubectl
    labels = frozenset(
        {"namespace": cluster.namespace, "statefulset": name, "kind": "StatefulSet"}.items()
    )
    unknown, replicas = "stszone_statefulset_unknown_zone_ordinals", "stszone_statefulset_replicas"
    exported: set[str] = set()

    def scrape() -> set[str]:
        status, text = cluster.webhook.fetch("/metrics")
        assert status == 200, text
        exported.clear()
        exported.update(g for g, key in parse(text) if key == labels)
        return exported

    with ExitStack() as stack:
        stack.callback(release, kubectl, name)
        kubectl.create(_held(name, image=cluster.image, replicas=0, run=cluster.run))
        wait_for(f"{name}'s gauges", lambda: {unknown, replicas} <= scrape(), timeout=30)
        kubectl.delete("statefulset", name)
        try:
            wait_for(
                f"{name} to export {replicas} alone", lambda: scrape() == {replicas}, timeout=20
            )
        except AssertionError as err:
            raise AssertionError(f"{err}; last scrape: {sorted(exported)}") from None


def _audit(kubectl: Kubectl, namespace: str) -> subprocess.CompletedProcess[str]:
    """`python -m webhook audit` of one namespace, with the cluster's kubeconfig."""
    command = [sys.executable, "-m", "webhook", "audit", "--kubeconfig", kubectl.kubeconfig]
    return subprocess.run(
        [*command, "-n", namespace],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_stszone_audit_exits_0_for_the_node_labels_of_a_set_being_deleted(
    kubectl: Kubectl,
) -> None:
    """A node-ordinal set of 2 whose label no node carries: the audit exits 1 while it lives
    (a re-created pod has no node to go to); once it is being deleted it lists the labels still,
    no problem (exit 0), as no pod of it is created again."""
    run = secrets.token_hex(3)
    namespace, name, label = f"stszone-e2e-held-{run}", "db", f"e2e.stszone.io/ordinal-{run}"
    sts = _held(name, image=IMAGE, replicas=2, run=run)
    sts["metadata"]["annotations"] = {
        "stszone.io/mode": "node-ordinal",
        "stszone.io/node-label": label,
    }
    # No node carries the label: the pods stay unscheduled, which the audit calls pending.
    sts["spec"]["template"]["spec"]["nodeSelector"] = {label: "none"}
    missing = "no node carries the ordinal label of ordinal(s) 0, 1"
    with ExitStack() as stack:
        stack.callback(delete_namespace, kubectl, namespace)
        kubectl.create(opted_in_namespace(namespace, run))
        scoped = kubectl.within(namespace)
        stack.callback(release, scoped, name)
        scoped.create(sts)
        live = _audit(kubectl, namespace)
        assert live.returncode == 1, live.stdout + live.stderr
        assert f"  PROBLEM: {missing}\n" in live.stdout, live.stdout
        scoped.delete("statefulset", name)
        ended = _audit(kubectl, namespace)
        assert ended.returncode == 0, ended.stdout + ended.stderr
        aside = " (no problem: a set being deleted gets no new pod)"
        assert f"  {missing}{aside}\n" in ended.stdout, ended.stdout
