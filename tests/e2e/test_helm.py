"""charts/stszone on a real API server: install, place, `helm test`, upgrade, uninstall.

The chart is installed with the real helm (a server-side dry run first), with its defaults:
stszone makes its own certificates. A cluster whose pods never run a container (the lab's fake
kubelet only reports them Running) cannot run stszone's image, so the webhook runs here as a
replica of the installed Deployment runs it: its own arguments, its environment, a token of its
ServiceAccount (the chart's RBAC decides what it may write), bound to the installed Service's
ClusterIP on port 443, so that the API server calls it through the chart's own webhook
configurations (tests/e2e/helmlab.py). The same stands in for the kubelet of the ``helm test``
pod.

The installed webhooks match every opted-in namespace of the cluster (as in production), so
run these tests only where nothing else runs (the lab lock). Everything is removed at the end,
the release (webhook configurations first) before the namespaces, whether the test passes or
fails; after a SIGKILL: ``helm uninstall stszone-helm-RUN -n stszone-helm-RUN`` and
``kubectl delete namespace stszone-helm-RUN stszone-helm-db-RUN``.
"""

from __future__ import annotations

import copy
import json
import os
import re
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import delete_namespace, opted_in_namespace
from tests.e2e.helmlab import (
    ca_bundle_managers,
    ca_bundles,
    delete_cluster_scoped,
    find,
    leftovers,
    play_kubelet,
    serving_release,
    uninstall,
)
from tests.e2e.kube import (
    RUN_LABEL,
    ZONE_KEY,
    Kubectl,
    KubectlError,
    Obj,
    applied_crds,
    crd_file,
    wait_for,
    workload,
)
from tests.e2e.server import STOP_TIMEOUT
from tests.helm import CHART, Helm, HelmError, ci_values, helm_for_tests, release
from webhook.install import tlssecret

TIMEOUT = float(os.environ.get("STSZONE_E2E_TIMEOUT", "180"))
IMAGE = os.environ.get("STSZONE_E2E_IMAGE", "registry.k8s.io/pause:3.10")
#: The CRDs the chart's optional objects need, applied for the dry runs when the cluster lacks
#: them (and deleted afterwards).
CRD_FILES = {
    "certificates.cert-manager.io": crd_file("STSZONE_CERT_MANAGER_CRDS", "cert-manager.yaml"),
    "servicemonitors.monitoring.coreos.com": crd_file("STSZONE_CRDS", "prometheus-operator.yaml"),
}
REPLICAS = 6


