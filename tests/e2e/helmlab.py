"""The pieces of the Helm chart's test on a real control plane (test_helm.py).

The lab's fake kubelet runs no container, so what a pod of the release would run runs here:

- :func:`serving_release`: ``stszone serve`` as a replica of the installed Deployment runs it:
  the container's own args, its environment (``POD_NAMESPACE``, ``POD_NAME`` of one of the
  Deployment's pods), and a token of the Deployment's ServiceAccount, so the chart's RBAC decides
  what it may read and write; bound to the installed Service's ClusterIP:443 (the lab's Service
  range is on loopback), so the API server calls it through the chart's own webhook
  configurations. With self-managed certificates it starts from nothing: it makes the Secret
  and injects the caBundles itself, and is Ready once it serves the Secret's pair.
- :func:`play_kubelet`: the ``helm test`` pod's command, run here as its ServiceAccount, its
  exit status reported as the pod's phase.
- :func:`uninstall`, :func:`delete_cluster_scoped`, :func:`leftovers`: the release removed, its
  cluster-scoped objects deleted even when helm could not remove them, and what is left.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from tests.e2e.kube import Kubectl, KubectlError, Obj, wait_for
from tests.e2e.server import READY_TIMEOUT, ROOT, STOP_TIMEOUT
from tests.helm import Helm, HelmError
from tests.kubeconfig import write_kubeconfig
from tests.process import Webhook, clean_environ, tail
from webhook.cli import build_parser, settings_from
from webhook.config import Settings
from webhook.install import tlssecret

#: Seconds to wait for pods to be scheduled (tests/e2e/conftest.py).
TIMEOUT = float(os.environ.get("STSZONE_E2E_TIMEOUT", "180"))
CONFIG_KINDS = ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")


def lab_server(kubectl: Kubectl, work: Path) -> tuple[str, Path]:
    """The API server's URL and its CA (as a file) from the admin kubeconfig."""
    config = yaml.safe_load(Path(kubectl.kubeconfig).read_text())
    cluster = config["clusters"][0]["cluster"]
    ca = work / "apiserver-ca.crt"
    if "certificate-authority-data" in cluster:
        ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    else:
        ca.write_bytes(
            (Path(kubectl.kubeconfig).parent / cluster["certificate-authority"]).read_bytes()
        )
    return cluster["server"], ca


