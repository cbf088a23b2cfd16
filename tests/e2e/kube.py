"""A small, bounded kubectl driver for the end-to-end tests.

Every call has a timeout, every wait has a deadline, and failures carry kubectl's own words:
these tests run against someone's real control plane, so nothing may hang or fail silently.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tests.process import Webhook
from tests.rendered import ROOT

Obj = dict[str, Any]
T = TypeVar("T")
ZONE_KEY = "topology.kubernetes.io/zone"
#: The node label naming the node itself.
HOSTNAME = "kubernetes.io/hostname"
#: On everything a run creates, valued with the run's id.
RUN_LABEL = "stszone.io/e2e"
#: The lab's folder (its binaries, kubeconfig and state): ``$STSZONE_LAB``, else ``~/stszone-lab``.
LAB = Path(os.environ.get("STSZONE_LAB", str(Path.home() / "stszone-lab")))
#: The finalizer that holds a set while it is being deleted (:func:`release` takes it off).
HOLD = "e2e.stszone.io/hold"


def lab_file(name: str) -> Path:
    """A file of the lab's scripts (``nodes.sh``, ``crds/strimzi.yaml``), from the first folder
    holding it where ``.ci/run`` looks: ``$STSZONE_LAB_SCRIPTS``, ``../shared/lab`` beside the
    repository, the lab's folder. When none does, where the first would hold it, for the
    message that says it is missing."""
    scripts = os.environ.get("STSZONE_LAB_SCRIPTS")
    folders = [Path(scripts)] if scripts else []
    folders += [ROOT.parent / "shared" / "lab", LAB]
    return next((f / name for f in folders if (f / name).exists()), folders[0] / name)


def crd_file(variable: str, name: str) -> Path:
    """The CRDs file ``$variable`` names, else the lab's ``crds/<name>`` (:func:`lab_file`)."""
    return Path(os.environ.get(variable) or lab_file(f"crds/{name}"))


def crd_names(path: Path) -> list[str]:
    """The names of the CustomResourceDefinitions of a YAML file."""
    return [
        doc["metadata"]["name"]
        for doc in yaml.safe_load_all(path.read_text())
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
    ]


@contextmanager
def applied_crds(kubectl: Kubectl, path: Path) -> Iterator[list[str]]:
    """Apply the CRDs of ``path`` and wait until those the cluster lacked are Established;
    afterwards delete exactly those, however the apply, the wait or the block ends.

    The deletions are registered before the apply: kubectl applies a file object by object,
    so one that fails half-way has made the first CRDs already. A CRD the cluster served
    before is left alone (deleting it would delete every object of its kind)."""
    missing = [name for name in crd_names(path) if kubectl.gone("crd", name)]
    with ExitStack() as stack:
        for name in missing:
            stack.callback(
                kubectl.run, "delete", f"crd/{name}", "--ignore-not-found", "--wait=false"
            )
        kubectl.run("apply", "--server-side", "-f", str(path))
        for name in missing:
            # Polled, not `kubectl wait`: a CRD whose status has no conditions yet makes
            # kubectl wait fail (".status.conditions accessor error") instead of waiting.
            wait_for(
                f"CRD {name} to be established",
                functools.partial(established, kubectl, name),
                timeout=60,
                interval=0.2,
            )
        yield missing


