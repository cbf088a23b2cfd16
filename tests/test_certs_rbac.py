"""The ``--manage-certs`` RBAC grants what the code asks for: every request two replicas make
(creating, renewing, watching, campaigning) is allowed by the rendered Role and ClusterRole,
evaluated as Kubernetes' RBAC authorizer does, names included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.certcluster import NS, cluster, stored
from tests.fakeapi import FakeApi, Seen, eventually
from tests.fakestate import RESOURCES
from webhook.install import tlssecret
from webhook.install.certsrbac import certs_rbac
from webhook.install.deploybase import Install

Request = tuple[str, str, str, str, str]  # (namespace, group, resource, verb, name)


def _group(resource: str) -> str:
    path = RESOURCES[resource][0]
    return "" if path.startswith("/api/v1") else path.split("/")[2]


def _request(seen: Seen) -> Request:
    """What the authorizer is asked: a list or watch narrowed by ``metadata.name=`` carries
    that name; a create carries none (the name is in the body)."""
    name = seen.name
    if seen.verb in ("list", "watch"):
        name = seen.query.get("fieldSelector", "").removeprefix("metadata.name=")
    if seen.verb == "create":
        name = ""
    return (seen.namespace, _group(seen.resource), seen.resource, seen.verb, name)


def _allowed(request: Request, objects: list[dict[str, Any]]) -> bool:
    namespace, group, resource, verb, name = request
    for role in objects:
        if role["kind"] not in ("Role", "ClusterRole"):
            continue
        if role["kind"] == "Role" and role["metadata"]["namespace"] != namespace:
            continue
        for rule in role["rules"]:
            names = rule.get("resourceNames")
            if (
                group in rule["apiGroups"]
                and resource in rule["resources"]
                and verb in rule["verbs"]
                and (not names or name in names)
            ):
                return True
    return False


def _asked(fake: FakeApi) -> set[Request]:
    return {_request(seen) for seen in fake.requests}


async def test_every_request_of_two_replicas_is_allowed_by_the_rendered_rbac(
    tmp_path: Path,
) -> None:
    """Creation, a re-issue (update), list/watch of the Secret by name, the Lease, the patches."""
    objects = certs_rbac(Install(namespace=NS))
    async with cluster(tmp_path) as (fake, start):
        a = await start("replica-a", cert_validity=6.0)
        b = await start("replica-b", cert_validity=6.0)
        await eventually(lambda: a.managed.ready()[0] and b.managed.ready()[0])
        secret = stored(fake, "secrets", "stszone-tls", NS)
        assert secret is not None
        del secret["data"]["tls.crt"], secret["data"]["tls.key"]  # ours, but no pair: re-issued
        fake.put("secrets", secret)
        await eventually(
            lambda: (
                tlssecret.read(stored(fake, "secrets", "stszone-tls", NS) or {}).serving is not None
            )
        )
        asked = _asked(fake)
    verbs = {(resource, verb) for _, _, resource, verb, _ in asked}
    assert verbs >= {
        ("secrets", "list"),
        ("secrets", "watch"),
        ("secrets", "get"),
        ("secrets", "create"),
        ("secrets", "update"),
        ("leases", "get"),
        ("leases", "create"),
        ("leases", "update"),
        ("mutatingwebhookconfigurations", "get"),
        ("mutatingwebhookconfigurations", "patch"),
        ("validatingwebhookconfigurations", "get"),
        ("validatingwebhookconfigurations", "patch"),
    }
    refused = sorted(r for r in asked if not _allowed(r, objects))
    assert refused == []


def test_the_evaluator_refuses_what_the_rules_do_not_name() -> None:
    """The check above can fail: other names, other verbs, another namespace are refused."""
    objects = certs_rbac(Install(namespace=NS))
    for request in [
        (NS, "", "secrets", "get", "other-secret"),
        (NS, "", "secrets", "delete", "stszone-tls"),
        (NS, "", "secrets", "list", ""),  # a list of every Secret
        ("kube-system", "", "secrets", "create", ""),
        (NS, "coordination.k8s.io", "leases", "update", "kube-scheduler"),
        ("", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "patch", "other"),
        ("", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "update", "stszone"),
    ]:
        assert not _allowed(request, objects), request
