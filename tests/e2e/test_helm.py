"""charts/stszone on a real API server: install, place, `helm test`, upgrade, uninstall.

The chart is installed with the real helm (a server-side dry run first). A cluster whose pods
never run a container (the lab's fake kubelet only reports them Running) cannot run stszone's
image, so the webhook is served the way every end-to-end test serves it: ``stszone serve`` on
this machine, here with the installed Deployment's own arguments, the Secret the chart
generated, bound to the installed Service's ClusterIP on port 443 (the lab's Service range is on
loopback), so that the API server calls it through the chart's own webhook configurations. The
same stands in for the kubelet of the ``helm test`` pod: its command runs here, as its
ServiceAccount, and its exit status becomes the pod's phase.

The installed webhooks match every opted-in namespace of the cluster (as in production), so
run these tests only where nothing else runs (the lab lock). Everything is removed at the end,
the release (webhook configurations first) before the namespaces, whether the test passes or
fails; after a SIGKILL: ``helm uninstall stszone-helm-RUN -n stszone-helm-RUN``.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import delete_namespace, opted_in_namespace
from tests.e2e.kube import (
    MARKS,
    RUN_LABEL,
    ZONE_KEY,
    Kubectl,
    KubectlError,
    Obj,
    wait_for,
    workload,
)
from tests.e2e.server import READY_TIMEOUT, ROOT, STOP_TIMEOUT
from tests.helm import CHART, Helm, HelmError, ci_values, helm_for_tests, release
from tests.kubeconfig import write_kubeconfig
from tests.process import Webhook, start_serve

pytestmark = MARKS

TIMEOUT = float(os.environ.get("STSZONE_E2E_TIMEOUT", "180"))
IMAGE = os.environ.get("STSZONE_E2E_IMAGE", "registry.k8s.io/pause:3.10")
#: Where the Deployment mounts the serving pair (templates/deployment.yaml).
TLS_DIR = "/etc/stszone/tls"
SHARED_CRDS = ROOT.parent / "shared" / "lab" / "crds"
#: The CRDs the chart's optional objects need, applied for the dry runs when the cluster lacks
#: them (and deleted afterwards).
CRD_FILES = {
    "certificates.cert-manager.io": Path(
        os.environ.get("STSZONE_CERT_MANAGER_CRDS", SHARED_CRDS / "cert-manager.yaml")
    ),
    "servicemonitors.monitoring.coreos.com": Path(
        os.environ.get("STSZONE_CRDS", SHARED_CRDS / "prometheus-operator.yaml")
    ),
}
REPLICAS = 6


@pytest.fixture(scope="module")
def helm(kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """The pinned helm, talking to the end-to-end cluster."""
    return helm_for_tests(tmp_path_factory.mktemp("helm-home"), kubeconfig=kubectl.kubeconfig)


def _uninstall(helm: Helm, name: str, namespace: str) -> None:
    """Remove the release if it is there (the cleanup path: a missing release is fine)."""
    try:
        helm.run("uninstall", name, "--namespace", namespace, "--wait", "--ignore-not-found")
    except HelmError as err:
        raise AssertionError(
            f"{err}\nclean up by hand: helm uninstall {name} -n {namespace}"
        ) from None


def _lab_server(kubectl: Kubectl, work: Path) -> tuple[str, Path]:
    """The API server's URL and its CA (as a file) from the admin kubeconfig."""
    config = yaml.safe_load(Path(kubectl.kubeconfig).read_text())
    cluster = config["clusters"][0]["cluster"]
    ca = work / "apiserver-ca.crt"
    if "certificate-authority-data" in cluster:
        ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    else:
        ca.write_bytes(Path(cluster["certificate-authority"]).read_bytes())
    return cluster["server"], ca


@contextmanager
def serving_release(
    kubectl: Kubectl, *, name: str, namespace: str, work: Path
) -> Iterator[Webhook]:
    """``stszone serve`` with the installed Deployment's arguments and Secret, at the Service's
    ClusterIP:443, until the block ends."""
    scoped = kubectl.within(namespace)
    address = scoped.get("service", name)["spec"]["clusterIP"]
    volumes = scoped.get("deployment", name)["spec"]["template"]["spec"]
    secret_name = next(v["secret"]["secretName"] for v in volumes["volumes"] if v["name"] == "tls")
    tls = work / "tls"
    tls.mkdir(parents=True)
    for key, value in scoped.get("secret", secret_name)["data"].items():
        (tls / key).write_bytes(base64.b64decode(value))
    args = [arg.replace(TLS_DIR, str(tls)) for arg in volumes["containers"][0]["args"]]
    server = start_serve(
        work,
        *args,
        "--kubeconfig", kubectl.kubeconfig,
        environ={**os.environ, "POD_NAMESPACE": namespace},
        cwd=ROOT,
        bind=address,
        port=443,
        ca=tls / "ca.crt",
        check_hostname=False,
        ready="/readyz",
        wait=READY_TIMEOUT,
    )  # fmt: skip
    try:
        yield server
    finally:
        server.stop(grace=STOP_TIMEOUT)


