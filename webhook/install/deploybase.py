"""The installation as Kubernetes objects: the one source of ``deploy/`` and ``stszone manifests``.

The objects are built here, in Python, rather than read from YAML files, so that a pip-installed
``stszone`` (no repository checkout) renders exactly what ``deploy/`` holds, and so that changing
the namespace changes every place that names it: metadata, the RoleBinding subject, the Service
DNS name in each webhook's clientConfig, and the namespaceSelector that keeps the webhook away
from its own namespace. ``deploy/*.yaml`` is this module's output, written by
``stszone manifests --kustomize-dir deploy``; a test fails when the two disagree.

Every value below that an operator would ask "why this number?" about carries the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from webhook import __version__
from webhook.config import DEFAULT_NAMESPACE, SECRET_NAME, SERVICE_NAME, Settings
from webhook.install.registration import ALL_KINDS, Kinds
from webhook.model import kruise, nodepools

Obj = dict[str, Any]

NAME: Final = SERVICE_NAME
TLS_DIR: Final = "/etc/stszone/tls"
#: Numeric, so ``runAsNonRoot`` can be checked by the kubelet without an /etc/passwd entry.
RUN_AS: Final = 65532
PORT: Final = 8443
#: Default image; ``imagePullPolicy: IfNotPresent`` lets ``kind load docker-image`` supply it.
IMAGE: Final = f"stszone:{__version__}"
#: Seconds the preStop hook holds SIGTERM back so Service endpoints drop this pod first.
PRESTOP_SLEEP: Final = 5
SELECTOR: Final = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": "webhook"}
#: What the live view lists and watches, and nothing more (get/list/watch only).
READ_RESOURCES: Final = (
    ("", ("namespaces", "nodes", "persistentvolumeclaims", "persistentvolumes", "pods")),
    ("apps", ("statefulsets",)),
)
#: Strimzi KafkaNodePools and OpenKruise Advanced StatefulSets, read where their CRDs are
#: installed (unless turned off).
KAFKA_READ: Final = (nodepools.GROUP, ("kafkanodepools",))
KRUISE_READ: Final = (kruise.GROUP, ("statefulsets",))
#: The one write of every replica: Events on the workloads it decides about (create, and patch
#: for a repeat's series). Events live in the workloads' namespaces, which are whichever are
#: opted in, so this is a ClusterRole rule: a Role per namespace would have to follow opt-ins.
EVENT_RULE: Final = {
    "apiGroups": ["events.k8s.io"],
    "resources": ["events"],
    "verbs": ["create", "patch"],
}
#: The optional identity ``stszone rebalance`` runs as in a Job (deploy/components/rebalance).
REBALANCE: Final = "stszone-rebalance"


@dataclass(frozen=True, slots=True)
class Install:
    """What varies between installations: where, which image, and the CA the API server trusts."""

    namespace: str = DEFAULT_NAMESPACE
    image: str = IMAGE
    #: base64 of the PEM CA bundle; None leaves caBundle out (cert-manager injects it).
    ca_bundle: str | None = None
    #: Send only StatefulSet pods (CEL matchConditions, Kubernetes 1.28+); False for older ones.
    match_conditions: bool = True
    #: "managed": ``stszone serve --manage-certs`` makes, rotates and injects its own
    #: certificates (the write RBAC below). "provided": the pair is mounted from the Secret
    #: (cert-manager's, or one ``stszone manifests --ca`` prints) and nothing is written.
    certs: Literal["managed", "provided"] = "managed"
    #: The kinds beyond apps/v1 StatefulSets that are registered, read and judged.
    kinds: Kinds = ALL_KINDS


def _meta(name: str, install: Install, *, namespaced: bool = True) -> Obj:
    meta: Obj = {"name": name}
    if namespaced:
        meta["namespace"] = install.namespace
    meta["labels"] = dict(SELECTOR)
    return meta


def namespace(install: Install) -> Obj:
    """The webhook's own namespace; its pods meet the ``restricted`` Pod Security profile."""
    meta = _meta(install.namespace, install, namespaced=False)
    meta["labels"]["pod-security.kubernetes.io/enforce"] = "restricted"
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def _binding(name: str, install: Install, *, labels: dict[str, str]) -> Obj:
    meta = {"name": name, "labels": labels}
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": install.namespace}],
    }


def _reads(install: Install) -> list[Obj]:
    """get/list/watch of what the view reads (each further kind unless turned off)."""
    kinds = install.kinds
    read = (
        *READ_RESOURCES,
        *((KAFKA_READ,) if kinds.kafka_node_pools else ()),
        *((KRUISE_READ,) if kinds.kruise else ()),
    )
    return [
        {"apiGroups": [group], "resources": list(resources), "verbs": ["get", "list", "watch"]}
        for group, resources in read
    ]


def rbac(install: Install) -> list[Obj]:
    """ServiceAccount, a ClusterRole reading exactly what the view watches and writing Events,
    the binding."""
    rules = _reads(install)
    rules.append({key: list(value) for key, value in EVENT_RULE.items()})
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME, install)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(NAME, install, namespaced=False),
            "rules": rules,
        },
        _binding(NAME, install, labels=dict(SELECTOR)),
    ]