def established(kubectl: Kubectl, crd: str) -> bool:
    """Whether CustomResourceDefinition ``crd`` is Established (its kind is served)."""
    conditions = kubectl.get("crd", crd).get("status", {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


class KubectlError(AssertionError):
    """kubectl exited non-zero; ``stderr`` holds its message (e.g. a webhook's denial).

    ``started`` and ``ended`` (``time.monotonic()``, the end taken as the error is made) say when
    the call ran, so that a failure can be told by when it happened as well as by what it says.
    """

    def __init__(
        self, args: Sequence[str], returncode: int, stderr: str, *, started: float | None = None
    ) -> None:
        super().__init__(f"kubectl {' '.join(args)} exited {returncode}: {stderr.strip()}")
        self.returncode = returncode
        self.stderr = stderr
        self.ended = time.monotonic()
        self.started = self.ended if started is None else started


@dataclass(frozen=True, slots=True)
class Kubectl:
    """kubectl bound to one kubeconfig (and, optionally, one namespace)."""

    binary: str
    kubeconfig: str
    namespace: str | None = None
    timeout: float = 60.0

    def within(self, namespace: str) -> Kubectl:
        """The same kubectl, scoped to ``namespace``."""
        return Kubectl(self.binary, self.kubeconfig, namespace, self.timeout)

    def run(self, *args: str, stdin: str | None = None) -> str:
        """Run kubectl; return stdout, or raise KubectlError with its stderr."""
        return self._call(args, stdin).stdout

    def warned(self, *args: str) -> list[str]:
        """Run kubectl; return the admission warnings it printed (stderr's lines after
        ``Warning: ``), or raise KubectlError with its stderr."""
        lines = self._call(args, None).stderr.splitlines()
        return [line.removeprefix("Warning: ") for line in lines if line.startswith("Warning: ")]

    def _call(self, args: Sequence[str], stdin: str | None) -> subprocess.CompletedProcess[str]:
        command = [self.binary, "--kubeconfig", self.kubeconfig, "--request-timeout", "30s"]
        if self.namespace is not None:
            command += ["--namespace", self.namespace]
        started = time.monotonic()
        done = subprocess.run(
            [*command, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=self.timeout,
            check=False,
        )
        if done.returncode != 0:
            raise KubectlError(args, done.returncode, done.stderr, started=started)
        return done

    def get(self, *args: str) -> Obj:
        """``kubectl get ARGS -o json``, decoded."""
        result: Obj = json.loads(self.run("get", *args, "-o", "json"))
        return result

    def create(self, obj: Obj, *, dry_run: bool = False) -> Obj:
        """Create ``obj`` (server-side dry run when asked) and return what the server made of it."""
        extra = ["--dry-run=server"] if dry_run else []
        result: Obj = json.loads(
            self.run("create", *extra, "-o", "json", "-f", "-", stdin=json.dumps(obj))
        )
        return result

    def delete(self, kind: str, name: str) -> None:
        """Ask for one object's deletion without waiting for it; absent is fine."""
        self.run("delete", kind, name, "--ignore-not-found", "--wait=false")

    def gone(self, kind: str, name: str) -> bool:
        """True once ``kind/name`` no longer exists."""
        try:
            self.run("get", kind, name, "-o", "name")
        except KubectlError as err:
            if "NotFound" in err.stderr or "not found" in err.stderr:
                return True
            raise
        return False


def release(kubectl: Kubectl, name: str) -> None:
    """Take every finalizer off set ``name`` (absent is fine), delete it and wait until it is
    gone: a set that keeps :data:`HOLD` keeps its namespace from ever being deleted."""
    try:
        patch = '{"metadata":{"finalizers":null}}'
        kubectl.run("patch", "statefulset", name, "--type=merge", "-p", patch)
    except KubectlError as err:
        if "NotFound" not in err.stderr and "not found" not in err.stderr:
            raise
    kubectl.delete("statefulset", name)
    wait_for(
        f"statefulset {name} to be deleted",
        lambda: kubectl.gone("statefulset", name),
        timeout=60,
    )


def pod_template(image: str) -> Obj:
    """A pod spec that meets the `restricted` Pod Security profile (clusters enforcing it admit it)."""
    return {
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 1,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65535,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": "main",
                "image": image,
                "resources": {"requests": {"cpu": "1m", "memory": "8Mi"}},
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
    }


def workload(kind: str, name: str, *, image: str, replicas: int, labels: dict[str, str]) -> Obj:
    """A Deployment or StatefulSet of ``replicas`` pods labelled ``app=<name>``; a StatefulSet
    creates every ordinal at once (Parallel), ready or not."""
    spec: Obj = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": pod_template(image)},
    }
    if kind == "StatefulSet":
        spec.update(serviceName=name, podManagementPolicy="Parallel")
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def owned_pod(owner: Obj, ordinal: int, *, image: str, labels: dict[str, str]) -> Obj:
    """Ordinal ``ordinal``'s pod of StatefulSet ``owner`` as its controller would create it."""
    name = owner["metadata"]["name"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{ordinal}",
            "labels": {"apps.kubernetes.io/pod-index": str(ordinal), **labels},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": name,
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": pod_template(image),
    }


def wait_for(
    what: str, probe: Callable[[], T | None], *, timeout: float, interval: float = 1.0
) -> T:
    """Call ``probe`` until it returns something truthy, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_error = ""
    while True:
        try:
            value = probe()
        except KubectlError as err:
            value, last_error = None, str(err)
        if value:
            return value
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


@dataclass(frozen=True, slots=True)
class Cluster:
    """What the tests get: kubectl scoped to the test namespace, and the zones in force."""

    kubectl: Kubectl
    namespace: str
    run: str
    zones: tuple[str, ...]
    #: True when every zone has a schedulable node, so the scheduler can place pods.
    schedulable: bool
    image: str
    timeout: float
    #: The running webhook, with HTTPS clients that trust its certificate.
    webhook: Webhook


def skipped_statefulset(cluster: Cluster, name: str) -> Obj:
    """A set of no replicas whose pods stszone leaves alone (labelled skip), to place pods
    by hand as pods placed before stszone was (:func:`place_on`)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "labels": {RUN_LABEL: cluster.run}},
        "spec": {
            "serviceName": name,
            "replicas": 0,
            # Template changes must not re-create the pods already placed.
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, "stszone.io/skip": "true"}},
                "spec": pod_template(cluster.image),
            },
        },
    }


def place_on(cluster: Cluster, name: str, ordinal: int, node: str) -> Obj:
    """Create pod ``<name>-<ordinal>`` of a :func:`skipped_statefulset` on ``node``: pin the
    template there, scale up by one, wait until it is bound; the pod."""
    kubectl = cluster.kubectl
    patch = f'{{"spec":{{"template":{{"spec":{{"nodeSelector":{{"{HOSTNAME}":"{node}"}}}}}}}}}}'
    kubectl.run("patch", "statefulset", name, "--type=merge", "-p", patch)
    kubectl.run("scale", "statefulset", name, f"--replicas={ordinal + 1}")

    def placed() -> Obj | None:
        pod = kubectl.get("pod", f"{name}-{ordinal}")
        return pod if pod["spec"].get("nodeName") == node else None

    return wait_for(f"{name}-{ordinal} on {node}", placed, timeout=cluster.timeout)
