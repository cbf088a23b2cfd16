"""What each certificate mode of charts/stszone must render, as assertions on `helm template`.

Shared by the per-ci-file checks (test_chart.py) and the certificate tests (test_chart_certs.py):
self-managed (`stszone serve --manage-certs`, told the names of the release's objects and allowed
to write exactly those), and the modes that mount the pair and write nothing.
"""

from __future__ import annotations

import base64
import datetime as dt

from cryptography import x509

from tests.helm import Obj, release
from tests.rendered import container, only, webhooks
from webhook.cli import build_parser, settings_from
from webhook.config import Settings
from webhook.install.certs import service_dns_names
from webhook.install.pemcheck import check_serving_pair

#: The write access of `stszone serve --manage-certs` (deploy/base/certs-rbac.yaml).
CERTS_RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
CONFIG_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
TLS_DIR = "/etc/stszone/tls"


def pod_spec(objects: list[Obj]) -> Obj:
    """The Deployment's pod spec."""
    spec: Obj = only(release(objects), "Deployment")["spec"]["template"]["spec"]
    return spec


def serve_settings(objects: list[Obj], *, namespace: str = "stszone-system") -> Settings:
    """What `stszone serve` makes of the Deployment's args in its pod ($POD_NAMESPACE set)."""
    args = build_parser().parse_args(["serve", *container(release(objects))["args"]])
    return settings_from(args, environ={"POD_NAMESPACE": namespace})


def certs_rbac(objects: list[Obj]) -> dict[str, Obj]:
    """Kind -> the release's object of component certificates (the write access)."""
    return {
        obj["kind"]: obj
        for obj in release(objects)
        if obj["metadata"]["labels"].get("app.kubernetes.io/component") == "certificates"
    }


def assert_self_managed(
    objects: list[Obj], *, name: str, namespace: str = "stszone-system"
) -> None:
    """`stszone serve --manage-certs`, told the names of this release's objects (its defaults
    when they are stszone's) and allowed to write exactly those; no Secret, no caBundle, no
    certificate volume: stszone writes them."""
    settings = serve_settings(objects, namespace=namespace)
    assert settings.manage_certs and settings.cert is None
    assert settings.namespace == namespace
    service = only(release(objects), "Service")["metadata"]["name"]
    assert settings.service == service == name
    assert {only(objects, kind)["metadata"]["name"] for kind in CONFIG_KINDS} == {
        settings.webhook_config_name
    }
    for kind, hook in webhooks(objects):
        assert "caBundle" not in hook["clientConfig"], kind
        assert hook["clientConfig"]["service"] == {
            "name": service,
            "namespace": namespace,
            "path": "/mutate" if kind.startswith("Mutating") else "/validate",
            "port": 443,
        }
    assert not [obj for obj in objects if obj["kind"] == "Secret"]
    pod = pod_spec(objects)
    assert [volume["name"] for volume in pod["volumes"]] == ["tmp"]
    env = {
        item["name"]: item["valueFrom"]["fieldRef"]["fieldPath"]
        for item in container(release(objects))["env"]
    }
    assert env == {"POD_NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name"}
    rbac = certs_rbac(objects)
    assert sorted(rbac) == list(CERTS_RBAC_KINDS)
    assert rbac["Role"]["metadata"]["namespace"] == namespace
    granted = {
        (rule["resources"][0], verb): rule.get("resourceNames")
        for rule in rbac["Role"]["rules"]
        for verb in rule["verbs"]
    }
    secret, lease = [settings.certs_secret], [settings.certs_lease]
    assert granted == {
        **{("secrets", verb): secret for verb in ("get", "list", "watch", "update")},
        **{("leases", verb): lease for verb in ("get", "update")},
        ("secrets", "create"): None,
        ("leases", "create"): None,
    }
    (configs,) = rbac["ClusterRole"]["rules"]
    assert configs["resourceNames"] == [settings.webhook_config_name]
    assert configs["verbs"] == ["get", "patch"]
    account = only(release(objects), "ServiceAccount")["metadata"]["name"]
    assert pod["serviceAccountName"] == account
    for kind, role_kind in (("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")):
        binding = rbac[kind]
        assert binding["roleRef"]["kind"] == role_kind
        assert binding["roleRef"]["name"] == rbac[role_kind]["metadata"]["name"]
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account, "namespace": namespace}
        ]


def assert_mounted(objects: list[Obj]) -> None:
    """The serving pair is mounted from a Secret; stszone writes nothing, so it has no write
    access (generated, cert-manager, provided)."""
    settings = serve_settings(objects)
    assert not settings.manage_certs
    assert (str(settings.cert), str(settings.key)) == (f"{TLS_DIR}/tls.crt", f"{TLS_DIR}/tls.key")
    assert not certs_rbac(objects)
    mount = container(release(objects))["volumeMounts"][0]
    assert (mount["name"], mount["mountPath"]) == ("tls", TLS_DIR)


def assert_valid_pair(secret: Obj, objects: list[Obj], *, service: str, days: int) -> None:
    """The generated pair names the Service, chains to the caBundle both webhooks carry, and is
    valid for ``days``."""
    data = {key: base64.b64decode(value) for key, value in secret["data"].items()}
    host = f"{service}.stszone-system.svc"
    check_serving_pair(
        ca_pem=data["ca.crt"], cert_pem=data["tls.crt"], key_pem=data["tls.key"], host=host
    )
    for kind, hook in webhooks(objects):
        assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"], kind
    leaf = x509.load_pem_x509_certificate(data["tls.crt"])
    lifetime = leaf.not_valid_after_utc - leaf.not_valid_before_utc
    assert abs(lifetime - dt.timedelta(days=days)) < dt.timedelta(days=1)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == service_dns_names(service, "stszone-system")
