"""deploy/components/prometheus against a real API server: the CRD schemas accept its objects.

Needs the prometheus-operator CRDs (ServiceMonitor, PrometheusRule). When the cluster lacks
them, they are applied from ``$STSZONE_CRDS`` (else the lab's
``crds/prometheus-operator.yaml``, ``kube.lab_file``) and deleted again afterwards; nothing else
of the cluster changes (``kubectl apply --dry-run=server`` persists nothing).
"""

from __future__ import annotations

import copy
import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import delete_namespace, opted_in_namespace
from tests.e2e.kube import Kubectl, KubectlError, Obj, applied_crds, crd_file, wait_for
from tests.rendered import base_with

CRD_FILE = crd_file("STSZONE_CRDS", "prometheus-operator.yaml")
NEEDED = ("servicemonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com")
#: What the component adds to the base, and the Deployment it patches.
CHECKED = {"Service", "ServiceMonitor", "PrometheusRule", "Deployment"}


@pytest.fixture(scope="module")
def crds(kubectl: Kubectl) -> Iterator[None]:
    """The monitoring CRDs, installed for this module when the cluster lacks them."""
    missing = [name for name in NEEDED if kubectl.gone("crd", name)]
    if not missing:
        yield
        return
    if not CRD_FILE.is_file():
        pytest.skip(
            f"the cluster lacks {', '.join(missing)} and {CRD_FILE} does not exist; set STSZONE_CRDS"
        )
    with applied_crds(kubectl, CRD_FILE):
        yield


@pytest.fixture(scope="module")
def namespace(kubectl: Kubectl) -> Iterator[str]:
    run = secrets.token_hex(3)
    name = f"stszone-e2e-prom-{run}"
    try:
        kubectl.create(opted_in_namespace(name, run))
        yield name
    finally:
        delete_namespace(kubectl, name)


def _objects(tmp_path: Path, namespace: str) -> list[Obj]:
    rendered = base_with(tmp_path, "prometheus")
    objects = [copy.deepcopy(obj) for obj in rendered if obj["kind"] in CHECKED]
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
    return objects


def _dry_run(kubectl: Kubectl, objects: list[Obj]) -> str:
    stream = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    return kubectl.run("apply", "--dry-run=server", "-o", "name", "-f", "-", stdin=stream)


def test_component_objects_pass_server_side_validation(
    kubectl: Kubectl, crds: None, namespace: str, tmp_path: Path
) -> None:
    """Strict decoding and the CRD schemas accept the ServiceMonitor, the rule, the Service
    and the patched Deployment; the same ServiceMonitor with a typo is refused."""
    objects = _objects(tmp_path, namespace)
    scoped = kubectl.within(namespace)
    names = wait_for(
        "the API server to serve the new kinds", lambda: _dry_run(scoped, objects), timeout=60
    )
    assert sorted(names.split()) == sorted(
        [
            "deployment.apps/stszone",
            "prometheusrule.monitoring.coreos.com/stszone",
            "service/stszone",
            "service/stszone-metrics",
            "servicemonitor.monitoring.coreos.com/stszone",
        ]
    ), names
    monitor = next(obj for obj in objects if obj["kind"] == "ServiceMonitor")
    typo = copy.deepcopy(monitor)
    typo["spec"]["endpoints"][0]["intervall"] = "30s"
    with pytest.raises(KubectlError) as refused:
        _dry_run(scoped, [typo])
    assert "intervall" in refused.value.stderr
