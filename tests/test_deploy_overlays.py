"""deploy/overlays and deploy/examples: they render, validate, and change only what they say."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from tests.rendered import DEPLOY, Obj, base_with, kustomize, only, validate, webhooks
from webhook.config import DEFAULT_NAMESPACE, SECRET_NAME
from webhook.install import deploybase, deployfiles
from webhook.install.certs import service_dns_names
from webhook.install.deployfiles import base_objects

#: Fields of the cert-manager v1 kinds the overlay uses (no schema ships for CRDs offline).
CERT_MANAGER_FIELDS = {
    "Issuer": {"selfSigned", "ca"},
    "Certificate": {
        "secretName", "isCA", "commonName", "dnsNames", "duration", "renewBefore",
        "privateKey", "usages", "issuerRef",
    },
}  # fmt: skip


def _named(objects: list[Obj], kind: str) -> dict[str, Obj]:
    return {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == kind}


def test_cert_manager_overlay_issues_the_secret_the_deployment_mounts() -> None:
    """self-signed Issuer -> CA Certificate -> CA Issuer -> serving Certificate -> stszone-tls."""
    objects = kustomize(DEPLOY / "overlays" / "cert-manager")
    validate(objects)
    issuers, certificates = _named(objects, "Issuer"), _named(objects, "Certificate")
    for obj in [*issuers.values(), *certificates.values()]:
        assert obj["apiVersion"] == "cert-manager.io/v1"
        assert obj["metadata"]["namespace"] == DEFAULT_NAMESPACE
        assert set(obj["spec"]) <= CERT_MANAGER_FIELDS[obj["kind"]], obj["metadata"]["name"]
    ca = next(cert for cert in certificates.values() if cert["spec"].get("isCA"))
    serving = next(cert for cert in certificates.values() if not cert["spec"].get("isCA"))
    assert issuers[ca["spec"]["issuerRef"]["name"]]["spec"] == {"selfSigned": {}}
    ca_issuer = issuers[serving["spec"]["issuerRef"]["name"]]
    assert ca_issuer["spec"] == {"ca": {"secretName": ca["spec"]["secretName"]}}
    for cert in (ca, serving):
        assert cert["spec"]["issuerRef"]["kind"] == "Issuer"
    assert serving["spec"]["secretName"] == SECRET_NAME
    assert serving["spec"]["dnsNames"] == service_dns_names("stszone", DEFAULT_NAMESPACE)
    assert "server auth" in serving["spec"]["usages"]
    annotation = f"{DEFAULT_NAMESPACE}/{serving['metadata']['name']}"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        metadata = only(objects, kind)["metadata"]
        assert metadata["annotations"] == {"cert-manager.io/inject-ca-from": annotation}


def test_cert_manager_overlay_leaves_the_base_alone() -> None:
    """Apart from the annotations and the new objects, the base with provided certificates
    (the Secret mounted, no --manage-certs, none of its write RBAC)."""
    objects = kustomize(DEPLOY / "overlays" / "cert-manager")
    kept = [obj for obj in objects if obj["kind"] not in ("Issuer", "Certificate")]
    for obj in kept:
        obj["metadata"].pop("annotations", None)
    assert _by_key(kept) == _by_key(base_objects(deploybase.Install(certs="provided")))


def test_the_provided_certs_component_is_the_generator_output(tmp_path: Path) -> None:
    """deploy/components/provided-certs holds what `stszone manifests --component
    provided-certs --kustomize-dir` writes, and turns the base into exactly the provided form."""
    expected = deployfiles.component_files("provided-certs", deploybase.Install())
    directory = DEPLOY / "components" / "provided-certs"
    actual = {path.name: path.read_text() for path in directory.iterdir()}
    assert actual == expected, (
        "deploy/components/provided-certs differs from webhook/install/certsrbac.py; regenerate "
        "it with `stszone manifests --component provided-certs --kustomize-dir "
        "deploy/components/provided-certs`"
    )
    objects = base_with(tmp_path, "provided-certs")
    validate(objects)
    assert _by_key(objects) == _by_key(base_objects(deploybase.Install(certs="provided")))
    assert {obj["kind"] for obj in objects}.isdisjoint({"Role", "RoleBinding"})


def test_dev_overlay_is_one_replica_failing_open_without_a_budget() -> None:
    """1 replica, failurePolicy Ignore on every webhook, no PDB; nothing else changes."""
    objects = kustomize(DEPLOY / "overlays" / "dev")
    validate(objects)
    assert only(objects, "Deployment")["spec"]["replicas"] == 1
    assert [hook["failurePolicy"] for _, hook in webhooks(objects)] == ["Ignore", "Ignore"]
    expected = [
        obj
        for obj in copy.deepcopy(base_objects(deploybase.Install()))
        if obj["kind"] != "PodDisruptionBudget"
    ]
    only(expected, "Deployment")["spec"]["replicas"] = 1
    for _, hook in webhooks(expected):
        hook["failurePolicy"] = "Ignore"
    assert _by_key(objects) == _by_key(expected)


def _by_key(objects: list[Obj]) -> dict[tuple[str, str], Obj]:
    return {(obj["kind"], obj["metadata"]["name"]): obj for obj in objects}


def test_kind_example_has_one_worker_per_zone() -> None:
    """Three workers labelled zone-a/b/c, the zones the example StatefulSet names."""
    config = yaml.safe_load((DEPLOY / "examples" / "kind-3-zones.yaml").read_text())
    assert (config["kind"], config["apiVersion"]) == ("Cluster", "kind.x-k8s.io/v1alpha4")
    workers = [node for node in config["nodes"] if node["role"] == "worker"]
    zones = [node["labels"]["topology.kubernetes.io/zone"] for node in workers]
    assert zones == ["zone-a", "zone-b", "zone-c"]
    assert [node["role"] for node in config["nodes"]].count("control-plane") == 1
    example = list(yaml.safe_load_all((DEPLOY / "examples" / "statefulset.yaml").read_text()))
    statefulset = only(example, "StatefulSet")
    assert statefulset["metadata"]["annotations"]["stszone.io/zones"] == ",".join(zones)


def test_example_statefulset_is_valid_and_opted_in() -> None:
    """The example namespace carries the opt-in label; every object validates."""
    example = [
        doc
        for doc in yaml.safe_load_all((DEPLOY / "examples" / "statefulset.yaml").read_text())
        if doc
    ]
    validate(example)
    namespace = only(example, "Namespace")
    assert namespace["metadata"]["labels"] == {"stszone.io/enabled": "true"}
    statefulset = only(example, "StatefulSet")
    assert statefulset["metadata"]["namespace"] == namespace["metadata"]["name"]
    assert statefulset["spec"]["replicas"] == 6
    assert statefulset["spec"]["podManagementPolicy"] == "Parallel"
