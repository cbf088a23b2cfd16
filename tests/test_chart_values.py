"""charts/stszone: what the values for the platform change (image digest, priority and its
quota, security contexts, NetworkPolicy, matchConditions by Kubernetes version) and what the
alerts say for a release of another name in another namespace."""

from __future__ import annotations

from typing import Any

import pytest

from tests import markdown
from tests.helm import ROOT, Helm, HelmError, Obj, helm_for_tests, hooks, release
from tests.rendered import container, only, validate, webhooks
from webhook.cli import build_parser, settings_from

PROMETHEUS = ("--api-versions", "monitoring.coreos.com/v1")
DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """The pinned helm, isolated from the user's helm configuration."""
    return helm_for_tests(tmp_path_factory.mktemp("helm-home"))


def _kinds(objects: list[Obj], kind: str) -> list[Obj]:
    return [obj for obj in objects if obj["kind"] == kind]


@pytest.mark.parametrize(
    ("image", "reference"),
    [
        ({}, "stszone:0.1.0"),
        ({"tag": "v2"}, "stszone:v2"),
        ({"digest": DIGEST}, f"stszone@{DIGEST}"),
        ({"tag": "v2", "digest": DIGEST}, f"stszone:v2@{DIGEST}"),
        (
            {"repository": "registry.example.com:5000/platform/stszone", "digest": DIGEST},
            f"registry.example.com:5000/platform/stszone@{DIGEST}",
        ),
    ],
    ids=["appVersion", "tag", "digest alone", "tag and digest", "registry with a port"],
)
def test_image_reference(helm: Helm, image: dict[str, str], reference: str) -> None:
    """A digest alone pins the image without the appVersion tag; with a tag, both; the helm
    test pod runs the same reference."""
    objects = helm.template(values={"image": image})
    assert container(release(objects))["image"] == reference
    assert only(hooks(objects), "Pod")["spec"]["containers"][0]["image"] == reference


def test_defaults_meet_the_restricted_pod_security_profile(helm: Helm) -> None:
    """The restricted profile's requirements, for the webhook and the test pod alike, and a
    priority class with the quota that permits it in the release namespace."""
    objects = helm.template()
    pods = [
        only(release(objects), "Deployment")["spec"]["template"]["spec"],
        only(hooks(objects), "Pod")["spec"],
    ]
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 65532
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for each in pod["containers"]:
            context = each["securityContext"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert context["readOnlyRootFilesystem"] is True
    assert pods[0]["priorityClassName"] == "system-cluster-critical"
    quota = only(objects, "ResourceQuota")
    assert quota["metadata"]["namespace"] == "stszone-system"
    selector = quota["spec"]["scopeSelector"]["matchExpressions"]
    assert selector == [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["system-cluster-critical"]}
    ]
    assert int(quota["spec"]["hard"]["pods"]) > 2 * 2, "room for a rollout of both replicas"


@pytest.mark.parametrize(
    ("values", "namespace", "quota"),
    [
        ({}, "kube-system", False),
        ({"priorityClassName": "system-node-critical"}, "stszone-system", True),
        ({"priorityClassName": ""}, "stszone-system", False),
        ({"priorityClassQuota": {"enabled": False}}, "stszone-system", False),
    ],
    ids=["in kube-system", "node-critical", "no class", "switched off"],
)
def test_quota_only_where_a_critical_class_needs_it(
    helm: Helm, values: dict[str, Any], namespace: str, quota: bool
) -> None:
    """kube-system allows the critical classes already; other classes need no quota."""
    objects = helm.template(values=values, namespace=namespace)
    assert bool(_kinds(objects, "ResourceQuota")) is quota
    pod = only(release(objects), "Deployment")["spec"]["template"]["spec"]
    assert pod.get("priorityClassName", "") == values.get(
        "priorityClassName", "system-cluster-critical"
    )


@pytest.mark.parametrize(
    ("version", "rendered"), [("1.27.16", False), ("1.28.0", True), ("1.36.2", True)]
)
def test_match_conditions_follow_the_cluster_version(
    helm: Helm, version: str, rendered: bool
) -> None:
    """1.27's API server drops matchConditions (alpha, gate off): left out there by itself."""
    objects = helm.template("--kube-version", version)
    for kind, hook in webhooks(objects):
        assert ("matchConditions" in hook) is rendered, kind
    validate(release(objects))


@pytest.mark.parametrize(
    ("values", "ports"),
    [
        ({"networkPolicy": {"enabled": True}}, ["https"]),
        ({"networkPolicy": {"enabled": True}, "metrics": {"enabled": True}}, ["https", "metrics"]),
        ({"networkPolicy": {"enabled": True}, "hostNetwork": True}, []),
    ],
    ids=["webhook port", "and metrics port", "not on the host's network"],
)
def test_network_policy_admits_the_served_ports(
    helm: Helm, values: dict[str, Any], ports: list[str]
) -> None:
    """From any source by default; the metrics port only when it exists; no policy for pods on
    the host's network, which NetworkPolicy does not reach."""
    policies = _kinds(helm.template(values=values), "NetworkPolicy")
    if not ports:
        assert not policies
        return
    (policy,) = policies
    assert policy["spec"]["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "stszone",
        "app.kubernetes.io/component": "webhook",
    }
    ingress = policy["spec"]["ingress"]
    assert [rule["ports"][0]["port"] for rule in ingress] == ports
    assert all("from" not in rule for rule in ingress)
    validate([policy])


