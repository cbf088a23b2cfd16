"""deploy/components/rebalance: the optional identity for `stszone rebalance` in a Job.

It is generated like deploy/base, renders with kustomize on top of the base, validates, moves
with the namespace, and grants exactly the writes the executor makes -- while the webhook's own
ServiceAccount only reads (and writes Events).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import yaml

from tests.rendered import DEPLOY, Obj, granted, kustomize, validate
from webhook.cli import main
from webhook.install import deploybase, deployfiles, manifests

COMPONENT = DEPLOY / "components" / "rebalance"
#: (apiGroup, resource, verb) the executor and its one list need; what the fake API records
#: as (resource, verb) is mapped onto these in tests/test_rebalance_apply.py.
WRITES = {("", "pods/eviction", "create"), ("", "persistentvolumeclaims", "delete")}


def by_kind(objects: list[Obj], name: str) -> dict[str, Obj]:
    return {o["kind"]: o for o in objects if o["metadata"]["name"] == name}


def test_component_is_the_generator_output() -> None:
    """deploy/components/rebalance holds what `stszone manifests --component rebalance
    --kustomize-dir` writes."""
    expected = deployfiles.component_files("rebalance", deploybase.Install())
    actual = {path.name: path.read_text() for path in COMPONENT.iterdir()}
    assert actual == expected, (
        "deploy/components/rebalance differs from webhook/install/deploybase.py; regenerate it "
        "with `stszone manifests --component rebalance --kustomize-dir deploy/components/rebalance`"
    )


def test_component_renders_on_the_base_and_only_adds_the_rebalance_identity(
    tmp_path: Path,
) -> None:
    """An overlay listing the component: the base unchanged, plus ServiceAccount, ClusterRole
    and ClusterRoleBinding stszone-rebalance, all valid; the webhook's role writes only Events."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    up = os.path.relpath(DEPLOY, overlay)
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": [f"{up}/base"], "components": [f"{up}/components/rebalance"]})
    )
    objects = kustomize(overlay)
    validate(objects)
    base = deployfiles.base_objects(deploybase.Install())
    added = [o for o in objects if o not in base]
    assert len(objects) == len(base) + 3
    ours = by_kind(added, deploybase.REBALANCE)
    assert set(ours) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
    assert ours["ClusterRoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "stszone-rebalance", "namespace": "stszone-system"}
    ]
    writes = {t for t in granted(ours["ClusterRole"]) if t[2] not in ("get", "list", "watch")}
    assert writes == WRITES
    webhook_role = by_kind(objects, deploybase.NAME)["ClusterRole"]
    webhook_writes = {t for t in granted(webhook_role) if t[2] not in ("get", "list", "watch")}
    assert webhook_writes == {
        ("events.k8s.io", "events", "create"),
        ("events.k8s.io", "events", "patch"),
    }


def test_manifests_prints_the_component_for_another_namespace() -> None:
    """`stszone manifests --component rebalance --namespace ops` needs no certificate."""
    out = io.StringIO()
    assert manifests.run_manifests(ca=None, component="rebalance", namespace="ops", out=out) == 0
    objects = [doc for doc in yaml.safe_load_all(out.getvalue()) if doc]
    validate(objects)
    ours = by_kind(objects, deploybase.REBALANCE)
    assert ours["ServiceAccount"]["metadata"]["namespace"] == "ops"
    assert ours["ClusterRoleBinding"]["subjects"][0]["namespace"] == "ops"
    assert main(["manifests", "--component", "rebalance", "--namespace", "Bad_NS"]) == 2
