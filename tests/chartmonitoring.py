"""What the chart's monitoring and OpenShift values must change in the rendered objects.

Used by ``tests/test_chart.py`` for ``ci/metrics-values.yaml`` and ``ci/openshift-values.yaml``;
the checks read the values file they are given, so a changed file is checked as it is.
"""

from __future__ import annotations

import json
from typing import Any

from tests.helm import CHART, Obj, hooks, release
from tests.rendered import only

#: The keys OpenShift's restricted-v2 assigns itself and refuses a pod to choose.
PLATFORM_ASSIGNED = {"runAsUser", "runAsGroup", "fsGroup"}


def _rule_names(rule: Obj) -> list[str]:
    return [entry["alert"] for group in rule["spec"]["groups"] for entry in group["rules"]]


def metrics_objects(objects: list[Obj], values: dict[str, Any]) -> None:
    """ServiceMonitor, PrometheusRule and dashboard in their namespaces with their options; the
    alerts left out are gone and the others point at the runbook base; the NetworkPolicy
    admits the webhook and metrics ports from the peers given."""
    metrics = values["metrics"]
    monitor = only(objects, "ServiceMonitor")
    wanted = metrics["serviceMonitor"]
    assert monitor["metadata"]["namespace"] == wanted["namespace"]
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == ["stszone-system"]
    (endpoint,) = monitor["spec"]["endpoints"]
    for key in ("honorLabels", "relabelings", "metricRelabelings"):
        assert endpoint[key] == wanted[key], key
    rule = only(objects, "PrometheusRule")
    assert rule["metadata"]["namespace"] == metrics["prometheusRule"]["namespace"]
    names = _rule_names(rule)
    disabled = {name for name, off in metrics["prometheusRule"]["disabled"].items() if off}
    assert disabled and not disabled & set(names), names
    assert len(names) == 6 - len(disabled), names
    base = metrics["prometheusRule"]["runbookBaseURL"]
    for group in rule["spec"]["groups"]:
        for entry in group["rules"]:
            url = entry["annotations"]["runbook_url"]
            assert url == f"{base}#{entry['alert'].lower()}", url
    dashboard = only(objects, "ConfigMap")
    board = metrics["dashboard"]
    assert dashboard["metadata"]["namespace"] == board["namespace"]
    assert dashboard["metadata"]["labels"].items() >= board["labels"].items()
    assert dashboard["metadata"]["annotations"] == board["annotations"]
    assert json.loads(dashboard["data"]["stszone.json"]) == json.loads(
        (CHART / "files" / "dashboard.json").read_text()
    )
    policy = only(objects, "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    webhook_rule, metrics_rule = policy["ingress"]
    assert webhook_rule == {
        "ports": [{"port": "https", "protocol": "TCP"}],
        "from": values["networkPolicy"]["webhookFrom"],
    }
    assert metrics_rule == {
        "ports": [{"port": "metrics", "protocol": "TCP"}],
        "from": values["networkPolicy"]["metricsFrom"],
    }


def openshift(objects: list[Obj], values: dict[str, Any]) -> None:
    """No UID, group or fsGroup in any pod or container (the webhook's and the test's): the
    platform assigns them; the rest of the restricted profile stays."""
    deployment = only(release(objects), "Deployment")["spec"]["template"]["spec"]
    for pod in (deployment, only(hooks(objects), "Pod")["spec"]):
        assert not PLATFORM_ASSIGNED & pod["securityContext"].keys(), pod["securityContext"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in pod["containers"]:
            context = container["securityContext"]
            assert not PLATFORM_ASSIGNED & context.keys(), context
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