@pytest.fixture(scope="module")
def helm(kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """The pinned helm, talking to the end-to-end cluster."""
    return helm_for_tests(tmp_path_factory.mktemp("helm-home"), kubeconfig=kubectl.kubeconfig)


def _probe(run: str) -> Obj:
    return workload("StatefulSet", "probe", image=IMAGE, replicas=0, labels={RUN_LABEL: run})


def _mutated(kubectl: Kubectl, run: str) -> str | None:
    """The zone list a dry-run StatefulSet create comes back with (None: not mutated)."""
    created = kubectl.create(_probe(run), dry_run=True)
    zones: str | None = created["metadata"].get("annotations", {}).get("stszone.io/zones")
    return zones


def _scheduled(kubectl: Kubectl, replicas: int) -> list[Obj]:
    """db's pods once ``replicas`` of them exist and all are scheduled."""

    def scheduled() -> list[Obj] | None:
        pods: list[Obj] = kubectl.get("pods", "-l", "app=db")["items"]
        done = len(pods) == replicas and all(pod["spec"].get("nodeName") for pod in pods)
        return pods if done else None

    try:
        return wait_for("every pod of db to be scheduled", scheduled, timeout=TIMEOUT, interval=2)
    except AssertionError as err:
        events = kubectl.run("get", "events", "--field-selector", "involvedObject.name=db")
        raise AssertionError(f"{err}\nevents of statefulset db:\n{events}") from None


def _assert_placed(kubectl: Kubectl, pods: list[Obj], zones: list[str]) -> None:
    """Each pod annotated with, and scheduled into, the zone of its ordinal."""
    node_zone = {
        node["metadata"]["name"]: node["metadata"].get("labels", {}).get(ZONE_KEY)
        for node in kubectl.get("nodes")["items"]
    }
    for pod in pods:
        pod_name = pod["metadata"]["name"]
        expected = zones[int(pod_name.rsplit("-", 1)[1]) % len(zones)]
        assert pod["metadata"]["annotations"]["stszone.io/zone"] == expected, pod_name
        assert node_zone[pod["spec"]["nodeName"]] == expected, pod_name


def _helm_test(helm: Helm, kubectl: Kubectl, *, name: str, namespace: str, work: Path) -> str:
    """`helm test`, with its pod's command run here; helm's output once it passed."""
    tester = subprocess.Popen(
        [str(helm.binary), "test", name, "--namespace", namespace, "--timeout", f"{TIMEOUT:.0f}s"],
        env=helm.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        checked = play_kubelet(kubectl, pod_name=f"{name}-test", namespace=namespace, work=work)
        tested, _ = tester.communicate(timeout=TIMEOUT)
    except (AssertionError, subprocess.TimeoutExpired) as err:
        tester.kill()
        raise AssertionError(f"{err}\nhelm test said:\n{tester.communicate()[0]}") from None
    finally:
        if tester.poll() is None:
            tester.kill()
            tester.wait()
    assert checked.returncode == 0, f"{checked.stdout}{checked.stderr}"
    assert tester.returncode == 0, tested
    phases = re.findall(r"^Phase:\s+(\w+)$", tested, flags=re.MULTILINE)
    assert phases and set(phases) == {"Succeeded"}, tested
    return checked.stdout


def test_install_place_test_upgrade_uninstall(helm: Helm, kubectl: Kubectl, tmp_path: Path) -> None:
    """The newcomer's path, with the chart's defaults: a server-side dry run changes nothing;
    the install renders no Secret and no caBundle; its webhook, running with the chart's RBAC,
    makes the Secret and fills both caBundles and answers through the API server; a StatefulSet
    is placed by ordinal; `helm test` passes; an upgrade to 3 replicas and a longer webhook
    timeout (made while no replica runs, so nothing could repair what it changed) leaves the
    Secret and both caBundles as they were, and pods are placed after it; the uninstall leaves no object of the release and no
    webhook configuration, so pods are created again with nothing answering. The Secret and
    the Lease that stszone made stay, until the namespace goes."""
    run = secrets.token_hex(3)
    name = namespace = f"stszone-helm-{run}"
    apps = f"stszone-helm-db-{run}"
    chart = str(CHART)
    install = ["install", name, chart, "--namespace", namespace, "--create-namespace"]
    with ExitStack() as stack:
        # Undone in reverse: the release (webhook configurations first), then the namespaces.
        stack.callback(delete_namespace, kubectl, namespace)
        stack.callback(delete_namespace, kubectl, apps)
        # A `helm test` cut short leaves its hooks (helm uninstall does not delete hooks).
        stack.callback(delete_namespace, kubectl, f"{name}-test")
        stack.callback(delete_cluster_scoped, kubectl, name)  # when the uninstall failed
        stack.callback(uninstall, helm, name, namespace)

        out = helm.run(*install, "--dry-run=server")
        assert "STATUS: pending-install" in out, out
        assert kubectl.gone("mutatingwebhookconfiguration", name), (
            "the dry run registered a webhook"
        )
        assert kubectl.gone("namespace", namespace), "the dry run made the release namespace"

        kubectl.create(opted_in_namespace(apps, run))
        db = kubectl.within(apps)
        out = helm.run(*install, "--wait", "--timeout", f"{TIMEOUT:.0f}s")
        assert "STATUS: deployed" in out and "(certificates: self-managed)" in out, out
        assert "kubectl label namespace my-db stszone.io/enabled=true" in out, out
        scoped = kubectl.within(namespace)
        assert find(scoped, "secret", f"{name}-tls") is None, "the chart rendered a Secret"
        # The fail-closed webhook's replicas run at the cluster's add-on priority, admitted by
        # the quota that names the class in the release namespace.
        quota = scoped.get("resourcequota", f"{name}-critical-pods")
        assert quota["status"]["used"]["pods"] == "2", quota["status"]
        for pod in scoped.get("pods", "-l", "app.kubernetes.io/component=webhook")["items"]:
            assert pod["spec"]["priorityClassName"] == "system-cluster-critical"
            assert pod["spec"]["priority"] == 2000000000, pod["spec"].get("priority")
        assert set(ca_bundles(kubectl, name).values()) == {None}, "the chart rendered a caBundle"

        webhook = stack.enter_context(
            serving_release(kubectl, name=name, namespace=namespace, work=tmp_path / "serve-1")
        )
        secret = scoped.get("secret", f"{name}-tls")
        assert tlssecret.is_managed(secret), secret["metadata"]
        lease = scoped.get("lease", f"{name}-certs")
        assert lease["spec"]["holderIdentity"].startswith(f"{name}-"), lease["spec"]
        bundle = secret["data"][tlssecret.BUNDLE]
        wait_for(
            "both caBundles to hold the Secret's CA",
            lambda: set(ca_bundles(kubectl, name).values()) == {bundle},
            timeout=60,
        )
        zones = wait_for(
            "the API server to call the installed webhook", lambda: _mutated(db, run), timeout=60
        )
        zone_list = zones.split(",")
        assert len(zone_list) >= 2, zones
        db.create(
            workload("StatefulSet", "db", image=IMAGE, replicas=REPLICAS, labels={RUN_LABEL: run})
        )
        _assert_placed(kubectl, _scheduled(db, REPLICAS), zone_list)
        assert db.get("statefulset", "db")["metadata"]["annotations"]["stszone.io/zones"] == zones

        said = _helm_test(helm, kubectl, name=name, namespace=namespace, work=tmp_path)
        assert f"got stszone.io/zones={zones}" in said, said
        assert kubectl.gone("namespace", f"{name}-test"), "helm test left its namespace behind"

        owners = ca_bundle_managers(kubectl, name)
        assert all(owners.values()) and not any(
            owner.startswith("helm/") for found in owners.values() for owner in found
        ), owners
        webhook.stop(grace=STOP_TIMEOUT)
        # A change inside each configuration's webhook too: server-side apply merges the
        # webhooks list by name, and must leave the caBundle it never applied.
        out = helm.run(
            "upgrade", name, chart, "--namespace", namespace, "--reuse-values",
            "--set", "replicas=3", "--set", "webhooks.timeoutSeconds=7",
            "--wait", "--timeout", f"{TIMEOUT:.0f}s",
        )  # fmt: skip
        assert "STATUS: deployed" in out and "REVISION: 2" in out, out
        assert scoped.get("deployment", name)["spec"]["replicas"] == 3
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            assert kubectl.get(kind, name)["webhooks"][0]["timeoutSeconds"] == 7, kind
        assert scoped.get("secret", f"{name}-tls")["data"] == secret["data"], (
            "the upgrade changed the Secret"
        )
        assert set(ca_bundles(kubectl, name).values()) == {bundle}, "the upgrade changed a caBundle"
        assert ca_bundle_managers(kubectl, name) == owners

        webhook = stack.enter_context(
            serving_release(kubectl, name=name, namespace=namespace, work=tmp_path / "serve-2")
        )
        assert _mutated(db, run) == zones, "the upgraded release does not reach the webhook"
        db.run("scale", "statefulset", "db", f"--replicas={REPLICAS + 1}")
        _assert_placed(kubectl, _scheduled(db, REPLICAS + 1), zone_list)
        assert scoped.get("secret", f"{name}-tls")["data"] == secret["data"]

        out = helm.run("uninstall", name, "--namespace", namespace, "--wait")
        assert f'release "{name}" uninstalled' in out, out
        webhook.stop(grace=STOP_TIMEOUT)
        assert not leftovers(kubectl, name), f"left behind: {leftovers(kubectl, name)}"
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            assert kubectl.gone(kind, name), kind
        with pytest.raises(HelmError):
            helm.run("status", name, "--namespace", namespace)
        # What stszone made is not the release's: Helm leaves it, the namespace takes it.
        assert scoped.get("secret", f"{name}-tls")["data"] == secret["data"]
        assert find(scoped, "lease", f"{name}-certs") is not None
        db.run("scale", "statefulset", "db", f"--replicas={REPLICAS + 2}")

        def created() -> Obj | None:
            pod: Obj = db.get("pod", f"db-{REPLICAS + 1}")
            return pod

        pod = wait_for("a pod created with stszone uninstalled", created, timeout=TIMEOUT)
        assert "stszone.io/zone" not in pod["metadata"].get("annotations", {})


def test_generated_certificates_survive_an_upgrade(
    helm: Helm, kubectl: Kubectl, tmp_path: Path
) -> None:
    """certificates.mode=generated: the chart's Secret and the caBundle it renders from it are
    kept by an upgrade (lookup finds them), and go with the uninstall (they are the release's)."""
    run = secrets.token_hex(3)
    name = namespace = f"stszone-helm-gen-{run}"
    chart = str(CHART)
    mode = ["--set", "certificates.mode=generated"]
    with ExitStack() as stack:
        stack.callback(delete_namespace, kubectl, namespace)
        stack.callback(delete_cluster_scoped, kubectl, name)  # when the uninstall failed
        stack.callback(uninstall, helm, name, namespace)
        helm.run(
            "install", name, chart, "--namespace", namespace, "--create-namespace", *mode,
            "--wait", "--timeout", f"{TIMEOUT:.0f}s",
        )  # fmt: skip
        scoped = kubectl.within(namespace)
        secret = scoped.get("secret", f"{name}-tls")["data"]
        assert set(ca_bundles(kubectl, name).values()) == {secret["ca.crt"]}
        assert kubectl.gone("clusterrole", f"{name}-certs"), "generated mode got write access"
        out = helm.run(
            "upgrade", name, chart, "--namespace", namespace, "--reuse-values",
            "--set", "replicas=3", "--wait", "--timeout", f"{TIMEOUT:.0f}s",
        )  # fmt: skip
        assert "REVISION: 2" in out, out
        assert scoped.get("secret", f"{name}-tls")["data"] == secret, "the upgrade made a new pair"
        assert set(ca_bundles(kubectl, name).values()) == {secret["ca.crt"]}
        helm.run("uninstall", name, "--namespace", namespace, "--wait")
        assert not leftovers(kubectl, name), f"left behind: {leftovers(kubectl, name)}"
        assert find(scoped, "secret", f"{name}-tls") is None, "the release's Secret stayed"


@pytest.fixture(scope="module")
def crds(kubectl: Kubectl) -> Iterator[None]:
    """The cert-manager and Prometheus Operator CRDs, applied for this module when missing."""
    with ExitStack() as stack:
        for crd, path in CRD_FILES.items():
            if not kubectl.gone("crd", crd):
                continue
            if not path.is_file():
                pytest.fail(f"the cluster lacks {crd} and {path} does not exist", pytrace=False)
            stack.enter_context(applied_crds(kubectl, path))
        yield


@pytest.fixture(scope="module")
def dry_run_namespace(kubectl: Kubectl) -> Iterator[str]:
    """An empty namespace the rendered objects are dry-run into."""
    run = secrets.token_hex(3)
    name = f"stszone-helm-dry-{run}"
    try:
        kubectl.create(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {RUN_LABEL: run}},
            }
        )
        yield name
    finally:
        delete_namespace(kubectl, name)


