"""The pieces of the self-managed certificates test on a real control plane (test_certs.py).

- :func:`install`: stszone's own namespace with its ServiceAccount and exactly the RBAC the
  manifests render (the webhook's ClusterRole and ``stszone-certs``; cluster-scoped names get
  the run's suffix, the webhook configurations' ``resourceNames`` the run's configuration name),
  a selector-less Service with a ClusterIP in the lab's loopback Service range, and both webhook
  configurations referencing it, with no caBundle.
- :func:`token_kubeconfig`: a kubeconfig holding a token of that ServiceAccount, so the
  processes run with the rendered least privilege, not as an administrator.

The processes, the load and the API server's counts are in :mod:`tests.e2e.replicas`.
"""

from __future__ import annotations

import base64
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.kube import RUN_LABEL, Kubectl, KubectlError
from webhook.install import registration
from webhook.install.certsrbac import certs_rbac
from webhook.install.deploybase import Install, rbac

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
#: The lab's Service range is 127.100.0.0/24 on loopback (../shared/lab/README.md).
SERVICE_RANGE = "127.100.0."
WEBHOOK_NAMES = (registration.MUTATE_NAME, registration.VALIDATE_NAME)


@dataclass(frozen=True, slots=True)
class Lab:
    """What one run installed: its names and the Service's address."""

    run: str
    namespace: str
    workload: str
    config_name: str
    cluster_ip: str


def rbac_objects(lab: Lab) -> list[Obj]:
    """The rendered RBAC for stszone's namespace, cluster-scoped names made the run's own."""
    install = Install(namespace=lab.namespace)
    objects = [*rbac(install), *certs_rbac(install)]
    renamed = {}
    for obj in objects:
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            old = obj["metadata"]["name"]
            renamed[old] = f"{old}-e2e-{lab.run}"
            obj["metadata"] = {**obj["metadata"], "name": renamed[old]}
            obj["metadata"]["labels"] = {**obj["metadata"].get("labels", {}), RUN_LABEL: lab.run}
    for obj in objects:
        if obj["kind"] == "ClusterRoleBinding":
            obj["roleRef"]["name"] = renamed[obj["roleRef"]["name"]]
        for rule in obj.get("rules", []):
            if "mutatingwebhookconfigurations" in rule["resources"]:
                rule["resourceNames"] = [lab.config_name]
    return objects


def _service(ip: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "stszone"},
        "spec": {"clusterIP": ip, "ports": [{"name": "https", "port": 443, "targetPort": 443}]},
    }


def _free_cluster_ip(kubectl: Kubectl, namespace: str) -> str:
    used = {
        svc["spec"].get("clusterIP") for svc in kubectl.get("services", "--all-namespaces")["items"]
    }
    for last in random.sample(range(100, 250), 150):
        ip = f"{SERVICE_RANGE}{last}"
        if ip in used:
            continue
        try:
            kubectl.within(namespace).create(_service(ip))
        except KubectlError as err:
            if "already allocated" in err.stderr:
                continue
            raise
        return ip
    raise AssertionError("no free ClusterIP in 127.100.0.100-249")


def configurations(lab: Lab) -> list[Obj]:
    """Both configurations calling Service stszone in stszone's namespace, caBundle empty."""
    namespaces = registration.namespace_selector(lab.namespace, only=lab.workload)

    def client(path: str) -> Obj:
        return registration.service_client(namespace=lab.namespace, path=path, ca_bundle=None)

    labels = {RUN_LABEL: lab.run}
    return [
        registration.mutating(
            lab.config_name, client=client("/mutate"), namespaces=namespaces, labels=labels
        ),
        registration.validating(
            lab.config_name, client=client("/validate"), namespaces=namespaces, labels=labels
        ),
    ]


def install(kubectl: Kubectl, *, run: str, cleanup: Any, prefix: str = "certs") -> Lab:
    """Namespaces, RBAC, Service, configurations; each deletion registered with ``cleanup``
    (an ExitStack) before its creation, configurations deleted first. ``prefix`` names the
    test in the namespaces and the configurations."""
    namespace, workload = f"stszone-{prefix}-{run}", f"{prefix}-work-{run}"
    for name, labels in ((namespace, {}), (workload, {"stszone.io/enabled": "true"})):
        cleanup.callback(kubectl.delete, "namespace", name)
        kubectl.create(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {**labels, RUN_LABEL: run}},
            }
        )
    ip = _free_cluster_ip(kubectl, namespace)
    lab = Lab(run, namespace, workload, f"stszone-{prefix}-e2e-{run}", ip)
    for obj in rbac_objects(lab):
        if obj["kind"].startswith("Cluster"):
            cleanup.callback(kubectl.delete, obj["kind"].lower(), obj["metadata"]["name"])
        kubectl.create(obj)
    return lab


def register(kubectl: Kubectl, lab: Lab, *, cleanup: Any) -> None:
    """The configurations (deleted before anything else on the way out)."""
    for config in configurations(lab):
        cleanup.callback(kubectl.delete, config["kind"].lower(), lab.config_name)
        kubectl.create(config)


def token_kubeconfig(kubectl: Kubectl, lab: Lab, path: Path) -> Path:
    """A kubeconfig with a token of ServiceAccount stszone (the lab's server and CA)."""
    token = (
        kubectl.within(lab.namespace).run("create", "token", "stszone", "--duration", "2h").strip()
    )
    admin = yaml.safe_load(Path(kubectl.kubeconfig).read_text())
    cluster = dict(admin["clusters"][0]["cluster"])
    authority = cluster.pop("certificate-authority", None)
    if authority is not None:
        base = Path(kubectl.kubeconfig).parent
        cluster["certificate-authority-data"] = base64.b64encode(
            (base / authority).read_bytes()
        ).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": cluster}],
        "users": [{"name": "stszone", "user": {"token": token}}],
        "contexts": [{"name": "stszone", "context": {"cluster": "lab", "user": "stszone"}}],
        "current-context": "stszone",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def secret_state(kubectl: Kubectl, lab: Lab) -> Obj | None:
    try:
        secret: Obj = kubectl.within(lab.namespace).get("secret", "stszone-tls")
    except KubectlError as err:
        if "NotFound" in err.stderr:
            return None
        raise
    return secret


def bundle_of(kubectl: Kubectl, lab: Lab, kind: str) -> bytes:
    config = kubectl.get(kind.lower(), lab.config_name)
    return base64.b64decode(config["webhooks"][0]["clientConfig"].get("caBundle", ""))
