"""Credentials that change while ``stszone serve`` runs, on a real control plane.

stszone runs as a ServiceAccount bound to exactly the rendered RBAC, from a kubeconfig whose
user reads its token from a file (``tokenFile``), as a projected token is read: the kubelet swaps
a new token into the file and the old one stops being accepted. Here each token is bound to a
Secret, so deleting the Secret revokes it at once (a projected token's pod does the same).
stszone reaches the API server through a relay (:mod:`tests.e2e.relay`) that the test cuts, so
that its watches reconnect and are authenticated again after each change, instead of riding
connections opened before it.
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import ssl
import urllib.error
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from tests.e2e.conftest import (
    MADE_UP_ZONES,
    delete_namespace,
    opted_in_namespace,
    schedulable_zones,
)
from tests.e2e.kube import RUN_LABEL, Kubectl, wait_for, workload
from tests.e2e.relay import Relay, relaying
from tests.e2e.server import ROOT, STOP_TIMEOUT
from tests.process import Webhook, start_serve
from webhook.install.deploybase import Install, rbac

Obj = dict[str, Any]
IMAGE = os.environ.get("STSZONE_E2E_IMAGE", "registry.k8s.io/pause:3.10")
#: ``--max-unsynced``: longer than the 10 s a reconnected watch of a quiet resource takes to
#: prove itself, so that reconnecting alone never fails readiness.
MAX_UNSYNCED = 12.0
#: Seconds to wait for anything here; the failing watches' backoff reaches 12.8 s by the time
#: readiness fails, so a fixed kubeconfig may wait that long for the next attempt.
WAIT = 60.0


def _rbac(namespace: str, run: str) -> list[Obj]:
    """The webhook's rendered ServiceAccount, ClusterRole and binding; the cluster-scoped ones
    named after ``namespace`` so that runs do not collide."""
    objects = rbac(Install(namespace=namespace))
    for obj in objects:
        if obj["kind"].startswith("Cluster"):
            labels = {**obj["metadata"].get("labels", {}), RUN_LABEL: run}
            obj["metadata"] = {**obj["metadata"], "name": namespace, "labels": labels}
        if obj["kind"] == "ClusterRoleBinding":
            obj["roleRef"]["name"] = namespace
    return objects


def _secret(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}}


def _token(kubectl: Kubectl, secret: str) -> str:
    """A token of ServiceAccount stszone, valid while Secret ``secret`` exists."""
    return kubectl.run(
        "create", "token", "stszone", "--duration", "10m",
        "--bound-object-kind", "Secret", "--bound-object-name", secret,
    ).strip()  # fmt: skip


def _rotate(token_file: Path, token: str) -> None:
    """Swap a new token in as the kubelet does: a new file renamed over the old one."""
    fresh = token_file.with_name(token_file.name + ".new")
    fresh.write_text(token)
    fresh.replace(token_file)


class ApiServer:
    """The lab's API server as the admin's kubeconfig names it: its address, its CA."""

    def __init__(self, kubectl: Kubectl, work: Path) -> None:
        admin = yaml.safe_load(Path(kubectl.kubeconfig).read_text())
        self.cluster: Obj = dict(admin["clusters"][0]["cluster"])
        self.ca = work / "apiserver-ca.crt"
        data = self.cluster.pop("certificate-authority-data", None)
        if data is not None:
            self.ca.write_bytes(base64.b64decode(data))
        else:
            authority = Path(kubectl.kubeconfig).parent / self.cluster["certificate-authority"]
            self.ca.write_bytes(authority.read_bytes())
        url = urlsplit(self.cluster["server"])
        self.host, self.port = url.hostname or "", url.port or 443

    def kubeconfig(self, path: Path, relay: Relay, *, insecure: bool = False) -> None:
        """stszone's kubeconfig: the API server through ``relay``, the token from ``token``
        beside it; ``insecure`` adds ``insecure-skip-tls-verify: true`` beside the CA."""
        cluster: Obj = {
            "server": f"https://127.0.0.1:{relay.port}",
            "certificate-authority": str(self.ca),
        }
        if self.host != "127.0.0.1":
            cluster["tls-server-name"] = self.host
        if insecure:
            cluster["insecure-skip-tls-verify"] = True
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "lab", "cluster": cluster}],
            "users": [{"name": "stszone", "user": {"tokenFile": "token"}}],
            "contexts": [{"name": "stszone", "context": {"cluster": "lab", "user": "stszone"}}],
            "current-context": "stszone",
        }
        # Replaced whole, as a mounted ConfigMap is: stszone never reads half an edit.
        written = path.with_name(path.name + ".new")
        written.write_text(yaml.safe_dump(config))
        written.replace(path)

    def refuses(self, token: str) -> bool:
        """True once the API server answers a request carrying ``token`` with 401."""
        request = urllib.request.Request(
            f"https://{self.host}:{self.port}/api", headers={"Authorization": f"Bearer {token}"}
        )
        try:
            with urllib.request.urlopen(
                request, context=ssl.create_default_context(cafile=self.ca), timeout=10
            ):
                return False
        except urllib.error.HTTPError as err:
            return err.code == 401


def _gauged(server: Webhook, namespace: str, name: str) -> bool:
    """Whether ``/metrics`` has the zone-risk gauges of StatefulSet ``namespace/name``."""
    status, text = server.fetch("/metrics")
    labels = rf'namespace="{re.escape(namespace)}",statefulset="{re.escape(name)}"'
    return (
        status == 200
        and re.search(rf"^stszone_statefulset_replicas\{{[^}}]*{labels}", text, re.M) is not None
    )


def test_a_rotated_token_file_is_used_and_a_refused_kubeconfig_is_not(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    """(1) The token file is swapped for a new token and the old one revoked: once stszone's
    connections are cut, its watches reconnect with the new token (the API server refuses none
    with 401), it is Ready and sees a StatefulSet created after. (2) The kubeconfig is edited
    to ``insecure-skip-tls-verify: true`` beside its CA, which loading refuses, and the token
    rotates: stszone does not take it (no connection is made with it), keeps running, and
    ``/readyz`` fails naming the refusal once the watches have been down for ``--max-unsynced``,
    as docs/operations.md says. (3) The kubeconfig is fixed: stszone takes it without a restart."""
    run = secrets.token_hex(3)
    namespace = f"stszone-e2e-reload-{run}"
    zones = sorted(schedulable_zones(kubectl)) or list(MADE_UP_ZONES)
    scoped = kubectl.within(namespace)
    api = ApiServer(kubectl, tmp_path)
    config, token_file = tmp_path / "kubeconfig", tmp_path / "token"
    with ExitStack() as stack:
        stack.callback(delete_namespace, kubectl, namespace)
        kubectl.create(opted_in_namespace(namespace, run))
        for obj in _rbac(namespace, run):
            if obj["kind"].startswith("Cluster"):
                stack.callback(kubectl.delete, obj["kind"].lower(), obj["metadata"]["name"])
                kubectl.create(obj)
            else:
                scoped.create(obj)
        for name in ("first", "second"):
            scoped.create(_secret(name))
        first = _token(scoped, "first")
        token_file.write_text(first)
        relay = stack.enter_context(relaying((api.host, api.port)))
        api.kubeconfig(config, relay)
        server = start_serve(
            tmp_path,
            "--kubeconfig", str(config),
            "--zones", ",".join(zones),
            "--max-unsynced", str(MAX_UNSYNCED),
            "--zone-risk-interval", "1",
            "--log-level", "debug",
            cwd=ROOT,
            ready="/readyz",
            wait=WAIT,
        )  # fmt: skip
        stack.callback(server.stop, grace=STOP_TIMEOUT)

        def made(name: str) -> None:
            scoped.create(workload("StatefulSet", name, image=IMAGE, replicas=0, labels={}))
            wait_for(
                f"StatefulSet {name} in stszone's /metrics",
                lambda: _gauged(server, namespace, name),
                timeout=WAIT,
                interval=0.5,
            )

        made("before")

        # (1) The kubelet's rotation, then the old token's end.
        _rotate(token_file, _token(scoped, "second"))
        scoped.delete("secret", "first")
        wait_for(
            "the API server to refuse the revoked token", lambda: api.refuses(first), timeout=WAIT
        )
        relay.cut()
        made("after")
        wait_for("stszone to be Ready", lambda: server.get("/readyz") == 200, timeout=WAIT)
        refused = [line for line in server.log.read_text().splitlines() if "HTTP 401" in line]
        assert refused == [], "\n".join(refused)

        # (2) An edit that loading refuses, and the token rotates with it.
        api.kubeconfig(config, relay, insecure=True)
        _rotate(token_file, scoped.run("create", "token", "stszone", "--duration", "10m").strip())
        relay.cut()
        connected = relay.accepted

        def unready() -> str | None:
            status, body = server.fetch("/readyz")
            return body if status == 503 else None

        body = wait_for("stszone's /readyz to fail", unready, timeout=WAIT, interval=0.5)
        assert relay.accepted == connected, "a connection was made with the refused kubeconfig"
        assert "sets both insecure-skip-tls-verify: true and certificate-authority" in body, body
        assert server.proc.poll() is None

        # (3) Fixed: taken at the next attempt.
        api.kubeconfig(config, relay)
        made("fixed")
        wait_for("stszone to be Ready", lambda: server.get("/readyz") == 200, timeout=WAIT)