def token_kubeconfig(kubectl: Kubectl, *, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig holding a token of ServiceAccount ``namespace/account``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    token = kubectl.within(namespace).run("create", "token", account, "--duration", "1h")
    server, ca = lab_server(kubectl, path.parent)
    write_kubeconfig(path, server=server, token=token.strip(), ca=ca)
    path.chmod(0o600)
    return path


def find(kubectl: Kubectl, kind: str, name: str) -> Obj | None:
    """The object, or None when it does not exist."""
    try:
        found: Obj = kubectl.get(kind, name)
    except KubectlError as err:
        if "NotFound" in err.stderr:
            return None
        raise
    return found


def ca_bundles(kubectl: Kubectl, name: str) -> dict[str, str | None]:
    """Configuration kind -> the caBundle of its webhook (None: no caBundle field)."""
    return {
        kind: kubectl.get(kind, name)["webhooks"][0]["clientConfig"].get("caBundle")
        for kind in CONFIG_KINDS
    }


def ca_bundle_managers(kubectl: Kubectl, name: str) -> dict[str, list[str]]:
    """Configuration kind -> the field managers (``manager/operation``) owning its caBundle."""
    owners: dict[str, list[str]] = {}
    for kind in CONFIG_KINDS:
        config = kubectl.get(kind, name, "--show-managed-fields")
        owners[kind] = [
            f"{entry['manager']}/{entry['operation']}"
            for entry in config["metadata"].get("managedFields", [])
            if '"f:caBundle"' in json.dumps(entry.get("fieldsV1", {}))
        ]
    return owners


def uninstall(helm: Helm, name: str, namespace: str) -> None:
    """Remove the release if it is there (the cleanup path: a missing release is fine)."""
    try:
        helm.run("uninstall", name, "--namespace", namespace, "--wait", "--ignore-not-found")
    except HelmError as err:
        raise AssertionError(
            f"{err}\nclean up by hand: helm uninstall {name} -n {namespace}"
        ) from None


def delete_cluster_scoped(kubectl: Kubectl, name: str) -> None:
    """The release's webhook configurations and cluster RBAC, whatever helm managed: they
    outlive its namespace, and its webhooks (failurePolicy Fail) match every opted-in
    namespace of the cluster, refusing the next runs' StatefulSet pods."""
    kinds = "mutatingwebhookconfigurations,validatingwebhookconfigurations,clusterroles,"
    kinds += "clusterrolebindings"
    selector = f"app.kubernetes.io/instance={name}"
    kubectl.run("delete", kinds, "-l", selector, "--ignore-not-found", "--wait=false")


def leftovers(kubectl: Kubectl, name: str) -> str:
    """Every object labelled with the release, cluster-wide; empty when none is left."""
    kinds = (
        "mutatingwebhookconfigurations,validatingwebhookconfigurations,clusterroles,"
        "clusterrolebindings,deployments,services,secrets,serviceaccounts,"
        "poddisruptionbudgets,roles,rolebindings,pods,leases,resourcequotas,networkpolicies,"
        "configmaps"
    )
    selector = f"app.kubernetes.io/instance={name}"
    return kubectl.run("get", kinds, "--all-namespaces", "-l", selector, "-o", "name").strip()


class Replica:
    """One local ``stszone serve`` standing in for a pod of the installed Deployment, which
    must run ``--manage-certs`` (the chart's default: it needs nothing but the cluster)."""

    def __init__(self, kubectl: Kubectl, *, name: str, namespace: str, work: Path) -> None:
        scoped = kubectl.within(namespace)
        self.kubectl, self.namespace = kubectl, namespace
        self.address = scoped.get("service", name)["spec"]["clusterIP"]
        deployment = scoped.get("deployment", name)
        spec = deployment["spec"]["template"]["spec"]
        (self.container,) = spec["containers"]
        labels = deployment["spec"]["selector"]["matchLabels"]
        selector = ",".join(f"{key}={value}" for key, value in labels.items())
        pods = scoped.get("pods", "-l", selector)["items"]
        assert pods, f"deployment {name} has no pod to stand in for"
        fields = {"metadata.namespace": namespace, "metadata.name": pods[0]["metadata"]["name"]}
        self.environ = {
            item["name"]: fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
            for item in self.container.get("env", [])
        }
        args = build_parser().parse_args(["serve", *self.container["args"]])
        self.settings: Settings = settings_from(args, environ=self.environ)
        assert self.settings.manage_certs, self.container["args"]
        work.mkdir(parents=True, exist_ok=True)
        account = spec["serviceAccountName"]
        self.kubeconfig = token_kubeconfig(
            kubectl, namespace=namespace, account=account, path=work / "sa.kubeconfig"
        )
        self.log = work / "serve.log"

    def start(self) -> Webhook:
        """Start it; return it once ``/readyz`` answers 200 over TLS verified by the Secret's
        CA bundle (the Secret it, or an earlier replica, wrote)."""
        cmd = [
            sys.executable, "-m", "webhook", "serve", *self.container["args"],
            "--kubeconfig", str(self.kubeconfig),
            "--host", self.address,
            "--port", "443",
        ]  # fmt: skip
        environ = {**clean_environ(), **self.environ}
        with self.log.open("ab") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=environ, cwd=ROOT
            )
        server = Webhook(proc, self.address, 443, ssl.create_default_context(), self.log)
        try:
            wait_for(
                "stszone serve to be Ready", lambda: self._ready(server), timeout=READY_TIMEOUT
            )
        except AssertionError as err:
            server.stop(grace=STOP_TIMEOUT)
            raise AssertionError(f"{err}\n{tail(self.log)}") from None
        return server

    def _ready(self, server: Webhook) -> bool:
        if server.proc.poll() is not None:
            raise AssertionError(f"stszone serve exited {server.proc.returncode}")
        secret = find(self.kubectl.within(self.namespace), "secret", self.settings.certs_secret)
        bundle = (secret or {}).get("data", {}).get(tlssecret.BUNDLE)
        if not bundle:
            return False
        server.ctx = ssl.create_default_context(cadata=base64.b64decode(bundle).decode())
        server.ctx.check_hostname = False  # a Service's DNS name, served at its ClusterIP
        try:
            return server.get("/readyz") == 200
        except (OSError, ssl.SSLError):
            return False


@contextmanager
def serving_release(
    kubectl: Kubectl, *, name: str, namespace: str, work: Path
) -> Iterator[Webhook]:
    """One replica of the release, served here until the block ends."""
    server = Replica(kubectl, name=name, namespace=namespace, work=work).start()
    try:
        yield server
    finally:
        server.stop(grace=STOP_TIMEOUT)


def play_kubelet(
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
    account = pod["spec"]["serviceAccountName"]
    config = token_kubeconfig(
        kubectl, namespace=namespace, account=account, path=work / "test-pod.kubeconfig"
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
