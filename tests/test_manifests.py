"""The installation manifests: valid Kubernetes objects with the safety properties we promise.

Every property is checked on each way the manifests reach a cluster: the Python renderer
(what a pip-installed ``stszone manifests`` prints), ``kubectl kustomize deploy/``, the
cert-manager overlay, and the ``stszone manifests`` command line itself.
"""

from __future__ import annotations

import copy
import io
from pathlib import Path

import pytest
import yaml

from tests.rendered import (
    DEPLOY,
    Obj,
    base_with,
    container,
    covered,
    kustomize,
    only,
    validate,
    webhooks,
)
from webhook.cli import build_parser, settings_from
from webhook.cluster.resources import resources
from webhook.config import DEFAULT_NAMESPACE, SECRET_NAME, Settings
from webhook.install import deploybase, deployfiles, manifests, registration
from webhook.install.certfiles import issue

SOURCES = ["python", "deploy/", "deploy/overlays/cert-manager", "stszone manifests"]
#: The sources whose webhook makes its own certificates (--manage-certs); the others mount a
#: provided Secret (cert-manager's, or the one `stszone manifests --ca` prints).
MANAGED = {"python", "deploy/"}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and a serving pair for stszone.stszone-system, as `stszone certs` writes them."""
    out = tmp_path_factory.mktemp("certs")
    issue(out, service="stszone", namespace=DEFAULT_NAMESPACE)
    return out


@pytest.fixture(params=SOURCES)
def source(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def objects(source: str, pair: Path) -> list[Obj]:
    """The rendered installation, from each source in turn."""
    if source == "python":
        return deployfiles.base_objects(deploybase.Install())
    if source == "stszone manifests":
        out = io.StringIO()
        assert manifests.run_manifests(ca=pair / "ca.crt", out=out) == 0
        return [doc for doc in yaml.safe_load_all(out.getvalue()) if doc]
    return kustomize(DEPLOY.parent / source)


def test_every_object_validates_against_the_kubernetes_schemas(objects: list[Obj]) -> None:
    """Strict offline validation: a misspelt field or a wrong type fails here, not at apply."""
    validate(objects)


def test_each_webhook_keeps_the_blast_radius_small(objects: list[Obj]) -> None:
    """Opt-in namespaces only, never kube-system or our own, skip label honoured, short timeout."""
    found = webhooks(objects)
    assert {kind for kind, _ in found} == {
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    }
    for kind, webhook in found:
        selector = webhook["namespaceSelector"]
        assert selector["matchLabels"] == {"stszone.io/enabled": "true"}, kind
        assert selector["matchExpressions"] == [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": sorted({"kube-system", DEFAULT_NAMESPACE}),
            }
        ], kind
        assert webhook["objectSelector"] == {
            "matchExpressions": [
                {"key": "stszone.io/skip", "operator": "NotIn", "values": ["true"]}
            ]
        }, kind
        # Events are written for real requests only; dry runs are still sent (None and
        # NoneOnDryRun are the two values the API server sends dry runs to).
        assert webhook["sideEffects"] == "NoneOnDryRun", kind
        assert webhook["admissionReviewVersions"] == ["v1"], kind
        assert webhook["timeoutSeconds"] == 5, kind
        assert webhook["failurePolicy"] == "Fail", kind
        assert webhook["matchPolicy"] == "Equivalent", kind
        # Of the pods, only StatefulSet pods are sent (tests/e2e/test_blast_radius.py shows the
        # API server applying it); claims and StatefulSets pass the condition.
        assert [c["name"] for c in webhook["matchConditions"]] == ["statefulset-pods-only"]
        assert "StatefulSet" in webhook["matchConditions"][0]["expression"], kind
        assert ("reinvocationPolicy" in webhook) == (kind == "MutatingWebhookConfiguration")
        if kind == "MutatingWebhookConfiguration":
            assert webhook["reinvocationPolicy"] == "IfNeeded"


def test_webhooks_see_exactly_the_requests_the_engine_answers(objects: list[Obj]) -> None:
    """Mutate pods/claims/sets on CREATE; validate sets, the scale subresource and pods."""
    by_kind = {kind: covered(webhook) for kind, webhook in webhooks(objects)}
    assert by_kind["MutatingWebhookConfiguration"] == {
        ("", "pods", "CREATE"),
        ("", "persistentvolumeclaims", "CREATE"),
        ("apps", "statefulsets", "CREATE"),
        ("kafka.strimzi.io", "kafkanodepools", "CREATE"),
        ("kafka.strimzi.io", "kafkanodepools", "UPDATE"),
        ("apps.kruise.io", "statefulsets", "CREATE"),
    }
    assert by_kind["ValidatingWebhookConfiguration"] == {
        ("apps", "statefulsets", "CREATE"),
        ("apps", "statefulsets", "UPDATE"),
        ("apps", "statefulsets/scale", "UPDATE"),
        ("", "pods", "CREATE"),
        ("kafka.strimzi.io", "kafkanodepools", "CREATE"),
        ("kafka.strimzi.io", "kafkanodepools", "UPDATE"),
        ("kafka.strimzi.io", "kafkanodepools/scale", "UPDATE"),
        ("apps.kruise.io", "statefulsets", "CREATE"),
        ("apps.kruise.io", "statefulsets", "UPDATE"),
        ("apps.kruise.io", "statefulsets/scale", "UPDATE"),
    }
    # Strimzi serves KafkaNodePools as v1 and v1beta2, OpenKruise its StatefulSet as v1beta1
    # and v1alpha1: both versions of each are registered.
    versions = {"kafka.strimzi.io": ["v1", "v1beta2"], "apps.kruise.io": ["v1beta1", "v1alpha1"]}
    for _, webhook in webhooks(objects):
        for rule in webhook["rules"]:
            assert rule["apiVersions"] == versions.get(rule["apiGroups"][0], ["v1"])
        assert all(rule["scope"] == "Namespaced" for rule in webhook["rules"])


def test_kubectl_scale_cannot_bypass_the_guard(objects: list[Obj]) -> None:
    """`kubectl scale` and the HPA write statefulsets/scale, which a statefulsets rule misses."""
    validating = only(objects, "ValidatingWebhookConfiguration")["webhooks"]
    assert any(("apps", "statefulsets/scale", "UPDATE") in covered(hook) for hook in validating)
    scale = ("kafka.strimzi.io", "kafkanodepools/scale", "UPDATE")
    assert any(scale in covered(hook) for hook in validating)


def test_webhooks_call_the_service_that_selects_the_pods(objects: list[Obj]) -> None:
    """clientConfig -> Service stszone:443 -> targetPort https -> container port 8443."""
    for _, webhook in webhooks(objects):
        service_ref = webhook["clientConfig"]["service"]
        assert service_ref["name"] == "stszone"
        assert service_ref["namespace"] == DEFAULT_NAMESPACE
        assert service_ref["port"] == 443
        assert service_ref["path"] in ("/mutate", "/validate")
    service = only(objects, "Service")
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}
    ]
    pod_labels = only(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert container(objects)["ports"] == [
        {"name": "https", "containerPort": 8443, "protocol": "TCP"}
    ]


def _named(objects: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def test_rbac_reads_exactly_what_the_live_view_watches_and_writes_only_events(
    objects: list[Obj],
) -> None:
    """get/list/watch on the collections webhook.cluster.resources lists, create and patch
    on events.k8s.io Events and nothing else, bound to our account."""
    role = _named(objects, "ClusterRole", "stszone")
    writes = [rule for rule in role["rules"] if rule["verbs"] != ["get", "list", "watch"]]
    assert writes == [
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}
    ]
    granted = {
        (g, r)
        for rule in role["rules"]
        if rule not in writes
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    watched = set()
    for resource in resources(Settings()):
        prefix, _, name = resource.path.rpartition("/")
        watched.add(("" if prefix == "/api/v1" else prefix.split("/")[2], name))
    assert granted == watched
    binding = _named(objects, "ClusterRoleBinding", "stszone")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    account = only(objects, "ServiceAccount")["metadata"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    ]
    pod = only(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["name"]


def test_writes_are_the_certificates_own_and_only_when_it_makes_them(
    objects: list[Obj], source: str
) -> None:
    """--manage-certs: a Role on its one Secret and one Lease (create, which RBAC cannot narrow
    to a name, only in its own namespace) and a ClusterRole to get/patch its two webhook
    configurations by name, bound to its account. Provided certificates: no write at all."""
    writes = {
        (o["kind"], o["metadata"]["name"])
        for o in objects
        if o["kind"] in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
        and o["metadata"]["name"] != "stszone"
    }
    if source not in MANAGED:
        assert writes == set()
        return
    assert writes == {
        ("Role", "stszone-certs"),
        ("RoleBinding", "stszone-certs"),
        ("ClusterRole", "stszone-certs"),
        ("ClusterRoleBinding", "stszone-certs"),
    }
    role = _named(objects, "Role", "stszone-certs")
    assert role["metadata"]["namespace"] == DEFAULT_NAMESPACE
    rules = {
        (rule["apiGroups"][0], resource, verb, tuple(rule.get("resourceNames", ())))
        for rule in role["rules"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert rules == {
        *(("", "secrets", verb, ("stszone-tls",)) for verb in ("get", "list", "watch", "update")),
        *(
            ("coordination.k8s.io", "leases", verb, ("stszone-certs",))
            for verb in ("get", "update")
        ),
        ("", "secrets", "create", ()),
        ("coordination.k8s.io", "leases", "create", ()),
    }
    (configs,) = _named(objects, "ClusterRole", "stszone-certs")["rules"]
    assert configs == {
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
        "resourceNames": ["stszone"],
        "verbs": ["get", "patch"],
    }
    names = {o["metadata"]["name"] for o in objects if o["kind"].endswith("WebhookConfiguration")}
    assert names == {"stszone"}
    account = [{"kind": "ServiceAccount", "name": "stszone", "namespace": DEFAULT_NAMESPACE}]
    for kind, role_kind in (("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")):
        binding = _named(objects, kind, "stszone-certs")
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": "stszone-certs",
        }
        assert binding["subjects"] == account


def test_two_replicas_spread_over_nodes_and_zones_with_a_budget(objects: list[Obj]) -> None:
    """A drain, a node loss or a rolling update never takes every replica at once."""
    spec = only(objects, "Deployment")["spec"]
    assert spec["replicas"] >= 2
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    labels = spec["template"]["metadata"]["labels"]
    spread = {c["topologyKey"]: c for c in spec["template"]["spec"]["topologySpreadConstraints"]}
    assert spread["kubernetes.io/hostname"]["whenUnsatisfiable"] == "DoNotSchedule"
    assert spread["topology.kubernetes.io/zone"]["whenUnsatisfiable"] == "ScheduleAnyway"
    for constraint in spread.values():
        assert constraint["maxSkew"] == 1
        assert constraint["labelSelector"]["matchLabels"].items() <= labels.items()
    budget = only(objects, "PodDisruptionBudget")["spec"]
    assert budget["minAvailable"] == 1
    assert budget["selector"]["matchLabels"].items() <= labels.items()
    assert spec["selector"]["matchLabels"].items() <= labels.items()


def test_pod_runs_locked_down(objects: list[Obj]) -> None:
    """Non-root numeric user, read-only root, no escalation, no capabilities, RuntimeDefault."""
    pod = only(objects, "Deployment")["spec"]["template"]["spec"]
    context = container(objects)["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert isinstance(pod["securityContext"]["runAsUser"], int)
    assert pod["securityContext"]["runAsUser"] > 0
    assert context["runAsNonRoot"] is True
    assert context["runAsUser"] == pod["securityContext"]["runAsUser"] == deploybase.RUN_AS
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert "privileged" not in context
    namespace = only(objects, "Namespace")["metadata"]["labels"]
    assert namespace["pod-security.kubernetes.io/enforce"] == "restricted"


def test_probes_and_resources(objects: list[Obj]) -> None:
    """Readiness on /readyz and liveness on /healthz over HTTPS; requests and limits set."""
    webhook = container(objects)
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        assert webhook[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    assert webhook["startupProbe"]["httpGet"]["path"] == "/healthz"
    for bound in ("requests", "limits"):
        assert set(webhook["resources"][bound]) == {"cpu", "memory"}


def test_serve_flags_match_the_certificates(objects: list[Obj], source: str) -> None:
    """The args parse as `stszone serve` flags: --manage-certs with no TLS volume (the pair is
    watched through the API), or --cert/--key in the read-only mount of the Secret."""
    webhook = container(objects)
    settings = settings_from(build_parser().parse_args(["serve", *webhook["args"]]), environ={})
    assert webhook["env"] == [
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    assert settings.port == 8443
    assert settings.log_format == "json"
    mounts = {mount["name"]: mount for mount in webhook["volumeMounts"]}
    volumes = {
        v["name"]: v for v in only(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
    }
    if source in MANAGED:
        assert settings.manage_certs is True and settings.cert is None
        assert settings.certs_secret == SECRET_NAME
        assert "tls" not in mounts and "tls" not in volumes
        return
    assert settings.manage_certs is False
    assert mounts["tls"]["readOnly"] is True
    assert settings.cert == Path(mounts["tls"]["mountPath"]) / "tls.crt"
    assert settings.key == Path(mounts["tls"]["mountPath"]) / "tls.key"
    assert volumes["tls"]["secret"]["secretName"] == SECRET_NAME


def test_termination_grace_covers_the_graceful_shutdown(objects: list[Obj]) -> None:
    """preStop sleep + readiness-off delay + drain must end before the kubelet's SIGKILL."""
    pod = only(objects, "Deployment")["spec"]["template"]["spec"]
    settings = Settings()
    pre_stop = int(container(objects)["lifecycle"]["preStop"]["exec"]["command"][-1])
    needed = pre_stop + settings.shutdown_delay + settings.shutdown_grace
    assert pod["terminationGracePeriodSeconds"] > needed


