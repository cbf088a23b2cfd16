"""The chart renders what ``stszone manifests`` and ``deploy/`` render: one source of truth.

The chart is templates, the manifests are Python; nothing but this test keeps them equal. Each
case renders the chart with a few values and compares it, object by object and field by field,
with the matching kustomize overlay or ``stszone manifests`` invocation. What may differ is
listed in :data:`HELM_LABELS`, :data:`CHART_PRIORITY`, :func:`_reference` and :func:`_chart`,
each with the reason. The chart's alerts (files/alerts.yaml, rendered) are compared with
deploy/components/prometheus here too, as part of the PrometheusRule.
"""

from __future__ import annotations

import base64
import copy
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm import CHART, Helm, Obj, helm_for_tests, release
from tests.rendered import DEPLOY, base_with, kustomize
from webhook.config import DEFAULT_NAMESPACE
from webhook.install import deployfiles, manifests
from webhook.install.certfiles import issue
from webhook.install.pemcheck import check_serving_pair
from webhook.install.registration import Kinds

#: Helm's labels for finding a release's objects (`kubectl get all -l
#: app.kubernetes.io/instance=stszone`); a kustomize base has no release to name. They are
#: on metadata only: the selectors and the pod template keep deploy/base's labels, so that
#: `helm install --take-ownership` can adopt a kustomize install (a selector cannot change).
HELM_LABELS = {
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
}
#: Placeholder for certificate material, which each side generates for itself.
GENERATED = "<generated>"
#: The cert-manager objects of deploy/overlays/cert-manager carry no labels; the chart labels
#: every object it makes with its name and component, as charts do.
UNLABELLED_IN_OVERLAY = {"Issuer", "Certificate"}
#: deploy/base leaves scheduling priority to the platform; the chart's replicas run at
#: system-cluster-critical, with the ResourceQuota that permits the class outside kube-system
#: (the chart's README says why).
CHART_PRIORITY = ("priorityClassName", "ResourceQuota")


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """The pinned helm, isolated from the user's helm configuration."""
    return helm_for_tests(tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and a serving pair for stszone.stszone-system, as `stszone certs` writes them."""
    out = tmp_path_factory.mktemp("certs")
    issue(out, service="stszone", namespace=DEFAULT_NAMESPACE)
    return out


def _printed(pair: Path, **flags: Any) -> list[Obj]:
    """What `stszone manifests --ca ...` prints, with ``flags`` as its options."""
    out = io.StringIO()
    assert manifests.run_manifests(ca=pair / "ca.crt", out=out, **flags) == 0
    return [doc for doc in yaml.safe_load_all(out.getvalue()) if doc]


def _check_pair(objects: list[Obj], *, source: str) -> None:
    """The Secret's pair names the Service and chains to the caBundle of every webhook."""
    secrets = [obj for obj in objects if obj["kind"] == "Secret"]
    if not secrets:
        return
    (secret,) = secrets
    data = {key: base64.b64decode(value) for key, value in secret["data"].items()}
    bundles = {
        hook["clientConfig"].get("caBundle")
        for obj in objects
        if obj["kind"].endswith("WebhookConfiguration")
        for hook in obj["webhooks"]
    }
    assert len(bundles) == 1, f"{source}: the webhooks trust different CAs: {bundles}"
    ca = base64.b64decode(bundles.pop() or "")
    host = f"stszone.{DEFAULT_NAMESPACE}.svc"
    check_serving_pair(ca_pem=ca, cert_pem=data["tls.crt"], key_pem=data["tls.key"], host=host)


def _blank_certificates(objects: list[Obj]) -> None:
    for obj in objects:
        if obj["kind"] == "Secret":
            obj["data"] = dict.fromkeys(obj["data"], GENERATED)
        if obj["kind"].endswith("WebhookConfiguration"):
            for hook in obj["webhooks"]:
                if "caBundle" in hook["clientConfig"]:
                    hook["clientConfig"]["caBundle"] = GENERATED


def _reference(objects: list[Obj]) -> list[Obj]:
    """The reference, less what the chart leaves to Helm."""
    _check_pair(objects, source="stszone manifests")
    # Helm makes the release namespace (--create-namespace); a Namespace in the chart would be
    # one more object that Helm refuses to adopt when it exists. docs/install.md gives the
    # label deploy/base sets on it (pod-security.kubernetes.io/enforce=restricted).
    kept = [copy.deepcopy(obj) for obj in objects if obj["kind"] != "Namespace"]
    _blank_certificates(kept)
    return kept


def _chart(objects: list[Obj]) -> list[Obj]:
    """The chart's release objects, less what only Helm needs."""
    kept = [obj for obj in copy.deepcopy(release(objects)) if obj["kind"] != CHART_PRIORITY[1]]
    _check_pair(kept, source="the chart")
    for obj in kept:
        if obj["kind"] == "Deployment":
            obj["spec"]["template"]["spec"].pop(CHART_PRIORITY[0])
        labels = obj["metadata"]["labels"]
        for key in HELM_LABELS:
            labels.pop(key, None)
        if obj["kind"] in UNLABELLED_IN_OVERLAY:
            for key in ("app.kubernetes.io/name", "app.kubernetes.io/component"):
                labels.pop(key, None)
        if not labels:
            del obj["metadata"]["labels"]
        if obj["kind"] == "Secret":
            # The chart keeps the CA with the pair, so that an upgrade finds both (lookup).
            obj["data"].pop("ca.crt")
    _blank_certificates(kept)
    return kept


def _differences(chart: Any, reference: Any, where: str) -> list[str]:
    """Paths where the two differ, each with both values."""
    if isinstance(chart, dict) and isinstance(reference, dict):
        found = []
        for key in sorted(chart.keys() | reference.keys()):
            if key not in reference:
                found.append(f"{where}.{key}: only in the chart: {chart[key]!r}")
            elif key not in chart:
                found.append(f"{where}.{key}: only in the reference: {reference[key]!r}")
            else:
                found += _differences(chart[key], reference[key], f"{where}.{key}")
        return found
    if isinstance(chart, list) and isinstance(reference, list) and len(chart) == len(reference):
        return [
            line
            for i, (a, b) in enumerate(zip(chart, reference, strict=True))
            for line in _differences(a, b, f"{where}[{i}]")
        ]
    return [] if chart == reference else [f"{where}: chart {chart!r}, reference {reference!r}"]


def _by_key(objects: list[Obj]) -> dict[str, Obj]:
    return {f"{obj['kind']}/{obj['metadata']['name']}": obj for obj in objects}


def _managed(**flags: Any) -> list[Obj]:
    """What `stszone manifests` prints without --ca: the base, self-managed certificates."""
    out = io.StringIO()
    assert manifests.run_manifests(ca=None, out=out, **flags) == 0
    return [doc for doc in yaml.safe_load_all(out.getvalue()) if doc]


def _with_components(pair: Path, tmp: Path, *components: str) -> list[Obj]:
    """`kubectl kustomize` of deploy/base with the components (and provided-certs: the chart's
    certificate is mounted, as `--ca` provides it), filled in by `stszone manifests --ca ...
    --base -`, as docs/install.md renders a kustomization with provided certificates."""
    rendered = tmp / "rendered.yaml"
    rendered.write_text(deployfiles.dump(base_with(tmp, "provided-certs", *components)))
    return _printed(pair, base=rendered)


#: ci/provided-values.yaml's CA, for the Secret deploy/ mounts (stszone-tls).
PROVIDED = {
    "mode": "provided",
    "provided": {
        **yaml.safe_load((CHART / "ci" / "provided-values.yaml").read_text())["certificates"][
            "provided"
        ],
        "secretName": "stszone-tls",
    },
}
GENERATED_MODE = {"certificates": {"mode": "generated"}}

#: name -> (chart values, the reference it must equal).
CASES: dict[str, tuple[dict[str, Any], Callable[[Path, Path], list[Obj]]]] = {
    "defaults = deploy/ (self-managed)": ({}, lambda pair, tmp: kustomize(DEPLOY)),
    "defaults = stszone manifests (self-managed)": ({}, lambda pair, tmp: _managed()),
    "webhooks.matchConditions=false = stszone manifests --no-match-conditions": (
        {"webhooks": {"matchConditions": False}},
        lambda pair, tmp: _managed(match_conditions=False),
    ),
    "kafkaNodePools.enabled=false = stszone manifests --no-kafka-node-pools": (
        {"kafkaNodePools": {"enabled": False}},
        lambda pair, tmp: _managed(kinds=Kinds(kafka_node_pools=False)),
    ),
    "kruise.enabled=false = stszone manifests --no-kruise": (
        {"kruise": {"enabled": False}},
        lambda pair, tmp: _managed(kinds=Kinds(kruise=False)),
    ),
    "certificates.mode=generated = stszone manifests --ca": (
        GENERATED_MODE,
        lambda pair, tmp: _printed(pair),
    ),
    "certificates.mode=provided = stszone manifests --ca --no-secret": (
        {"certificates": PROVIDED},
        lambda pair, tmp: _printed(pair, secret=False),
    ),
    "certificates.mode=cert-manager = deploy/overlays/cert-manager": (
        {"certificates": {"mode": "cert-manager"}},
        lambda pair, tmp: kustomize(DEPLOY / "overlays" / "cert-manager"),
    ),
    "metrics.enabled=true = components/prometheus, grafana-dashboard": (
        {"metrics": {"enabled": True}},
        lambda pair, tmp: base_with(tmp, "prometheus", "grafana-dashboard"),
    ),
    "rebalance.enabled=true = components/rebalance": (
        {"rebalance": {"enabled": True}},
        lambda pair, tmp: base_with(tmp, "rebalance"),
    ),
    "certificates.mode=generated, metrics.enabled=true = provided-certs, prometheus, "
    "grafana-dashboard, --ca --base": (
        {**GENERATED_MODE, "metrics": {"enabled": True}},
        lambda pair, tmp: _with_components(pair, tmp, "prometheus", "grafana-dashboard"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_chart_renders_what_the_manifests_render(
    helm: Helm, pair: Path, tmp_path: Path, case: str
) -> None:
    """Same kinds, names and fields, object by object; only the listed differences allowed."""
    values, reference_of = CASES[case]
    chart = _by_key(_chart(helm.template(values=values)))
    reference = _by_key(_reference(reference_of(pair, tmp_path)))
    assert sorted(chart) == sorted(reference), "the chart and the reference hold other objects"
    found = [line for key in chart for line in _differences(chart[key], reference[key], key)]
    assert not found, "the chart differs from the reference:\n" + "\n".join(found)


def test_chart_dashboard_is_the_grafana_component() -> None:
    """files/dashboard.json is deploy/components/grafana-dashboard/stszone.json, byte for byte
    (kustomize reads files only under its own directory, so each holds a copy)."""
    chart = (CHART / "files" / "dashboard.json").read_bytes()
    assert chart == (DEPLOY / "components" / "grafana-dashboard" / "stszone.json").read_bytes()
