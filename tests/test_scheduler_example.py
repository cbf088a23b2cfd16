"""deploy/examples/scheduler: a second kube-scheduler calling the extender, checked offline.

Built-in objects are validated against the Kubernetes 1.32 OpenAPI schemas (kubernetes-validate,
strict). The KubeSchedulerConfiguration is not an API object (kube-scheduler reads it from a
file, no schema is published for it), so kubernetes-validate cannot check it: its field names
are compared with lists written by hand from the Go types (json tags) in
k8s.io/kube-scheduler/config/v1 and k8s.io/component-base/config/v1alpha1. That is what catches
names from older docs, like the Policy API's ``enableHttps`` (the config type says
``enableHTTPS``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.rendered import kustomize
from webhook.config import DEFAULT_SCHEDULER_NAME, Settings
from webhook.model.annotations import parse_annotations
from webhook.model.store import Store
from webhook.server.app import routes
from webhook.server.runtime import Runtime

EXAMPLE = Path(__file__).resolve().parent.parent / "deploy" / "examples" / "scheduler"
BASE = EXAMPLE.parent.parent / "base"
KUBE_VERSION = "1.32"
Obj = dict[str, Any]

# From the json tags of the Go types (kubescheduler.config.k8s.io/v1 as of 1.32).
CONFIG_FIELDS = {
    "apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "enableProfiling",
    "enableContentionProfiling", "percentageOfNodesToScore", "podInitialBackoffSeconds",
    "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive",
}  # fmt: skip
PROFILE_FIELDS = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}
EXTENDER_FIELDS = {
    "urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb",
    "enableHTTPS", "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources",
    "ignorable",
}  # fmt: skip
TLS_FIELDS = {
    "insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData",
}  # fmt: skip
LEADER_ELECTION_FIELDS = {
    "leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock",
    "resourceName", "resourceNamespace",
}  # fmt: skip
GO_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$")


@pytest.fixture(scope="module")
def objects() -> list[Obj]:
    """``kubectl kustomize deploy/examples/scheduler`` (the tests fail without kubectl)."""
    return kustomize(EXAMPLE)


def one(objects: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def scheduler_config(objects: list[Obj]) -> Obj:
    cm = one(objects, "ConfigMap")
    config: Obj = yaml.safe_load(cm["data"]["config.yaml"])
    return config


def test_kustomize_renders(objects: list[Obj]) -> None:
    """`kubectl kustomize deploy/examples/scheduler` works: one Deployment, its ConfigMap."""
    kinds = sorted(o["kind"] for o in objects)
    assert kinds.count("Deployment") == 1 and kinds.count("ConfigMap") == 1


def test_every_object_validates_against_the_schemas(objects: list[Obj]) -> None:
    """Strict: an unknown or misspelt field in any built-in object fails."""
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, f"{KUBE_VERSION}.0", strict=True)
        except kubernetes_validate.ValidationError as err:
            where = ".".join(map(str, err.path))
            name = f"{obj['kind']}/{obj['metadata']['name']}"
            raise AssertionError(f"{name} {where}: {err.message}") from None


def test_scheduler_configuration_field_names(objects: list[Obj]) -> None:
    """Every key is one the Go types know; the extender entry has what stszone needs."""
    config = scheduler_config(objects)
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert set(config) <= CONFIG_FIELDS
    assert set(config["leaderElection"]) <= LEADER_ELECTION_FIELDS
    for profile in config["profiles"]:
        assert set(profile) <= PROFILE_FIELDS
    (ext,) = config["extenders"]
    assert set(ext) <= EXTENDER_FIELDS, set(ext) - EXTENDER_FIELDS
    assert set(ext["tlsConfig"]) <= TLS_FIELDS
    assert ext["enableHTTPS"] is True and ext["ignorable"] is False
    assert ext["tlsConfig"].get("caFile") or ext["tlsConfig"].get("caData")
    assert not ext["tlsConfig"].get("insecure")
    assert isinstance(ext["weight"], int) and ext["weight"] > 0
    assert isinstance(ext["nodeCacheCapable"], bool)
    assert GO_DURATION.match(ext["httpTimeout"]), ext["httpTimeout"]
    for key in ("leaseDuration", "renewDeadline", "retryPeriod"):
        assert GO_DURATION.match(config["leaderElection"][key])


def test_extender_url_reaches_the_routes_stszone_serves(objects: list[Obj]) -> None:
    """urlPrefix + "/" + verb is a POST route stszone serves, on the base's Service."""
    (ext,) = scheduler_config(objects)["extenders"]
    match = re.fullmatch(r"https://([a-z0-9-]+)\.([a-z0-9-]+)\.svc:(\d+)(/.*)", ext["urlPrefix"])
    assert match, ext["urlPrefix"]
    service, namespace, port, prefix = match.groups()
    table = routes(Runtime(store=Store(), defaults=Settings().defaults()))
    for verb in (ext["filterVerb"], ext["prioritizeVerb"]):
        assert "POST" in table[f"{prefix}/{verb}"]
    base = [d for d in yaml.safe_load_all((BASE / "service.yaml").read_text()) if d]
    svc = one(base, "Service")
    assert (svc["metadata"]["name"], svc["metadata"]["namespace"]) == (service, namespace)
    assert int(port) in [p["port"] for p in svc["spec"]["ports"]]