def _probe(run: str) -> Obj:
    return workload("StatefulSet", "probe", image=IMAGE, replicas=0, labels={RUN_LABEL: run})


def _mutated(kubectl: Kubectl, run: str) -> str | None:
    """The zone list a dry-run StatefulSet create comes back with (None: not mutated)."""
    created = kubectl.create(_probe(run), dry_run=True)
    zones: str | None = created["metadata"].get("annotations", {}).get("stszone.io/zones")
    return zones


def _place(kubectl: Kubectl, run: str, zones: list[str]) -> list[Obj]:
    """A StatefulSet of REPLICAS; its pods once all are scheduled, each pinned to its zone."""
    kubectl.create(
        workload("StatefulSet", "db", image=IMAGE, replicas=REPLICAS, labels={RUN_LABEL: run})
    )

    def scheduled() -> list[Obj] | None:
        pods: list[Obj] = kubectl.get("pods", "-l", "app=db")["items"]
        done = len(pods) == REPLICAS and all(pod["spec"].get("nodeName") for pod in pods)
        return pods if done else None

    try:
        return wait_for("every pod of db to be scheduled", scheduled, timeout=TIMEOUT, interval=2)
    except AssertionError as err:
        events = kubectl.run("get", "events", "--field-selector", "involvedObject.name=db")
        raise AssertionError(f"{err}\nevents of statefulset db:\n{events}") from None