@pytest.mark.parametrize("values", [None, *ci_values()], ids=lambda p: p.name if p else "defaults")
def test_rendered_objects_pass_server_side_validation(
    helm: Helm, kubectl: Kubectl, crds: None, dry_run_namespace: str, values: Path | None
) -> None:
    """`kubectl apply --dry-run=server` accepts every release object of `helm template`, with
    the defaults and with each ci file: strict decoding, the built-in and the CRD schemas, the
    webhook configurations' CEL; the cluster keeps nothing. Objects a ci file puts in another
    namespace (a ServiceMonitor beside Prometheus) go there, made for the test when missing."""
    args = ["--values", str(values)] if values else []
    objects = release(
        helm.template(
            *args, "--api-versions", "monitoring.coreos.com/v1",
            name="stszone-helm-dry", namespace=dry_run_namespace,
        )
    )  # fmt: skip
    stream = json.dumps({"apiVersion": "v1", "kind": "List", "items": copy.deepcopy(objects)})
    elsewhere = {obj["metadata"].get("namespace") for obj in objects} - {None, dry_run_namespace}

    def applied() -> str:
        # Each object names its namespace (the chart sets it on every namespaced one).
        return kubectl.run("apply", "--dry-run=server", "-o", "name", "-f", "-", stdin=stream)

    with ExitStack() as stack:
        for namespace in sorted(elsewhere):
            if kubectl.gone("namespace", namespace):
                run = dry_run_namespace.rsplit("-", 1)[1]
                kubectl.create(
                    {
                        "apiVersion": "v1",
                        "kind": "Namespace",
                        "metadata": {"name": namespace, "labels": {RUN_LABEL: run}},
                    }
                )
                stack.callback(delete_namespace, kubectl, namespace)
        try:
            names = wait_for("the API server to serve the CRDs' kinds", applied, timeout=60)
        except AssertionError as err:
            raise AssertionError(f"{err}\nrendered:\n{yaml.safe_dump_all(objects)}") from None
    assert len(names.split()) == len(objects), names
    assert kubectl.gone("mutatingwebhookconfiguration", "stszone-helm-dry")


def test_a_typo_is_refused_by_the_api_server(kubectl: Kubectl, dry_run_namespace: str) -> None:
    """The dry runs above can fail: a misspelt field in a rendered object is refused."""
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "typo"},
        "spec": {
            "replicass": 1,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": IMAGE}]},
            },
        },
    }
    with pytest.raises(KubectlError) as refused:
        kubectl.within(dry_run_namespace).run(
            "apply", "--dry-run=server", "-o", "name", "-f", "-", stdin=json.dumps(deployment)
        )
    assert "replicass" in refused.value.stderr