def test_deployment_wiring(objects: list[Obj]) -> None:
    """2 replicas of the upstream image, the rendered config and the CA mounted where read."""
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"].startswith(f"registry.k8s.io/kube-scheduler:v{KUBE_VERSION}.")
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    config_flag = next(a for a in container["command"] if a.startswith("--config="))
    config_path = Path(config_flag.removeprefix("--config="))
    (name,) = [n for n, path in mounts.items() if config_path.parent == Path(path)]
    assert volumes[name]["configMap"]["name"] == one(objects, "ConfigMap")["metadata"]["name"]
    assert config_path.name in one(objects, "ConfigMap")["data"]
    ca_file = Path(scheduler_config(objects)["extenders"][0]["tlsConfig"]["caFile"])
    assert str(ca_file.parent) in mounts.values()


def test_rbac_covers_leader_election_and_the_system_roles(objects: list[Obj]) -> None:
    """Bound to both scheduler roles, the auth reader, and get/update on its own Lease."""
    sa = one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    ns = one(objects, "ServiceAccount", sa)["metadata"]["namespace"]
    subject = {"kind": "ServiceAccount", "name": sa, "namespace": ns}
    bound = {
        (o["kind"], o["metadata"].get("namespace"), o["roleRef"]["name"])
        for o in objects
        if o["kind"] in ("ClusterRoleBinding", "RoleBinding") and subject in o["subjects"]
    }
    election = scheduler_config(objects)["leaderElection"]
    assert election["leaderElect"] is True and election["resourceLock"] == "leases"
    assert election["resourceName"] != "kube-scheduler", "that Lease is the default scheduler's"
    assert {
        ("ClusterRoleBinding", None, "system:kube-scheduler"),
        ("ClusterRoleBinding", None, "system:volume-scheduler"),
        ("RoleBinding", "kube-system", "extension-apiserver-authentication-reader"),
    } <= bound
    (role_name,) = [r for k, n, r in bound if k == "RoleBinding" and n == ns]
    role = one(objects, "Role", role_name)
    assert role["metadata"]["namespace"] == election["resourceNamespace"]
    granted = {
        (verb, name)
        for rule in role["rules"]
        if "leases" in rule["resources"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames", ["*"])
    }
    assert {
        ("create", "*"),
        ("get", election["resourceName"]),
        ("update", election["resourceName"]),
    } <= granted


def test_example_statefulset_uses_this_scheduler(objects: list[Obj]) -> None:
    """Scheduler mode, naming the profile, in an opted-in namespace."""
    sts = one(objects, "StatefulSet")
    declared = parse_annotations(sts["metadata"]["annotations"])
    assert declared.mode == "scheduler" and declared.zones
    profiles = [p["schedulerName"] for p in scheduler_config(objects)["profiles"]]
    assert declared.scheduler_name == DEFAULT_SCHEDULER_NAME and profiles == [
        DEFAULT_SCHEDULER_NAME
    ]
    namespace = one(objects, "Namespace", sts["metadata"]["namespace"])
    assert namespace["metadata"]["labels"]["stszone.io/enabled"] == "true"