def test_alerts_name_the_release_namespace_and_deployment(helm: Helm) -> None:
    """Another release in another namespace: the webhook's alerts watch that namespace's
    replicas and their text names it and the release's Deployment; nothing says stszone-system."""
    objects = helm.template(*PROMETHEUS, name="platform", namespace="webhooks")
    rule = only(objects, "PrometheusRule")
    text = str(rule["spec"])
    assert "stszone-system" not in text
    rules = {entry["alert"]: entry for group in rule["spec"]["groups"] for entry in group["rules"]}
    down = rules["StszoneDown"]
    assert down["expr"] == 'absent(stszone_ready{namespace="webhooks"} == 1)'
    assert "kubectl -n webhooks describe deployment platform-stszone" in " ".join(
        down["annotations"]["description"].split()
    )
    assert only(release(objects), "Deployment")["metadata"]["name"] == "platform-stszone"
    expiring = " ".join(
        rules["StszoneCertificateExpiringSoon"]["annotations"]["description"].split()
    )
    assert "describe certificate platform-stszone-tls" in expiring
    for name in ("StszoneNotReady", "StszonePodCreatesDenied", "StszoneCertificateExpiringSoon"):
        assert 'namespace="webhooks"' in rules[name]["expr"], name


def test_every_runbook_url_is_a_section_of_the_metrics_docs(helm: Helm) -> None:
    """runbook_url = docs/metrics.md#alertname, and that section exists and says what to do."""
    rule = only(helm.template(*PROMETHEUS), "PrometheusRule")
    docs = (ROOT / "docs" / "metrics.md").read_text()
    anchors = markdown.anchors(docs)
    for group in rule["spec"]["groups"]:
        for entry in group["rules"]:
            url = entry["annotations"]["runbook_url"]
            page, anchor = url.split("#")
            assert page.endswith("/docs/metrics.md"), url
            assert anchor == entry["alert"].lower() and anchor in anchors, url
            section = docs[docs.index(f"### {entry['alert']}\n") :]
            section = section[: section.find("\n### ", 1)]
            assert "What to do" in section, entry["alert"]


def test_dashboard_configmap_carries_the_sidecar_label(helm: Helm) -> None:
    """Metrics on: the dashboard ConfigMap with grafana_dashboard "1"; off: none."""
    board = only(helm.template(*PROMETHEUS), "ConfigMap")
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert board["metadata"]["name"] == "stszone-dashboard"
    assert not _kinds(helm.template(), "ConfigMap")


def _monitor(interval: str, timeout: str) -> dict[str, Any]:
    return {"metrics": {"serviceMonitor": {"interval": interval, "scrapeTimeout": timeout}}}


@pytest.mark.parametrize(
    ("interval", "timeout"),
    [("5s", "10s"), ("500ms", "1s"), ("1m", "1m500ms"), ("1m", "61s"), ("1h", "1h1ms")],
)
def test_scrape_timeout_longer_than_the_interval_is_refused(
    helm: Helm, interval: str, timeout: str
) -> None:
    """The Prometheus Operator skips a ServiceMonitor whose scrapeTimeout exceeds its interval
    (nothing is scraped, and StszoneDown fires for want of series): the chart refuses it,
    naming both values."""
    with pytest.raises(HelmError) as refused:
        helm.template(*PROMETHEUS, values=_monitor(interval, timeout))
    said = refused.value.stderr
    assert f"metrics.serviceMonitor.scrapeTimeout ({timeout})" in said
    assert f"metrics.serviceMonitor.interval ({interval})" in said


@pytest.mark.parametrize(
    ("interval", "timeout"),
    [("10s", "10s"), ("1m", "59s"), ("2m", "1m30s"), ("1s", "999ms"), ("1d", "23h"), ("1w", "6d")],
)
def test_scrape_timeout_within_the_interval_is_rendered(
    helm: Helm, interval: str, timeout: str
) -> None:
    """A timeout up to the interval, in any of Prometheus's units, goes into the ServiceMonitor."""
    (endpoint,) = only(
        helm.template(*PROMETHEUS, values=_monitor(interval, timeout)), "ServiceMonitor"
    )["spec"]["endpoints"]
    assert (endpoint["interval"], endpoint["scrapeTimeout"]) == (interval, timeout)


def test_scrape_timeout_is_not_judged_without_a_service_monitor(helm: Helm) -> None:
    """No ServiceMonitor is rendered (metrics off, or the monitor off): nothing to refuse."""
    assert not _kinds(helm.template(values=_monitor("5s", "10s")), "ServiceMonitor")
    values = _monitor("5s", "10s")
    values["metrics"]["serviceMonitor"]["enabled"] = False
    assert not _kinds(helm.template(*PROMETHEUS, values=values), "ServiceMonitor")


@pytest.mark.parametrize(
    "excluded",
    [[], ["monitoring", "cert-manager"], ["kube-system", "batch"]],
    ids=["none", "two", "one already excluded"],
)
def test_serve_leaves_alone_the_namespaces_the_webhooks_never_send(
    helm: Helm, excluded: list[str]
) -> None:
    """webhooks.excludeNamespaces keeps a namespace away "whatever its labels": the API server
    never sends it, so `stszone serve` must not count its sets in the zone-risk gauges and
    alerts, nor filter its pods in the extender, as if they were stszone's. What the replicas
    treat as never intercepted is what the namespaceSelector leaves out."""
    objects = helm.template(values={"webhooks": {"excludeNamespaces": excluded}}, namespace="db")
    args = container(release(objects))["args"]
    parsed = build_parser().parse_args(["serve", *args])
    # The Deployment gives POD_NAMESPACE from the pod's own namespace (fieldRef).
    settings = settings_from(parsed, environ={"POD_NAMESPACE": "db"})
    for kind, hook in webhooks(objects):
        (outside,) = hook["namespaceSelector"]["matchExpressions"]
        assert outside["operator"] == "NotIn", kind
        assert settings.defaults().excluded_namespaces == set(outside["values"]), kind
