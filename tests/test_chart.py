"""charts/stszone checked with the real helm: lint, every values file, the schema, the hook.

What the default objects contain is checked against ``stszone manifests`` in
``test_chart_parity.py``; here, what each value changes, what the schema refuses, and that
every value is set otherwise by some ``ci/*.yaml`` (the chart's README lists them:
``test_chart_readme.py``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chartcerts import assert_mounted, assert_self_managed, assert_valid_pair
from tests.chartmonitoring import metrics_objects, openshift
from tests.helm import (
    CHART,
    Helm,
    HelmError,
    Obj,
    ci_values,
    helm_for_tests,
    hooks,
    release,
)
from tests.rendered import container, only, validate, webhooks
from tools.chart_readme import leaves
from webhook import __version__
from webhook.cli import build_parser, settings_from
from webhook.cluster.resources import resources
from webhook.install.certs import service_dns_names

#: Groups of custom resources, for which kubernetes-validate has no schema.
CRD_GROUPS = {"cert-manager.io", "monitoring.coreos.com"}
PROMETHEUS = ("--api-versions", "monitoring.coreos.com/v1")


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """The pinned helm, isolated from the user's helm configuration."""
    return helm_for_tests(tmp_path_factory.mktemp("helm-home"))


def _values(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def _named(objects: list[Obj], kind: str) -> dict[str, Obj]:
    return {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == kind}


def _pod(objects: list[Obj]) -> Obj:
    spec: Obj = only(release(objects), "Deployment")["spec"]["template"]["spec"]
    return spec


def _args(objects: list[Obj]) -> list[str]:
    args: list[str] = container(release(objects))["args"]
    return args


VALUES_FILES = [None, *ci_values()]


@pytest.mark.parametrize("values", VALUES_FILES, ids=lambda p: p.name if p else "defaults")
def test_lint_strict_passes(helm: Helm, values: Path | None) -> None:
    """`helm lint --strict` (warnings fail too) with the defaults and with each ci file."""
    args = ["--values", str(values)] if values else []
    out = helm.run("lint", "--strict", str(CHART), *args)
    assert "0 chart(s) failed" in out, out


@pytest.mark.parametrize("values", VALUES_FILES, ids=lambda p: p.name if p else "defaults")
def test_template_renders_valid_objects(helm: Helm, values: Path | None) -> None:
    """Every built-in object validates strictly on the oldest and newest supported Kubernetes."""
    args = ["--values", str(values)] if values else []
    objects = helm.template(*args, *PROMETHEUS)
    assert objects
    validate([obj for obj in objects if obj["apiVersion"].split("/")[0] not in CRD_GROUPS])
    keys = [(obj["kind"], obj["metadata"]["name"]) for obj in objects]
    assert len(keys) == len(set(keys)), f"an object is rendered twice: {keys}"


def _cert_manager(objects: list[Obj], values: dict[str, Any]) -> None:
    """The self-signed CA chain signs the Certificate into the mounted Secret; cainjector fills
    the caBundle, so the chart sets none and makes no Secret."""
    manager = values["certificates"]["certManager"]
    assert not _named(objects, "Secret")
    assert_mounted(objects)
    certificates, issuers = _named(objects, "Certificate"), _named(objects, "Issuer")
    serving = certificates["stszone-tls"]["spec"]
    assert serving["duration"] == manager["duration"]
    assert serving["renewBefore"] == manager["renewBefore"]
    assert serving["dnsNames"] == service_dns_names("stszone", "stszone-system")
    assert _pod(objects)["volumes"][0]["secret"]["secretName"] == serving["secretName"]
    ca_issuer = issuers[serving["issuerRef"]["name"]]["spec"]
    ca = next(c["spec"] for c in certificates.values() if c["spec"].get("isCA"))
    assert ca_issuer == {"ca": {"secretName": ca["secretName"]}}
    assert issuers[ca["issuerRef"]["name"]]["spec"] == {"selfSigned": {}}
    for kind, hook in webhooks(objects):
        assert "caBundle" not in hook["clientConfig"], kind
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = only(objects, kind)["metadata"]["annotations"]
        assert annotations == {"cert-manager.io/inject-ca-from": "stszone-system/stszone-tls"}


def _cert_manager_issuer(objects: list[Obj], values: dict[str, Any]) -> None:
    """An issuer of the platform's signs the one Certificate; the chart's own CA is not made."""
    assert not _named(objects, "Issuer")
    assert list(_named(objects, "Certificate")) == ["stszone-tls"]
    certificate = only(objects, "Certificate")["spec"]
    assert certificate["issuerRef"] == values["certificates"]["certManager"]["issuerRef"]


def _provided(objects: list[Obj], values: dict[str, Any]) -> None:
    """The named Secret is mounted (the chart makes none) and its CA is the caBundle."""
    provided = values["certificates"]["provided"]
    assert not _named(objects, "Secret")
    assert_mounted(objects)
    assert _pod(objects)["volumes"][0]["secret"]["secretName"] == provided["secretName"]
    for kind, hook in webhooks(objects):
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == provided["ca"].encode(), kind


def _placement(objects: list[Obj], values: dict[str, Any]) -> None:
    """Every placement value reaches the pod spec; names follow fullnameOverride (the names
    self-managed certificates are written under too); webhooks' knobs reach both
    configurations; the zones reach `stszone serve` and the test hook."""
    name = values["fullnameOverride"]
    deployment = only(release(objects), "Deployment")
    assert deployment["spec"]["replicas"] == values["replicas"]
    pod, webhook = _pod(objects), container(release(objects))
    image = values["image"]
    assert webhook["image"] == f"{image['repository']}:{image['tag']}@{image['digest']}"
    assert webhook["imagePullPolicy"] == image["pullPolicy"]
    assert webhook["resources"] == values["resources"]
    for key in ("imagePullSecrets", "nodeSelector", "tolerations", "affinity", "priorityClassName"):
        assert pod[key] == values[key], key
    assert pod["topologySpreadConstraints"] == values["topologySpreadConstraints"]
    assert not _named(objects, "ResourceQuota"), "a class of the platform's needs no quota"
    template = deployment["spec"]["template"]["metadata"]
    assert template["labels"].items() >= values["podLabels"].items()
    assert not deployment["spec"]["selector"]["matchLabels"].keys() & values["podLabels"].keys()
    assert template["annotations"] == values["podAnnotations"]
    settings = settings_from(build_parser().parse_args(["serve", *webhook["args"]]))
    assert settings.zones == tuple(values["zones"])
    assert webhook["args"][-len(values["extraArgs"]) :] == values["extraArgs"]
    assert settings.log_level == "debug"
    excluded = sorted({"kube-system", "stszone-system", *values["webhooks"]["excludeNamespaces"]})
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        metadata = only(objects, kind)["metadata"]
        assert metadata["annotations"] == values["webhooks"]["annotations"], kind
        assert metadata["labels"].items() >= values["webhooks"]["labels"].items(), kind
    for kind, hook in webhooks(objects):
        assert hook["failurePolicy"] == values["webhooks"]["failurePolicy"], kind
        assert hook["timeoutSeconds"] == values["webhooks"]["timeoutSeconds"], kind
        assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == excluded, kind
        assert hook["clientConfig"]["service"]["name"] == name, kind
    assert only(release(objects), "Service")["metadata"]["name"] == name
    assert_self_managed(objects, name=name)
    assert settings.certs_secret == f"{name}-tls" and settings.certs_lease == f"{name}-certs"
    test_pod = only(hooks(objects), "Pod")["spec"]["containers"][0]
    assert test_pod["image"] == values["tests"]["image"]
    env = {item["name"]: item["value"] for item in test_pod["env"]}
    assert env["STSZONE_TEST_ZONES"] == ",".join(values["zones"])
    assert env["STSZONE_DEPLOYMENT"] == name


def _host_network(objects: list[Obj], values: dict[str, Any]) -> None:
    """The pod joins the node's network and serves containerPort there (args, port, probes by
    name); matchConditions turned off; one replica gets no budget; the critical class without
    its quota."""
    pod, webhook = _pod(objects), container(release(objects))
    assert pod["hostNetwork"] is True
    assert pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    settings = settings_from(build_parser().parse_args(["serve", *webhook["args"]]))
    assert settings.port == values["containerPort"]
    assert webhook["ports"] == [
        {"name": "https", "containerPort": values["containerPort"], "protocol": "TCP"}
    ]
    assert webhook["readinessProbe"]["httpGet"]["port"] == "https"
    for kind, hook in webhooks(objects):
        assert "matchConditions" not in hook, kind
    assert not _named(objects, "PodDisruptionBudget")
    assert only(release(objects), "Deployment")["spec"]["replicas"] == values["replicas"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert not _named(objects, "ResourceQuota")


def _metrics(objects: list[Obj], values: dict[str, Any]) -> None:
    """Metrics on without the CRDs being served: the port, its Service, the ServiceMonitor,
    the rule and the dashboard where and as the values say; and the rebalance identity."""
    metrics = values["metrics"]
    port = metrics["port"]
    assert _args(objects)[-2:] == ["--metrics-port", str(port)]
    assert {"name": "metrics", "containerPort": port, "protocol": "TCP"} in container(
        release(objects)
    )["ports"]
    service = _named(objects, "Service")["stszone-metrics"]
    assert service["spec"]["ports"][0]["port"] == port
    monitor = only(objects, "ServiceMonitor")
    assert monitor["metadata"]["labels"].items() >= metrics["serviceMonitor"]["labels"].items()
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["interval"] == metrics["serviceMonitor"]["interval"]
    assert endpoint["scrapeTimeout"] == metrics["serviceMonitor"]["scrapeTimeout"]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    rule = only(objects, "PrometheusRule")
    assert rule["metadata"]["labels"].items() >= metrics["prometheusRule"]["labels"].items()
    metrics_objects(objects, values)
    account = _named(objects, "ServiceAccount")["stszone-rebalance"]
    binding = _named(objects, "ClusterRoleBinding")["stszone-rebalance"]
    assert binding["subjects"][0]["name"] == account["metadata"]["name"]


def _metrics_service_only(objects: list[Obj], values: dict[str, Any]) -> None:
    """The port and its Service, for a Prometheus of your own; no Operator objects and no
    dashboard."""
    assert "--metrics-port" in _args(objects)
    assert "stszone-metrics" in _named(objects, "Service")
    assert not _named(objects, "ServiceMonitor")
    assert not _named(objects, "PrometheusRule")
    assert not _named(objects, "ConfigMap")


def _metrics_off(objects: list[Obj], values: dict[str, Any]) -> None:
    """Off even where the Operator's API is served (these objects are rendered as if it were)."""
    assert "--metrics-port" not in _args(objects)
    assert set(_named(objects, "Service")) == {"stszone"}
    assert not _named(objects, "ServiceMonitor")


def _generated(objects: list[Obj], values: dict[str, Any]) -> None:
    """The chart makes the pair (for the Service, valid the days asked) into the mounted Secret
    and puts its CA into both webhooks; stszone writes nothing."""
    secret = only(objects, "Secret")
    assert secret["metadata"]["name"] == "stszone-tls"
    assert _pod(objects)["volumes"][0]["secret"]["secretName"] == "stszone-tls"
    assert_valid_pair(
        secret, objects, service="stszone", days=values["certificates"]["generated"]["days"]
    )
    assert_mounted(objects)


def _kruise_rules(objects: list[Obj]) -> list[Obj]:
    return [
        rule
        for _, hook in webhooks(objects)
        for rule in hook["rules"]
        if rule["apiGroups"] == ["apps.kruise.io"]
    ]


def _kruise_reads(objects: list[Obj]) -> list[Obj]:
    return [
        rule
        for role in objects
        if role["kind"] == "ClusterRole"
        for rule in role["rules"]
        if rule["apiGroups"] == ["apps.kruise.io"]
    ]


def _kruise_off(objects: list[Obj], values: dict[str, Any]) -> None:
    """Advanced StatefulSets left alone: no rules, no reads, and serve is told so."""
    assert "--no-kruise" in _args(objects)
    assert not _kruise_rules(objects)
    assert not _kruise_reads(objects)
    for _, hook in webhooks(objects):
        assert "apps.kruise.io" not in hook["matchConditions"][0]["expression"]


def _kafka_off(objects: list[Obj], values: dict[str, Any]) -> None:
    """KafkaNodePools left alone: no rules, no reads, no broker pods sent, and serve told so."""
    assert "--no-kafka-node-pools" in _args(objects)
    for _, hook in webhooks(objects):
        assert all(r["apiGroups"] != ["kafka.strimzi.io"] for r in hook["rules"])
        assert (
            "StrimziPodSet"
            not in hook.get("matchConditions", [{"expression": ""}])[0]["expression"]
        )
    assert not [
        rule
        for role in objects
        if role["kind"] == "ClusterRole"
        for rule in role["rules"]
        if rule["apiGroups"] == ["kafka.strimzi.io"]
    ]


def _kruise_start_ordinal(objects: list[Obj], values: dict[str, Any]) -> None:
    """spec.ordinals.start counts; Advanced StatefulSets stay registered and read-only."""
    assert "--kruise-start-ordinal" in _args(objects)
    assert "--no-kruise" not in _args(objects)
    assert len(_kruise_rules(objects)) == 3
    assert all(r["verbs"] == ["get", "list", "watch"] for r in _kruise_reads(objects))


#: Each ci file and what it must change.
CHECKS: dict[str, Callable[[list[Obj], dict[str, Any]], None]] = {
    "generated-values.yaml": _generated,
    "cert-manager-values.yaml": _cert_manager,
    "cert-manager-issuer-values.yaml": _cert_manager_issuer,
    "provided-values.yaml": _provided,
    "placement-values.yaml": _placement,
    "hostnetwork-values.yaml": _host_network,
    "kafka-off-values.yaml": _kafka_off,
    "metrics-values.yaml": _metrics,
    "metrics-service-only-values.yaml": _metrics_service_only,
    "metrics-off-values.yaml": _metrics_off,
    "openshift-values.yaml": openshift,
    "kruise-off-values.yaml": _kruise_off,
    "kruise-start-ordinal-values.yaml": _kruise_start_ordinal,
}


def test_every_ci_file_has_its_checks() -> None:
    """A new ci file comes with what it changes, and a check is not left without its file."""
    assert sorted(CHECKS) == [path.name for path in ci_values()]


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_ci_values_change_what_they_say(helm: Helm, name: str) -> None:
    """Rendered with one ci file, the objects carry its values."""
    path = CHART / "ci" / name
    args = PROMETHEUS if name == "metrics-off-values.yaml" else ()
    CHECKS[name](helm.template("--values", str(path), *args), _values(path))


def test_metrics_follow_the_prometheus_operator_api(helm: Helm) -> None:
    """metrics.enabled auto: on where monitoring.coreos.com/v1 is served, else the base alone."""
    without = helm.template()
    assert "--metrics-port" not in _args(without)
    assert not {"ServiceMonitor", "PrometheusRule"} & {obj["kind"] for obj in without}
    served = helm.template(*PROMETHEUS)
    assert _args(served)[-2:] == ["--metrics-port", "8080"]
    assert {"ServiceMonitor", "PrometheusRule"} <= {obj["kind"] for obj in served}


def test_single_replica_gets_no_budget(helm: Helm) -> None:
    """minAvailable 1 over one replica would block every drain of its node."""
    assert not _named(helm.template("--set", "replicas=1"), "PodDisruptionBudget")
    assert _named(helm.template("--set", "replicas=2"), "PodDisruptionBudget")


#: (value, what the schema says about it): wrong types and values are refused, each with
#: the schema's own words and the value's path.
REFUSED = [
    ({"webhooks": {"failurePolicy": "Maybe"}}, "at '/webhooks/failurePolicy': value must be one of 'Fail', 'Ignore'"),
    ({"webhooks": {"failurePolicy": "fail"}}, "at '/webhooks/failurePolicy': value must be one of"),
    ({"webhooks": {"timeoutSeconds": 0}}, "at '/webhooks/timeoutSeconds': minimum"),
    ({"webhooks": {"timeoutSeconds": 31}}, "at '/webhooks/timeoutSeconds': maximum"),
    ({"webhooks": {"matchConditions": "false"}}, "at '/webhooks/matchConditions': got string, want boolean"),
    ({"webhooks": {"excludeNamespaces": ["Not_A_Namespace"]}}, "at '/webhooks/excludeNamespaces/0'"),
    ({"replicas": 0}, "at '/replicas': minimum: got 0, want 1"),
    ({"replicas": "2"}, "at '/replicas': got string, want integer"),
    ({"replicas": 1.5}, "at '/replicas': got number, want integer"),
    ({"replica": 3}, "additional properties 'replica' not allowed"),
    ({"containerPort": 443}, "at '/containerPort': minimum"),
    ({"containerPort": 70000}, "at '/containerPort': maximum"),
    ({"hostNetwork": "yes"}, "at '/hostNetwork': got string, want boolean"),
    ({"zones": "zone-a,zone-b"}, "at '/zones': got string, want array"),
    ({"zones": ["zone-a,zone-b"]}, "at '/zones/0'"),
    ({"zones": ["zone-a", "zone-a"]}, "at '/zones'"),
    ({"extraArgs": "--log-level debug"}, "at '/extraArgs': got string, want array"),
    ({"image": {"pullPolicy": "Sometimes"}}, "at '/image/pullPolicy': value must be one of"),
    ({"image": {"tag": 1.0}}, "at '/image/tag': got number, want string"),
    ({"image": {"tag": "@sha256:" + "a" * 64}}, "at '/image/tag'"),
    ({"image": {"digest": "a" * 64}}, "at '/image/digest'"),
    ({"image": {"digest": "sha256:abc"}}, "at '/image/digest'"),
    ({"topologyKey": "example.com/zone"}, "additional properties 'topologyKey' not allowed"),
    ({"podSecurityContext": "restricted"}, "at '/podSecurityContext': got string, want object"),
    ({"networkPolicy": {"webhookFrom": {"ipBlock": {}}}}, "at '/networkPolicy/webhookFrom': got object, want array"),
    ({"webhooks": {"labels": {"tier": 1}}}, "got number, want string"),
    ({"metrics": {"prometheusRule": {"disabled": {"StszoneDwn": True}}}}, "value must be one of 'StszoneStatefulSetLostZone'"),
    ({"metrics": {"prometheusRule": {"runbookBaseURL": "docs/metrics.md"}}}, "at '/metrics/prometheusRule/runbookBaseURL'"),
    ({"metrics": {"serviceMonitor": {"honorLabels": "yes"}}}, "at '/metrics/serviceMonitor/honorLabels': got string, want boolean"),
    ({"image": {"registry": "example.com"}}, "additional properties 'registry' not allowed"),
    ({"tolerations": {"key": "a"}}, "at '/tolerations': got object, want array"),
    ({"nodeSelector": {"disk": True}}, "at '/nodeSelector/disk': got boolean, want string"),
    ({"resources": {"limit": {"cpu": "1"}}}, "additional properties 'limit' not allowed"),
    ({"certificates": {"mode": "self-signed"}}, "at '/certificates/mode': value must be one of 'self-managed', 'generated', 'cert-manager', 'provided'"),
    ({"certificates": {"generated": {"days": 0}}}, "at '/certificates/generated/days': minimum"),
    ({"certificates": {"certManager": {"duration": "90d"}}}, "at '/certificates/certManager/duration'"),
    ({"certificates": {"certManager": {"issuerRef": {"kind": "ClusterIssuer"}}}}, "at '/certificates/certManager/issuerRef'"),
    ({"certificates": {"provided": {"ca": "MIIB..."}}}, "at '/certificates/provided/ca'"),
    ({"metrics": {"enabled": "sometimes"}}, "at '/metrics/enabled': value must be one of 'auto', true, false"),
    ({"metrics": {"port": 80}}, "at '/metrics/port': minimum"),
    ({"metrics": {"serviceMonitor": {"interval": "30 seconds"}}}, "at '/metrics/serviceMonitor/interval'"),
    ({"rebalance": {"enabled": 1}}, "at '/rebalance/enabled': got number, want boolean"),
    ({"fullnameOverride": "Stszone"}, "at '/fullnameOverride'"),
]  # fmt: skip


@pytest.mark.parametrize(("values", "message"), REFUSED, ids=[json.dumps(v) for v, _ in REFUSED])
def test_schema_refuses_wrong_values(helm: Helm, values: dict[str, Any], message: str) -> None:
    """helm refuses to render, saying which value is wrong and how."""
    with pytest.raises(HelmError) as refused:
        helm.template(values=values)
    assert "values don't meet the specifications of the schema" in refused.value.stderr
    assert message in refused.value.stderr


#: Values the schema cannot judge alone (they depend on each other): refused by the chart,
#: saying what to do.
CHART_REFUSES = [
    ({"certificates": {"mode": "provided"}}, "--set-file certificates.provided.ca=ca.crt"),
    ({"certificates": {"mode": "provided", "provided": {"secretName": "tls"}}}, "certificates.provided.ca hold the PEM"),
    ({"metrics": {"enabled": True, "port": 8443}}, "metrics.port and containerPort are both 8443"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("values", "message"), CHART_REFUSES, ids=[json.dumps(v) for v, _ in CHART_REFUSES]
)
def test_chart_refuses_values_that_do_not_fit_together(
    helm: Helm, values: dict[str, Any], message: str
) -> None:
    """The refusal names the values and what to give instead."""
    with pytest.raises(HelmError) as refused:
        helm.template(values=values)
    assert message in refused.value.stderr


_UNSET = object()


def _at(values: dict[str, Any], path: str) -> Any:
    """The value at a dotted path, or _UNSET."""
    for key in path.split("."):
        if not isinstance(values, dict) or key not in values:
            return _UNSET
        values = values[key]
    return values


DEFAULTS = leaves(yaml.safe_load((CHART / "values.yaml").read_text()))


def test_every_value_is_set_otherwise_by_some_ci_file() -> None:
    """`helm template` runs with every non-default value: each value of values.yaml is given
    another value by at least one ci file."""
    files = [_values(path) for path in ci_values()]
    unchanged = [
        path
        for path, default in DEFAULTS.items()
        if not any(_at(values, path) not in (_UNSET, default) for values in files)
    ]
    assert not unchanged, f"no charts/stszone/ci/*.yaml sets {', '.join(unchanged)} otherwise"


def _schema_leaves(schema: dict[str, Any], prefix: str = "") -> set[str]:
    properties = schema.get("properties")
    if (
        schema.get("type") == "object"
        and properties
        and schema.get("additionalProperties") is False
    ):
        return {
            leaf
            for key, sub in properties.items()
            for leaf in _schema_leaves(sub, f"{prefix}{key}.")
        }
    return {prefix.rstrip(".")}


def _related(path: str, entry: str) -> bool:
    """The same value, or one inside the other (a map the user fills, an empty map's keys)."""
    return path == entry or path.startswith(f"{entry}.") or entry.startswith(f"{path}.")


def _undescribed(schema: dict[str, Any], where: str = "") -> list[str]:
    missing = []
    for key, sub in schema.get("properties", {}).items():
        if "description" not in sub:
            missing.append(f"{where}{key}")
        missing += _undescribed(sub, f"{where}{key}.")
    return missing


def test_schema_describes_exactly_the_values() -> None:
    """Each value has a schema entry, each entry a description, and the schema knows no value
    that values.yaml lacks."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    entries = _schema_leaves(schema) - {"global"}
    unknown = [path for path in DEFAULTS if not any(_related(path, e) for e in entries)]
    assert not unknown, f"no schema entry for {unknown}"
    absent = [e for e in entries if not any(_related(path, e) for path in DEFAULTS)]
    assert not absent, f"the schema knows values that values.yaml lacks: {absent}"
    assert not _undescribed(schema), f"no description for {_undescribed(schema)}"


def test_chart_installs_this_version() -> None:
    """appVersion (the default image tag) is the package's version, and so is the chart's."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == chart["version"] == __version__


def test_notes_say_how_to_opt_in_and_check(helm: Helm) -> None:
    """NOTES.txt: the opt-in label, `helm test` with the release's name, and a dry run."""
    out = helm.run(
        "install",
        "platform",
        str(CHART),
        "--namespace",
        "webhooks",
        "--dry-run=client",
        "-o",
        "json",
    )
    notes = json.loads(out)["info"]["notes"]
    assert "kubectl label namespace my-db stszone.io/enabled=true" in notes
    assert "helm test platform -n webhooks" in notes
    assert "kubectl -n webhooks rollout status deployment/platform-stszone" in notes
    dry_run = next(line for line in notes.splitlines() if line.strip().startswith("echo '"))
    statefulset = json.loads(dry_run.strip().removeprefix("echo '").split("' ")[0])
    assert statefulset["kind"] == "StatefulSet"
    validate([statefulset])


def test_helm_test_hook_dry_runs_a_statefulset_in_an_opted_in_namespace(helm: Helm) -> None:
    """The test pod runs files/test-mutation.py as its ServiceAccount, which may create
    StatefulSets (dry runs need it) in a namespace of its own that the webhooks are sent."""
    objects = helm.template()
    tests = hooks(objects)
    for obj in tests:
        annotations = obj["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "test", obj["kind"]
        assert "before-hook-creation" in annotations["helm.sh/hook-delete-policy"], obj["kind"]
    namespace = only(tests, "Namespace")
    name = namespace["metadata"]["name"]
    assert namespace["metadata"]["labels"]["stszone.io/enabled"] == "true"
    for _, hook in webhooks(release(objects)):
        assert name not in hook["namespaceSelector"]["matchExpressions"][0]["values"]
    pod = only(tests, "Pod")
    weights = {
        obj["kind"]: int(obj["metadata"]["annotations"]["helm.sh/hook-weight"]) for obj in tests
    }
    assert weights["Pod"] > max(w for kind, w in weights.items() if kind != "Pod")
    check = pod["spec"]["containers"][0]
    script = (CHART / "files" / "test-mutation.py").read_text()
    assert check["command"] == ["python", "-c", script]
    compile(script, "test-mutation.py", "exec")
    env = {item["name"]: item["value"] for item in check["env"]}
    assert env["STSZONE_TEST_NAMESPACE"] == name
    assert check["image"] == container(release(objects))["image"]
    role, binding = only(tests, "Role"), only(tests, "RoleBinding")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == name
    assert role["rules"] == [
        {"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["create"]}
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": pod["spec"]["serviceAccountName"],
            "namespace": "stszone-system",
        }
    ]
    assert check["securityContext"] == container(release(objects))["securityContext"]


@pytest.mark.parametrize(
    "kinds",
    [{}, {"kafkaNodePools": {"enabled": False}}, {"kruise": {"enabled": False}}],
    ids=["both", "kafka-off", "kruise-off"],
)
def test_the_rebalance_role_reads_every_kind_rebalance_lists(
    helm: Helm, kinds: dict[str, Any]
) -> None:
    """``stszone rebalance`` (as the Job in docs/rebalance.md runs it: no flags) lists every
    collection the API server serves, and a 403 on one stops it: its role reads them all, even
    where the webhook is told to leave a kind alone."""
    objects = helm.template(values={"rebalance": {"enabled": True}, **kinds})
    role = _named(objects, "ClusterRole")["stszone-rebalance"]
    settings = settings_from(build_parser().parse_args(["rebalance"]))
    for resource in resources(settings):
        group, plural = resource.path.split("/")[-3], resource.path.rsplit("/", 1)[1]
        group = "" if resource.path.startswith("/api/") else group
        assert any(
            group in rule["apiGroups"] and plural in rule["resources"] and "list" in rule["verbs"]
            for rule in role["rules"]
        ), (group, plural)
