"""stszone against a real API server: mutation, placement by ordinal, the scale-down guard.

Skipped unless ``STSZONE_E2E_KUBECONFIG`` names a cluster; see ``conftest.py`` for the knobs
and for what is created and always deleted.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.e2e.kube import (
    RUN_LABEL,
    ZONE_KEY,
    Cluster,
    KubectlError,
    Obj,
    owned_pod,
    wait_for,
    workload,
)
from tests.test_metrics import parse

#: Creates a StatefulSet by name and returns it once all its pods exist.
Make = Callable[[str], Obj]


def replicas_for(cluster: Cluster) -> int:
    """Two rounds of the zone list, at least 6: every zone holds two ordinals."""
    return max(6, 2 * len(cluster.zones))


@pytest.fixture(scope="module")
def make_statefulset(cluster: Cluster) -> Make:
    """Create a StatefulSet (no zones annotation) and wait until all its pods exist."""

    def make(name: str) -> Obj:
        replicas = replicas_for(cluster)
        cluster.kubectl.create(
            workload(
                "StatefulSet",
                name,
                image=cluster.image,
                replicas=replicas,
                labels={RUN_LABEL: cluster.run},
            )
        )

        def all_pods() -> bool:
            pods = cluster.kubectl.get("pods", "-l", f"app={name}")["items"]
            return len(pods) == replicas

        try:
            wait_for(f"{replicas} pods of {name}", all_pods, timeout=cluster.timeout)
        except AssertionError as err:
            # The controller reports refused pod creates (a webhook denial, say) as events.
            events = cluster.kubectl.run(
                "get", "events", "--field-selector", f"involvedObject.name={name}"
            )
            raise AssertionError(f"{err}\nevents of statefulset {name}:\n{events}") from None
        return cluster.kubectl.get("statefulset", name)

    return make


@pytest.fixture(scope="module")
def place(make_statefulset: Make) -> Obj:
    """A StatefulSet used only to look at placement (never scaled)."""
    return make_statefulset("place")


def assert_pinned(pod: Obj, zone: str) -> None:
    """Every required nodeSelectorTerm demands ``zone``, and the pod records it."""
    name = pod["metadata"]["name"]
    assert pod["metadata"].get("annotations", {}).get("stszone.io/zone") == zone, name
    required = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    terms = required["nodeSelectorTerms"]
    assert terms, name
    wanted = {"key": ZONE_KEY, "operator": "In", "values": [zone]}
    for term in terms:
        assert wanted in term.get("matchExpressions", []), f"{name}: {term}"


def _pod(cluster: Cluster, owner: Obj, ordinal: int, labels: dict[str, str]) -> Obj:
    app = {"app": f"{owner['metadata']['name']}-dry-run"}
    return owned_pod(owner, ordinal, image=cluster.image, labels={**app, **labels})


def test_server_side_dry_run_shows_the_injected_affinity(cluster: Cluster, place: Obj) -> None:
    """`kubectl create --dry-run=server` of a StatefulSet pod returns it pinned to its zone."""
    ordinal = replicas_for(cluster) + 4  # beyond the set: no clash with a real pod's name
    created = cluster.kubectl.create(_pod(cluster, place, ordinal, {}), dry_run=True)
    assert_pinned(created, cluster.zones[ordinal % len(cluster.zones)])


def test_skip_label_leaves_a_pod_alone(cluster: Cluster, place: Obj) -> None:
    """A pod labelled stszone.io/skip=true is not sent to the webhook at all."""
    ordinal = replicas_for(cluster) + 5
    created = cluster.kubectl.create(
        _pod(cluster, place, ordinal, {"stszone.io/skip": "true"}), dry_run=True
    )
    assert "stszone.io/zone" not in created["metadata"].get("annotations", {})
    assert "affinity" not in created["spec"]


def test_statefulset_records_its_zones_and_ordinal_i_gets_zone_i_mod_k(
    cluster: Cluster, place: Obj
) -> None:
    """The set gets the zone list written down; pod i is pinned to zones[i mod k]."""
    assert place["metadata"]["annotations"]["stszone.io/zones"] == ",".join(cluster.zones)
    for ordinal in range(replicas_for(cluster)):
        pod = cluster.kubectl.get("pod", f"place-{ordinal}")
        assert_pinned(pod, cluster.zones[ordinal % len(cluster.zones)])


def test_scheduler_places_each_ordinal_in_its_zone(cluster: Cluster, place: Obj) -> None:
    """Where a scheduler runs and every zone has nodes, spec.nodeName lands in the right zone."""
    if not cluster.schedulable:
        pytest.fail(
            f"zones {', '.join(cluster.zones)} do not all have schedulable nodes: this test needs "
            f"a Ready, untainted node labelled {ZONE_KEY} in each zone; label the cluster's "
            "nodes, or set STSZONE_E2E_ZONES to zones that have such nodes",
            pytrace=False,
        )
    replicas = replicas_for(cluster)

    def placed() -> list[Obj] | None:
        pods = cluster.kubectl.get("pods", "-l", "app=place")["items"]
        return (
            pods if len(pods) == replicas and all(p["spec"].get("nodeName") for p in pods) else None
        )

    pods = wait_for(
        "every pod of place to be scheduled", placed, timeout=cluster.timeout, interval=2
    )
    node_zone = {
        node["metadata"]["name"]: node["metadata"].get("labels", {}).get(ZONE_KEY)
        for node in cluster.kubectl.get("nodes")["items"]
    }
    for pod in pods:
        ordinal = int(pod["metadata"]["name"].rsplit("-", 1)[1])
        expected = cluster.zones[ordinal % len(cluster.zones)]
        assert node_zone[pod["spec"]["nodeName"]] == expected, pod["metadata"]["name"]


def test_zone_risk_gauges_report_the_set(cluster: Cluster, place: Obj) -> None:
    """/metrics carries the set's zone risk from the live view: its replicas, every listed zone
    held, nothing misplaced, and k as the lowest safe count (ordinals 0..k-1 cover the zones)."""
    wait_for_gauges(cluster, "place", replicas=replicas_for(cluster))


def test_zone_risk_gauges_follow_a_change_of_the_set(
    cluster: Cluster, make_statefulset: Make
) -> None:
    """A refresh audits again only what changed since: a set scaled up after its first figures
    is reported with its new replica count, the rest unchanged."""
    make_statefulset("risk")
    replicas = replicas_for(cluster)
    wait_for_gauges(cluster, "risk", replicas=replicas)
    cluster.kubectl.run("scale", "statefulset", "risk", f"--replicas={replicas + 1}")
    wait_for_gauges(cluster, "risk", replicas=replicas + 1)


def wait_for_gauges(cluster: Cluster, name: str, *, replicas: int) -> None:
    """Wait until /metrics reports set ``name`` with ``replicas``, every zone held, nothing
    misplaced or unknown, and k (the number of zones) as its lowest safe count."""
    labels = {"namespace": cluster.namespace, "statefulset": name, "kind": "StatefulSet"}
    k = len(cluster.zones)
    wanted = {
        "stszone_statefulset_replicas": replicas,
        "stszone_statefulset_zones": k,
        "stszone_statefulset_zones_held": k,
        "stszone_statefulset_misplaced_pods": 0,
        "stszone_statefulset_unknown_zone_ordinals": 0,
        "stszone_statefulset_lowest_safe_replicas": k,
    }

    found: dict[str, float] = {}

    def reported() -> bool:
        status, text = cluster.webhook.fetch("/metrics")
        assert status == 200, text
        samples = parse(text)
        key = frozenset(labels.items())
        found.clear()
        found.update({g: samples[(g, key)] for g in wanted if (g, key) in samples})
        return found == wanted

    try:
        wait_for(f"the zone-risk gauges of {name}", reported, timeout=cluster.timeout, interval=1)
    except AssertionError as err:
        raise AssertionError(f"{err}; last scrape: {found}, wanted {wanted}") from None


def _replicas(cluster: Cluster, name: str) -> int:
    replicas: int = cluster.kubectl.get("statefulset", name)["spec"]["replicas"]
    return replicas


def test_scale_down_that_drops_a_zone_is_refused_until_allowed(
    cluster: Cluster, make_statefulset: Make
) -> None:
    """Down to k keeps every zone; below k is refused by scale and patch alike; the override lets it pass."""
    make_statefulset("guard")
    k = len(cluster.zones)
    lost = cluster.zones[k - 1]
    cluster.kubectl.run("scale", "statefulset", "guard", f"--replicas={k}")
    assert _replicas(cluster, "guard") == k
    attempts = {
        "kubectl scale (statefulsets/scale)": ("scale", "statefulset", "guard", f"--replicas={k - 1}"),
        "kubectl patch (statefulsets)": (
            "patch", "statefulset", "guard", "--type=merge", "-p", f'{{"spec":{{"replicas":{k - 1}}}}}'
        ),
    }  # fmt: skip
    for path, args in attempts.items():
        with pytest.raises(KubectlError) as refused:
            cluster.kubectl.run(*args)
        assert lost in refused.value.stderr, path
        assert "stszone.io/allow-zone-loss" in refused.value.stderr, path
        assert _replicas(cluster, "guard") == k, path
    cluster.kubectl.run("annotate", "statefulset", "guard", "stszone.io/allow-zone-loss=true")
    to_one = ("scale", "statefulset", "guard", "--replicas=1")
    # A Scale carries no annotations: the webhook reads the override from its view's set,
    # which follows the watch; a server-side dry run shows when it has it (a refusal is
    # retried by wait_for).
    wait_for(
        "the guard to read stszone.io/allow-zone-loss",
        lambda: cluster.kubectl.run(*to_one, "--dry-run=server"),
        timeout=30,
    )
    cluster.kubectl.run(*to_one)
    assert _replicas(cluster, "guard") == 1