def _play_kubelet(
    kubectl: Kubectl, *, pod_name: str, namespace: str, work: Path
) -> subprocess.CompletedProcess[str]:
    """Run the ``helm test`` pod's command here, as its ServiceAccount, and report its exit
    status as the pod's phase (what the kubelet would do once the container exits)."""
    scoped = kubectl.within(namespace)

    def bound() -> Obj | None:
        pod = scoped.get("pod", pod_name)
        return pod if pod["spec"].get("nodeName") else None

    pod = wait_for(f"the helm test pod {pod_name} to be scheduled", bound, timeout=TIMEOUT)
    check = pod["spec"]["containers"][0]
    assert check["command"][0] == "python", check["command"]
    token = scoped.run("create", "token", pod["spec"]["serviceAccountName"], "--duration", "10m")
    server, ca = _lab_server(kubectl, work)
    config = write_kubeconfig(
        work / "test-pod.kubeconfig", server=server, token=token.strip(), ca=ca
    )
    env = {item["name"]: item.get("value", "") for item in check.get("env", [])}
    environ = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(work),
        "KUBECONFIG": str(config),
        **env,
    }
    done = subprocess.run(
        [sys.executable, *check["command"][1:], *check.get("args", [])],
        env=environ, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    now = pod["status"].get("startTime")
    terminated = {
        "exitCode": done.returncode,
        "reason": "Completed" if done.returncode == 0 else "Error",
        "startedAt": now,
        "finishedAt": now,
    }
    status = {
        "phase": "Succeeded" if done.returncode == 0 else "Failed",
        "containerStatuses": [
            {
                "name": check["name"],
                "image": check["image"],
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {"terminated": terminated},
            }
        ],
    }
    scoped.run(
        "patch",
        "pod",
        pod_name,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )
    return done


def _leftovers(kubectl: Kubectl, name: str) -> str:
    """Every object labelled with the release, cluster-wide; empty when none is left."""
    kinds = (
        "mutatingwebhookconfigurations,validatingwebhookconfigurations,clusterroles,"
        "clusterrolebindings,deployments,services,secrets,serviceaccounts,"
        "poddisruptionbudgets,roles,rolebindings,pods"
    )
    selector = f"app.kubernetes.io/instance={name}"
    return kubectl.run("get", kinds, "--all-namespaces", "-l", selector, "-o", "name").strip()


def test_install_place_test_upgrade_uninstall(helm: Helm, kubectl: Kubectl, tmp_path: Path) -> None:
    """The newcomer's path, with the chart's defaults: a server-side dry run changes nothing;
    the install answers through the API server; a StatefulSet is placed by ordinal; `helm
    test` passes; an upgrade to 3 replicas keeps the certificate; the uninstall leaves no
    webhook configuration, so pods are created again with nothing answering."""
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
        stack.callback(_uninstall, helm, name, namespace)

        out = helm.run(*install, "--dry-run=server")
        assert "STATUS: pending-install" in out, out
        assert kubectl.gone("mutatingwebhookconfiguration", name), (
            "the dry run registered a webhook"
        )
        assert kubectl.gone("namespace", namespace), "the dry run made the release namespace"

        kubectl.create(opted_in_namespace(apps, run))
        db = kubectl.within(apps)
        out = helm.run(*install, "--wait", "--timeout", f"{TIMEOUT:.0f}s")
        assert "STATUS: deployed" in out, out
        assert "kubectl label namespace my-db stszone.io/enabled=true" in out, out
        scoped = kubectl.within(namespace)
        secret_before = scoped.get("secret", f"{name}-tls")["data"]
        webhook = stack.enter_context(
            serving_release(kubectl, name=name, namespace=namespace, work=tmp_path / "serve")
        )

        zones = wait_for(
            "the API server to call the installed webhook", lambda: _mutated(db, run), timeout=60
        )
        zone_list = zones.split(",")
        assert len(zone_list) >= 2, zones
        pods = _place(db, run, zone_list)
        node_zone = {
            node["metadata"]["name"]: node["metadata"].get("labels", {}).get(ZONE_KEY)
            for node in kubectl.get("nodes")["items"]
        }
        assert db.get("statefulset", "db")["metadata"]["annotations"]["stszone.io/zones"] == zones
        for pod in pods:
            pod_name = pod["metadata"]["name"]
            expected = zone_list[int(pod_name.rsplit("-", 1)[1]) % len(zone_list)]
            assert pod["metadata"]["annotations"]["stszone.io/zone"] == expected, pod_name
            assert node_zone[pod["spec"]["nodeName"]] == expected, pod_name

        tester = subprocess.Popen(
            [str(helm.binary), "test", name, "--namespace", namespace, "--timeout", f"{TIMEOUT:.0f}s"],
            env=helm.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            checked = _play_kubelet(
                kubectl, pod_name=f"{name}-test", namespace=namespace, work=tmp_path
            )
            tested, _ = tester.communicate(timeout=TIMEOUT)
        except (AssertionError, subprocess.TimeoutExpired) as err:
            tester.kill()
            raise AssertionError(f"{err}\nhelm test said:\n{tester.communicate()[0]}") from None
        finally:
            if tester.poll() is None:
                tester.kill()
                tester.wait()
        assert checked.returncode == 0, f"{checked.stdout}{checked.stderr}"
        assert f"got stszone.io/zones={zones}" in checked.stdout, checked.stdout
        assert tester.returncode == 0, tested
        phases = re.findall(r"^Phase:\s+(\w+)$", tested, flags=re.MULTILINE)
        assert phases and set(phases) == {"Succeeded"}, tested
        assert kubectl.gone("namespace", f"{name}-test"), "helm test left its namespace behind"

        out = helm.run(
            "upgrade", name, chart, "--namespace", namespace, "--reuse-values",
            "--set", "replicas=3", "--wait", "--timeout", f"{TIMEOUT:.0f}s",
        )  # fmt: skip
        assert "STATUS: deployed" in out and "REVISION: 2" in out, out
        assert scoped.get("deployment", name)["spec"]["replicas"] == 3
        assert scoped.get("secret", f"{name}-tls")["data"] == secret_before, (
            "the upgrade made a new pair"
        )
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            bundle = kubectl.get(kind, name)["webhooks"][0]["clientConfig"]["caBundle"]
            assert bundle == secret_before["ca.crt"], kind
        assert _mutated(db, run) == zones, "the upgraded release does not reach the webhook"

        out = helm.run("uninstall", name, "--namespace", namespace, "--wait")
        assert f'release "{name}" uninstalled' in out, out
        webhook.stop(grace=STOP_TIMEOUT)
        assert not _leftovers(kubectl, name), f"left behind: {_leftovers(kubectl, name)}"
        with pytest.raises(HelmError):
            helm.run("status", name, "--namespace", namespace)
        db.run("scale", "statefulset", "db", f"--replicas={REPLICAS + 1}")

        def created() -> Obj | None:
            pod: Obj = db.get("pod", f"db-{REPLICAS}")
            return pod

        pod = wait_for("a pod created with stszone uninstalled", created, timeout=TIMEOUT)
        assert "stszone.io/zone" not in pod["metadata"].get("annotations", {})


@pytest.fixture(scope="module")
def crds(kubectl: Kubectl) -> Iterator[None]:
    """The cert-manager and Prometheus Operator CRDs, applied for this module when missing."""
    applied: list[str] = []
    try:
        for crd, path in CRD_FILES.items():
            if not kubectl.gone("crd", crd):
                continue
            if not path.is_file():
                pytest.fail(f"the cluster lacks {crd} and {path} does not exist", pytrace=False)
            names = kubectl.run("apply", "--server-side", "-o", "name", "-f", str(path)).split()
            applied += names
            for item in names:
                kubectl.run("wait", "--for=condition=Established", item, "--timeout=60s")
        yield
    finally:
        for item in applied:
            kubectl.run("delete", item, "--ignore-not-found", "--wait=false")


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
    webhook configurations' CEL; the cluster keeps nothing."""
    args = ["--values", str(values)] if values else []
    objects = release(
        helm.template(
            *args, "--api-versions", "monitoring.coreos.com/v1",
            name="stszone-helm-dry", namespace=dry_run_namespace,
        )
    )  # fmt: skip
    stream = json.dumps({"apiVersion": "v1", "kind": "List", "items": copy.deepcopy(objects)})
    scoped = kubectl.within(dry_run_namespace)

    def applied() -> str:
        return scoped.run("apply", "--dry-run=server", "-o", "name", "-f", "-", stdin=stream)

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