def test_deploy_base_is_the_generator_output() -> None:
    """deploy/base holds exactly what `stszone manifests --kustomize-dir` writes: one source."""
    expected = deployfiles.kustomize_files(deploybase.Install())
    actual = {path.name: path.read_text() for path in (DEPLOY / "base").iterdir()}
    assert actual == expected, (
        "deploy/base differs from webhook/install/deploybase.py; regenerate it with "
        "`stszone manifests --kustomize-dir deploy/base`"
    )


def test_kustomize_renders_every_generated_object() -> None:
    """`kubectl kustomize deploy/` yields the renderer's objects, no more, no fewer."""
    rendered = kustomize(DEPLOY)
    expected = deployfiles.base_objects(deploybase.Install())

    def key(obj: Obj) -> tuple[str, str]:
        return obj["kind"], obj["metadata"]["name"]

    assert sorted(rendered, key=key) == sorted(expected, key=key)


def test_changing_the_namespace_changes_every_reference() -> None:
    """Metadata, binding subject, clientConfig Service and the selector exclusion all move."""
    objects = deployfiles.base_objects(deploybase.Install(namespace="webhooks-prod"))
    assert DEFAULT_NAMESPACE not in deployfiles.dump(objects)
    validate(objects)
    assert only(objects, "Namespace")["metadata"]["name"] == "webhooks-prod"
    for obj in objects:
        if obj["kind"] in ("ServiceAccount", "Service", "Deployment", "PodDisruptionBudget"):
            assert obj["metadata"]["namespace"] == "webhooks-prod", obj["kind"]
    for obj in objects:
        if obj["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            assert obj["subjects"][0]["namespace"] == "webhooks-prod", obj["metadata"]["name"]
        if obj["kind"] in ("Role", "RoleBinding"):
            assert obj["metadata"]["namespace"] == "webhooks-prod", obj["metadata"]["name"]
    for _, webhook in webhooks(objects):
        assert webhook["clientConfig"]["service"]["namespace"] == "webhooks-prod"
        excluded = webhook["namespaceSelector"]["matchExpressions"][0]["values"]
        assert excluded == ["kube-system", "webhooks-prod"]


def _without_match_conditions(objects: list[Obj]) -> list[Obj]:
    stripped = copy.deepcopy(objects)
    for _, webhook in webhooks(stripped):
        del webhook["matchConditions"]
    return stripped


def _by_key(objects: list[Obj]) -> dict[tuple[str, str], Obj]:
    return {(obj["kind"], obj["metadata"]["name"]): obj for obj in objects}


def test_older_clusters_get_the_same_install_without_match_conditions(
    tmp_path: Path, pair: Path
) -> None:
    """The flag, the Install field and the kustomize component drop matchConditions, nothing else."""
    default = deployfiles.base_objects(deploybase.Install())
    expected = _without_match_conditions(default)
    python = deployfiles.base_objects(deploybase.Install(match_conditions=False))
    component = base_with(tmp_path, "no-match-conditions")
    out = io.StringIO()
    assert manifests.run_manifests(ca=None, match_conditions=False, out=out) == 0
    printed = [doc for doc in yaml.safe_load_all(out.getvalue()) if doc]
    for way, objects in (("python", python), ("component", component), ("flag", printed)):
        assert _by_key(objects) == _by_key(expected), way
        validate(objects)
    out = io.StringIO()
    status = manifests.run_manifests(
        ca=pair / "ca.crt", secret=False, match_conditions=False, out=out
    )
    assert status == 0
    provided = [doc for doc in yaml.safe_load_all(out.getvalue()) if doc]
    for _, webhook in webhooks(provided):
        del webhook["clientConfig"]["caBundle"]
    without = _without_match_conditions(
        deployfiles.base_objects(deploybase.Install(certs="provided"))
    )
    assert _by_key(provided) == _by_key(without)


def test_url_registrations_as_the_end_to_end_tests_make_them_validate() -> None:
    """The e2e tests register by URL, narrowed to one namespace; those objects are valid too."""
    client = {"url": "https://192.0.2.7:8443/mutate", "caBundle": "Zm9v"}
    namespaces = registration.namespace_selector(DEFAULT_NAMESPACE, only="stszone-e2e-abc")
    objects = [
        build(
            "stszone-e2e-abc",
            client=client,
            namespaces=namespaces,
            labels={"stszone.io/e2e": "abc"},
        )
        for build in (registration.mutating, registration.validating)
    ]
    validate(objects)
    for _, webhook in webhooks(objects):
        assert webhook["namespaceSelector"]["matchLabels"] == {
            "stszone.io/enabled": "true",
            "kubernetes.io/metadata.name": "stszone-e2e-abc",
        }
