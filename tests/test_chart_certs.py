"""charts/stszone's certificate modes with the real helm: self-managed by default, told the
release's names whatever it is called; generated, with a pair for the Service.

What the default objects contain field by field is checked against deploy/ in
``test_chart_parity.py``; what each ci file's mode renders, in ``test_chart.py``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.certcluster import KINDS, NS, cluster, configuration
from tests.chartcerts import (
    assert_self_managed,
    assert_valid_pair,
    certs_rbac,
    pod_spec,
    serve_settings,
)
from tests.fakeapi import Fault, eventually
from tests.helm import Helm, HelmError, helm_for_tests, release
from tests.rendered import container, only, webhooks


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """The pinned helm, isolated from the user's helm configuration."""
    return helm_for_tests(tmp_path_factory.mktemp("helm-home"))


def test_defaults_are_self_managed_certificates(helm: Helm) -> None:
    """`stszone serve --manage-certs` with its own defaults (the objects are stszone's), as in
    deploy/base: no name flag."""
    objects = helm.template()
    assert_self_managed(objects, name="stszone")
    assert container(release(objects))["args"][:2] == ["--manage-certs", "--port"]


@pytest.mark.parametrize(
    ("release_name", "values", "name"),
    [
        ("stszone", {}, "stszone"),
        ("platform", {}, "platform-stszone"),
        ("stszone-prod", {}, "stszone-prod"),
        ("stszone", {"fullnameOverride": "zones"}, "zones"),
    ],
)
def test_self_managed_names_are_the_releases(
    helm: Helm, release_name: str, values: dict[str, Any], name: str
) -> None:
    """Whatever the release is called, stszone serve writes the Secret, the Lease and the
    caBundles the chart names and its RBAC allows: FULLNAME-tls, FULLNAME-certs, FULLNAME."""
    objects = helm.template(name=release_name, namespace="webhooks", values=values)
    assert_self_managed(objects, name=name, namespace="webhooks")
    settings = serve_settings(objects, namespace="webhooks")
    assert (settings.certs_secret, settings.certs_lease) == (f"{name}-tls", f"{name}-certs")
    assert only(release(objects), "Role")["metadata"]["name"] == f"{name}-certs"


async def test_a_403_names_the_releases_own_role_and_cluster_role(
    helm: Helm, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A release called platform grants the certificate work by a Role and a ClusterRole of its
    own names. A replica run with the chart's flags, refused by RBAC on the Secret's watch, the
    Lease and a configuration's patch, names those objects (not stszone-certs) in each hint."""
    objects = helm.template(name="platform", namespace=NS)
    given = serve_settings(objects, namespace=NS)
    granted = {kind: obj["metadata"]["name"] for kind, obj in certs_rbac(objects).items()}
    caplog.set_level(logging.INFO)
    async with cluster(tmp_path, configs=()) as (fake, start):
        for kind in KINDS:
            config = configuration(kind)
            config["metadata"]["name"] = given.webhook_config_name
            fake.put(kind.lower() + "s", config)
        fake.inject("secrets", "list", *[Fault.status(403)] * 3)
        fake.inject("leases", "get", *[Fault.status(403)] * 3)
        fake.inject("validatingwebhookconfigurations", "patch", *[Fault.status(403)] * 1000)
        await start(
            "replica-a",
            service=given.service,
            webhook_config_name=given.webhook_config_name,
            certs_secret=given.certs_secret,
            certs_lease=given.certs_lease,
        )

        def hints() -> list[str]:
            said = [r.getMessage() for r in caplog.records]
            return [line for line in said if "grant the ServiceAccount" in line]

        await eventually(lambda: len(hints()) >= 3)
    secret, lease, patch = (
        next(h for h in hints() if said in h)
        for said in ("watch of Secret", "on Lease", "RBAC refuses to patch")
    )
    for hint in (secret, lease):
        assert f"(Role {granted['Role']}: " in hint, hint
    assert f"(ClusterRole {granted['ClusterRole']}: " in patch, patch
    assert granted == dict.fromkeys(granted, "platform-stszone-certs")


def test_generated_certificate_is_valid_for_the_service(helm: Helm) -> None:
    """With no cluster to look the Secret up in, the chart makes a CA and a serving pair for
    stszone.stszone-system.svc, and both webhooks trust that CA."""
    objects = helm.template("--set", "certificates.mode=generated")
    assert_valid_pair(only(objects, "Secret"), objects, service="stszone", days=3650)


@pytest.mark.parametrize(
    ("mode", "names"),
    [
        (
            "self-managed",
            {"platform-stszone", "platform-stszone-certs", "platform-stszone-critical-pods"},
        ),
        (
            "generated",
            {"platform-stszone", "platform-stszone-tls", "platform-stszone-critical-pods"},
        ),
    ],
)
def test_names_follow_the_release_name(helm: Helm, mode: str, names: set[str]) -> None:
    """A release named otherwise gets RELEASE-stszone everywhere a name is referenced."""
    objects = release(helm.template("--set", f"certificates.mode={mode}", name="platform"))
    assert {obj["metadata"]["name"] for obj in objects} == names
    account = only(objects, "ServiceAccount")["metadata"]["name"]
    assert pod_spec(objects)["serviceAccountName"] == account
    for binding in (obj for obj in objects if obj["kind"] == "ClusterRoleBinding"):
        assert binding["subjects"][0]["name"] == account
    for _, hook in webhooks(objects):
        assert hook["clientConfig"]["service"]["name"] == "platform-stszone"
    if mode == "generated":
        assert_valid_pair(only(objects, "Secret"), objects, service="platform-stszone", days=3650)


@pytest.mark.parametrize(
    "issuer",
    [
        {"name": "pca", "kind": "AWSPCAClusterIssuer", "group": "awspca.cert-manager.io"},
        {"name": "cas", "kind": "GoogleCASIssuer", "group": "cas-issuer.jetstack.io"},
        {"name": "platform-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"},
    ],
)
def test_cert_manager_signs_with_the_issuer_named(helm: Helm, issuer: dict[str, str]) -> None:
    """An external issuer (cert-manager's own are Issuer and ClusterIssuer; one out of tree has
    its group and kinds of its own, e.g. AWSPCAClusterIssuer) signs the serving Certificate."""
    values = {"certificates": {"mode": "cert-manager", "certManager": {"issuerRef": issuer}}}
    objects = release(helm.template(values=values))
    (certificate,) = [obj for obj in objects if obj["kind"] == "Certificate"]
    assert certificate["spec"]["issuerRef"] == issuer
    assert not [obj for obj in objects if obj["kind"] == "Issuer"]


@pytest.mark.parametrize(
    ("issuer", "message"),
    [
        ({"name": "ca", "kind": "CAIssuer"}, "at '/certificates/certManager/issuerRef/kind'"),
        (
            {"name": "ca", "kind": "Issuer2", "group": "cert-manager.io"},
            "at '/certificates/certManager/issuerRef/kind'",
        ),
        ({"name": "pca", "group": "awspca.cert-manager.io"}, "missing property 'kind'"),
    ],
)
def test_cert_manager_issuer_kind_fits_its_group(
    helm: Helm, issuer: dict[str, str], message: str
) -> None:
    """cert-manager.io (the default group) has only Issuer and ClusterIssuer; another group
    must say its kind (Issuer would name a kind that group does not have)."""
    values = {"certificates": {"mode": "cert-manager", "certManager": {"issuerRef": issuer}}}
    with pytest.raises(HelmError) as refused:
        helm.template(values=values)
    assert message in refused.value.stderr