def rebalance_rbac(install: Install) -> list[Obj]:
    """An optional identity for ``stszone rebalance`` run from a Job: the webhook's reads, plus
    the only two writes it makes -- creating Evictions (so PodDisruptionBudgets are respected;
    it never deletes pods) and deleting claims (``--move-data`` only). The webhook's own
    ServiceAccount stays read-only."""
    labels = {**SELECTOR, "app.kubernetes.io/component": "rebalance"}
    reads = _reads(install)
    writes = [
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["delete"]},
    ]
    account = {"name": REBALANCE, "namespace": install.namespace, "labels": labels}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": account},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": REBALANCE, "labels": labels},
            "rules": [*reads, *writes],
        },
        _binding(REBALANCE, install, labels=labels),
    ]


def termination_grace() -> int:
    """Seconds Kubernetes grants a deleted pod: preStop, readiness-off delay, drain, margin."""
    settings = Settings()
    return int(PRESTOP_SLEEP + settings.shutdown_delay + settings.shutdown_grace) + 8


def _probe(path: str, *, period: int, failures: int) -> Obj:
    # The kubelet does not verify the serving certificate, so HTTPS probes need no CA.
    return {
        "httpGet": {"path": path, "port": "https", "scheme": "HTTPS"},
        "periodSeconds": period,
        "timeoutSeconds": 2,
        "failureThreshold": failures,
    }


def _spread(key: str, when: str) -> Obj:
    return {
        "maxSkew": 1,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": dict(SELECTOR)},
        # Count only this revision's pods, so a rolling update is not blocked by the old ones.
        "matchLabelKeys": ["pod-template-hash"],
        # Cordoned and NotReady nodes are not domains: a drain must not strand the new replica.
        "nodeTaintsPolicy": "Honor",
    }


def _env(name: str, field: str) -> Obj:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field}}}


def _container(install: Install) -> Obj:
    # The image's ENTRYPOINT is `stszone serve`; these are its flags. Managed: the pair comes
    # from the Secret through the API (watched, so no volume must exist before the pod starts).
    certs = (
        ["--manage-certs"]
        if install.certs == "managed"
        else [*("--cert", f"{TLS_DIR}/tls.crt"), *("--key", f"{TLS_DIR}/tls.key")]
    )
    mounts: list[Obj] = [{"name": "tmp", "mountPath": "/tmp"}]
    if install.certs == "provided":
        mounts.insert(0, {"name": "tls", "mountPath": TLS_DIR, "readOnly": True})
    return {
        "name": "webhook",
        "image": install.image,
        "imagePullPolicy": "IfNotPresent",
        "args": [
            *certs,
            *("--port", str(PORT)),
            *("--log-format", "json"),
            *(() if install.kinds.kafka_node_pools else ("--no-kafka-node-pools",)),
            *(() if install.kinds.kruise else ("--no-kruise",)),
        ],
        # The namespace is stszone's own (never intercepted; the Secret's and Lease's); the
        # pod's name is its Lease identity.
        "env": [_env("POD_NAMESPACE", "metadata.namespace"), _env("POD_NAME", "metadata.name")],
        "ports": [{"name": "https", "containerPort": PORT, "protocol": "TCP"}],
        "startupProbe": _probe("/healthz", period=2, failures=30),
        "livenessProbe": _probe("/healthz", period=10, failures=3),
        "readinessProbe": _probe("/readyz", period=5, failures=2),
        # Endpoint removal races SIGTERM; holding SIGTERM back lets the Service forget us first.
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", str(PRESTOP_SLEEP)]}}},
        # One asyncio thread uses at most one core, so a 1-CPU limit never throttles it;
        # memory grows with the cluster (the view keeps a few fields per object).
        "resources": {
            "requests": {"cpu": "50m", "memory": "128Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": mounts,
    }


def deployment(install: Install) -> Obj:
    """Two replicas on different nodes (and zones when there are), never both down at once."""
    # Scratch for libraries that insist on a temp file; the root filesystem is read-only.
    volumes: list[Obj] = [{"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}}]
    if install.certs == "provided":
        # 0440 + fsGroup: readable by the non-root user, by nobody else.
        secret = {"secretName": SECRET_NAME, "defaultMode": 0o440}
        volumes.insert(0, {"name": "tls", "secret": secret})
    pod_spec: Obj = {
        "serviceAccountName": NAME,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": termination_grace(),
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "fsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        # A node failure must not take both replicas: hard on hostname. Zones are a preference,
        # so that a zone outage (or a one-zone cluster) never leaves a replica Pending.
        "topologySpreadConstraints": [
            _spread("kubernetes.io/hostname", "DoNotSchedule"),
            _spread("topology.kubernetes.io/zone", "ScheduleAnyway"),
        ],
        "containers": [_container(install)],
        "volumes": volumes,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(NAME, install),
        "spec": {
            "replicas": 2,
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": dict(SELECTOR)},
            # Surge before removing: with failurePolicy Fail, capacity must never dip to zero.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {"metadata": {"labels": dict(SELECTOR)}, "spec": pod_spec},
        },
    }


def disruption_budget(install: Install) -> Obj:
    """Drains evict one replica at a time; a crash-looping replica may still be evicted."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(NAME, install),
        "spec": {
            "minAvailable": 1,
            "selector": {"matchLabels": dict(SELECTOR)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def service(install: Install) -> Obj:
    """The name the API server dials: ``stszone.<namespace>.svc:443``."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(NAME, install),
        "spec": {
            "selector": dict(SELECTOR),
            "ports": [{"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}],
        },
    }
