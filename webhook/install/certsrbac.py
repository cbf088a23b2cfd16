"""What ``stszone serve --manage-certs`` adds to the installation, and the patches that take it
away again (``deploy/components/provided-certs``: cert-manager's Secret, or one made another
way, mounted instead).
"""

from __future__ import annotations

import dataclasses
from typing import Final

import jsonpatch
import yaml

from webhook.config import CERTS_LEASE, SECRET_NAME
from webhook.install.deploybase import NAME, SELECTOR, Install, Obj, deployment

#: The identity of what ``--manage-certs`` writes: a Role for its Secret and Lease, a
#: ClusterRole for its two webhook configurations.
CERTS: Final = "stszone-certs"


def certs_rbac(install: Install) -> list[Obj]:
    """What ``--manage-certs`` writes, and nothing else: in its own namespace its one Secret and
    its one Lease, cluster-wide its two webhook configurations (get and patch, by name).

    ``create`` is the one verb RBAC cannot narrow to a name (the name is in the body, not the
    URL, when the authorizer decides), so the Role grants creating Secrets and Leases in
    stszone's own namespace only: a namespace that holds nothing but stszone, where the webhook
    is never called; creating gives no read, and every other verb stays on the one name.
    Without ``--manage-certs`` (cert-manager, a provided Secret) there is none of it.
    """
    if install.certs != "managed":
        return []
    labels = {**SELECTOR, "app.kubernetes.io/component": "certificates"}
    named = {"name": CERTS, "labels": labels}
    account = [{"kind": "ServiceAccount", "name": NAME, "namespace": install.namespace}]
    rules = [
        # list/watch by name: the watch asks with fieldSelector=metadata.name=NAME.
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [SECRET_NAME],
            "verbs": ["get", "list", "watch", "update"],
        },
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [CERTS_LEASE],
            "verbs": ["get", "update"],
        },
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    ]
    configs = {
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
        "resourceNames": [NAME],
        "verbs": ["get", "patch"],
    }
    rbac_api = "rbac.authorization.k8s.io/v1"
    ref = {"apiGroup": "rbac.authorization.k8s.io", "name": CERTS}
    return [
        {
            "apiVersion": rbac_api,
            "kind": "Role",
            "metadata": {**named, "namespace": install.namespace},
            "rules": rules,
        },
        {
            "apiVersion": rbac_api,
            "kind": "RoleBinding",
            "metadata": {**named, "namespace": install.namespace},
            "roleRef": {**ref, "kind": "Role"},
            "subjects": account,
        },
        {"apiVersion": rbac_api, "kind": "ClusterRole", "metadata": named, "rules": [configs]},
        {
            "apiVersion": rbac_api,
            "kind": "ClusterRoleBinding",
            "metadata": named,
            "roleRef": {**ref, "kind": "ClusterRole"},
            "subjects": account,
        },
    ]


def provided_certs(install: Install) -> list[Obj]:
    """The patches turning the (managed) base into the provided form: the Deployment as
    ``Install(certs="provided")`` renders it (a JSON Patch made from the two), and the
    ``--manage-certs`` RBAC deleted. For cert-manager and for Secrets made another way."""
    managed = dataclasses.replace(install, certs="managed")
    provided = dataclasses.replace(install, certs="provided")
    operations = jsonpatch.make_patch(deployment(managed), deployment(provided)).patch
    patches: list[Obj] = [
        {"target": {"kind": "Deployment", "name": NAME}, "patch": yaml.safe_dump(operations)}
    ]
    for obj in certs_rbac(managed):
        gone = {
            "$patch": "delete",
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "metadata": {k: v for k, v in obj["metadata"].items() if k != "labels"},
        }
        patches.append({"patch": yaml.safe_dump(gone, sort_keys=False)})
    return patches
