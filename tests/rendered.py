"""Helpers for the manifest tests: render deploy/ with kubectl, validate offline, pick objects."""

from __future__ import annotations

import itertools
import os
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

from tests.tools import require

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
Obj = dict[str, Any]

#: The oldest Kubernetes the manifests support (matchLabelKeys, nodeTaintsPolicy and
#: unhealthyPodEvictionPolicy are on by default from 1.27) and the newest schemas we ship.
#: 1.27's schema has matchConditions (alpha, gate off: the API server drops it); they take
#: effect from 1.28 (docs/install.md).
KUBE_VERSIONS = ("1.27.0", kubernetes_validate.latest_version())
#: Kinds that kubernetes-validate has no schema for (CRDs); checked field by field instead.
CRD_KINDS = {"Certificate", "Issuer"}


def kustomize(path: Path) -> list[Obj]:
    """``kubectl kustomize path`` as objects; the test fails when kubectl is absent."""
    kubectl = require("kubectl", why="rendering kustomize directories")
    done = subprocess.run(
        [kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"kubectl kustomize {path} failed:\n{done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def base_with(tmp_path: Path, *components: str) -> list[Obj]:
    """``kubectl kustomize`` of an overlay of deploy/base with ``deploy/components/<name>``s."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        # kustomize takes relative paths only ("new root cannot be absolute").
        "resources": [os.path.relpath(DEPLOY / "base", overlay)],
        "components": [os.path.relpath(DEPLOY / "components" / c, overlay) for c in components],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return kustomize(overlay)


def validate(objects: list[Obj]) -> None:
    """Every built-in object validates, strictly (unknown fields rejected), on every version."""
    for obj in objects:
        if obj["kind"] in CRD_KINDS:
            continue
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as err:
                where = ".".join(str(part) for part in err.path)
                raise AssertionError(
                    f"{obj['kind']}/{obj['metadata']['name']} is invalid on Kubernetes "
                    f"{version} at {where}: {err.message}"
                ) from None


def only(objects: list[Obj], kind: str) -> Obj:
    """The single object of ``kind``."""
    found = [obj for obj in objects if obj["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def webhooks(objects: list[Obj]) -> list[tuple[str, Obj]]:
    """(configuration kind, webhook) for every webhook of both configurations."""
    return [
        (obj["kind"], webhook)
        for obj in objects
        if obj["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for webhook in obj["webhooks"]
    ]


def _triples(rules: list[Obj], keys: tuple[str, str, str]) -> set[tuple[str, str, str]]:
    """Every combination of the three listed fields of each rule."""
    return {triple for rule in rules for triple in itertools.product(*(rule[k] for k in keys))}


def covered(webhook: Obj) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, operation) triples a webhook's rules match."""
    return _triples(webhook["rules"], ("apiGroups", "resources", "operations"))


def container(objects: list[Obj]) -> Obj:
    """The webhook container of the Deployment."""
    containers = only(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    result: Obj = containers[0]
    return result


def granted(role: Obj) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) triples a (Cluster)Role's rules grant."""
    return _triples(role["rules"], ("apiGroups", "resources", "verbs"))
