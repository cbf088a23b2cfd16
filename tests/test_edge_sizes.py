"""The offline commands on workloads at the edges of their size, from saved cluster files.

Each kind stszone places -- an ``apps/v1`` StatefulSet, an OpenKruise Advanced StatefulSet
(with ``reserveOrdinals`` or without) and a Strimzi KafkaNodePool (``status.nodeIds`` empty) --
at 0 replicas and at the sizes where a command stops walking its members, through
``stszone audit`` (table and JSON), ``stszone explain`` of the workload and of a pod,
``stszone rebalance`` (the plan) and the zone-risk gauges. The objects are the recorded ones
(:mod:`tests.rebalancing`, ``tests/fixtures/kruise``, :mod:`tests.poolsim`); expected texts are
worked out by hand from them.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests import poolsim as sim
from tests import rebalancing as r
from tests.test_metrics import parse
from tests.work import line_budget
from webhook.cli import main
from webhook.cluster.clusterfile import load_store
from webhook.model.nodepools import nodepool_info
from webhook.rules.risk import RiskScan
from webhook.server.metrics import Metrics
from webhook.server.poolrisk import PoolRiskCollector
from webhook.server.riskmetrics import ZoneRisk

JSON = dict[str, Any]
KRUISE = Path(__file__).parent / "fixtures" / "kruise" / "objects"
ZONES = ",".join(r.ZONES)


def _recorded(name: str) -> JSON:
    item: JSON = json.loads((KRUISE / name).read_text())["items"][0]
    return copy.deepcopy(item)


def kruise_set(replicas: int, reserve: Sequence[int | str] = ()) -> JSON:
    """The recorded Advanced StatefulSet ``shop/web``, listing zone-a,b,c."""
    obj = _recorded("statefulsets.v1beta1.json")
    obj["metadata"]["annotations"] = {"stszone.io/zones": ZONES}
    obj["spec"]["replicas"] = replicas
    obj["spec"]["reserveOrdinals"] = list(reserve)
    obj["status"].update(replicas=replicas, readyReplicas=replicas, availableReplicas=replicas)
    return obj


def kruise_pod(ordinal: int, node: str) -> JSON:
    """Pod ``web-<ordinal>`` as kruise-manager makes it (the recorded ``web-0`` renamed)."""
    pod = _recorded("pods.json")
    name = f"web-{ordinal}"
    pod["metadata"].update(name=name, uid=f"uid-{name}")
    pod["metadata"]["labels"].update(
        {"statefulset.kubernetes.io/pod-name": name, "apps.kubernetes.io/pod-index": str(ordinal)}
    )
    pod["spec"].update(hostname=name, nodeName=node)
    pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = f"data-{name}"
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return pod


def saved(tmp_path: Path, *workload: JSON) -> str:
    """A saved cluster: the opted-in namespace ``shop``, nodes a1..c2, and ``workload``."""
    items = [r.namespace(), *(r.node(n) for n in r.NODES), *workload]
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """Exit status and standard output of ``stszone ARGV``."""
    status = main(list(argv))
    return status, capsys.readouterr().out


# --- stszone audit ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reserve", "left_over"),
    [((), False), ((0, 1), False), ((), True)],
    ids=["plain", "reserveOrdinals", "a pod left over"],
)
def test_audit_tells_of_an_advanced_statefulset_at_zero_replicas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reserve: tuple[int, ...], left_over: bool
) -> None:
    """The set has no member: its line says replicas 0 and names no ordinal, and nothing is a
    problem (a pod left over from before the scale-down holds nothing)."""
    pods = [kruise_pod(0, "a1")] if left_over else []
    cluster = saved(tmp_path, kruise_set(0, reserve), *pods)
    status, out = run(capsys, "audit", "--cluster", cluster)
    assert status == 0
    head = f"{KRUISE_HEAD} 0 (no members)"
    assert f"{head}\n  zones held now: (none)" in out
    assert "zones held now: (none); lowest replica count that keeps every zone: 0" in out
    assert out.rstrip().endswith("Every audited pod is where stszone expects it.")
    status, out = run(capsys, "audit", "--cluster", cluster, "-o", "json")
    (web,) = json.loads(out)["statefulsets"]
    assert (web["apiGroup"], web["replicas"], web["ordinals"]) == ("apps.kruise.io", 0, [])


# --- stszone explain -------------------------------------------------------------------------


KRUISE_HEAD = "Advanced StatefulSet shop/web: mode affinity, zones zone-a,zone-b,zone-c, replicas"


@pytest.mark.parametrize("reserve", [(), (0, 1)], ids=["plain", "reserveOrdinals"])
def test_explain_tells_of_an_advanced_statefulset_at_zero_replicas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reserve: tuple[int, ...]
) -> None:
    """The set and its left-over pod ``web-0`` are explained: no member, no smaller size, and
    the pod is no member, so the guard does not count it."""
    cluster = saved(tmp_path, kruise_set(0, reserve), kruise_pod(0, "a1"))
    status, out = run(capsys, "explain", "--cluster", cluster, "asts/web")
    assert status == 0
    assert out.splitlines() == [f"{KRUISE_HEAD} 0 (no members)"]
    assert "scale-down" not in out
    status, out = run(capsys, "explain", "--cluster", cluster, "pod/web-0")
    assert status == 0
    assert out.splitlines()[0] == f"Pod shop/web-0: ordinal 0 of {KRUISE_HEAD} 0 (no members)"
    assert "not a member now (no members): the guard does not count it" in out


def malformed(obj: JSON) -> JSON:
    """``obj`` with a ``stszone.io/mode`` no mode has."""
    obj["metadata"]["annotations"]["stszone.io/mode"] = "nope"
    return obj


#: replicas 3 with ordinal 1 reserved: the live ordinals are 0, 2 and 3.
MALFORMED_HEAD = "Advanced StatefulSet shop/web: mode ?, zones (none), replicas 3"


def test_audit_names_the_live_ordinals_of_a_malformed_advanced_statefulset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Malformed annotations leave no row to read the members from; its live ordinals are
    those of its replicas and reserveOrdinals all the same."""
    cluster = saved(tmp_path, malformed(kruise_set(3, [1])), kruise_pod(0, "a1"))
    status, out = run(capsys, "audit", "--cluster", cluster)
    assert status == 1
    assert f"{MALFORMED_HEAD} (live ordinals 0, 2 and 3)\n  PROBLEM: " in out


def test_explain_names_the_live_ordinals_of_a_malformed_advanced_statefulset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The set and its pod are explained with the set's live ordinals (0, 2 and 3), not the
    ordinals an ``apps/v1`` set of 3 replicas would have."""
    cluster = saved(tmp_path, malformed(kruise_set(3, [1])), kruise_pod(0, "a1"))
    head = f"{MALFORMED_HEAD} (live ordinals 0, 2 and 3)"
    status, out = run(capsys, "explain", "--cluster", cluster, "asts/web")
    assert (status, out.splitlines()[0]) == (0, head)
    status, out = run(capsys, "explain", "--cluster", cluster, "pod/web-0")
    assert (status, out.splitlines()[1]) == (0, f"  {head}")


@pytest.mark.parametrize(
    "workload",
    [r.statefulset(1_500), kruise_set(1_500, [1])],
    ids=["StatefulSet", "Advanced StatefulSet"],
)
def test_audit_says_when_it_shows_the_first_members_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], workload: JSON
) -> None:
    """Past the first 1,000 members (``WALK_LIMIT``) the table stops, and says so, as
    ``stszone explain`` does; below it, nothing is said."""
    status, out = run(capsys, "audit", "--cluster", saved(tmp_path, copy.deepcopy(workload)))
    assert status == 0
    assert "  (the first 1000 of 1500 members)\n" in out
    small = copy.deepcopy(workload)
    small["spec"]["replicas"] = 1_000
    status, out = run(capsys, "audit", "--cluster", saved(tmp_path, small))
    assert status == 0
    assert "(the first" not in out


# --- one member, none: headings and tables -------------------------------------------------


APPS_HEAD = "StatefulSet shop/db: mode affinity, zones zone-a,zone-b,zone-c, replicas"


def _apps(replicas: int) -> JSON:
    return r.statefulset(replicas)


def _kruise(replicas: int) -> JSON:
    return kruise_set(replicas, [0])


@pytest.mark.parametrize(
    ("make", "replicas", "target", "head", "outsider"),
    [
        (_apps, 0, "sts/db", f"{APPS_HEAD} 0 (no members)", "pod/db-4"),
        (_apps, 1, "sts/db", f"{APPS_HEAD} 1 (ordinal 0)", "pod/db-4"),
        (_kruise, 0, "asts/web", f"{KRUISE_HEAD} 0 (no members)", "pod/web-4"),
        (_kruise, 1, "asts/web", f"{KRUISE_HEAD} 1 (live ordinal 1)", "pod/web-4"),
    ],
    ids=["StatefulSet at 0", "StatefulSet at 1", "Advanced at 0", "Advanced at 1"],
)
def test_a_workload_of_one_member_or_none_reads_naturally(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: Callable[[int], JSON],
    replicas: int,
    target: str,
    head: str,
    outsider: str,
) -> None:
    """explain and audit head the workload with its one member ("ordinal 0", never "ordinals
    0-0"; the Advanced StatefulSet reserves 0, so its one member is 1) or "no members", and
    print no table header over no rows; a pod outside the members is told the same span."""
    cluster = saved(tmp_path, make(replicas))
    for command in (["explain", "--cluster", cluster, target], ["audit", "--cluster", cluster]):
        status, out = run(capsys, *command)
        assert status == 0, out
        assert f"{head}\n" in out, out
        assert ("ORDINAL" in out) == (replicas == 1), out
    status, out = run(capsys, "explain", "--cluster", cluster, outsider)
    assert status == 0, out
    span = head[head.index("(") + 1 : -1]
    assert f"not a member now ({span}): the guard does not count it" in out, out


def test_nothing_prints_a_table_header_over_no_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pool at zero brokers (audit and explain) and a set at zero replicas (rebalance's
    plan): the heading and the counts, no column header."""
    cluster = saved(tmp_path, pool(0, []), r.statefulset(0))
    for command in (["audit"], ["explain", "knp/broker"], ["rebalance"]):
        status, out = run(capsys, *command, "--cluster", cluster)
        assert status == 0, out
        assert "NODE ID" not in out and "ORDINAL" not in out, out
    status, out = run(capsys, "explain", "--cluster", cluster, "knp/broker")
    assert out.splitlines()[1] == "  brokers per zone: zone-a 0, zone-b 0, zone-c 0", out


# --- stszone rebalance -----------------------------------------------------------------------


def test_rebalance_says_when_it_plans_the_first_members_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """db-1200 runs in zone-b, its rule zone is zone-a (1200 mod 3 = 0): past the first 1,000
    members, the plan does not look at it, and says so rather than only "nothing to do"."""
    cluster = saved(tmp_path, r.statefulset(1_500), r.pod(1_200, "b1"))
    status, out = run(capsys, "rebalance", "--cluster", cluster)
    assert status == 0
    assert "  (the first 1000 of 1500 members: the others are not planned)\n" in out
    cluster = saved(tmp_path, r.statefulset(1_000), r.pod(900, "b1"))
    status, out = run(capsys, "rebalance", "--cluster", cluster)
    assert "(the first" not in out


def test_audit_says_the_lowest_count_of_a_huge_advanced_statefulset_is_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The guard does not judge a change of an Advanced StatefulSet of over 100,000 members
    (it allows it, with a warning); the audit has no lowest count to show, which is not that
    no count keeps every zone: 3 members in a row hold zone-a, zone-b and zone-c."""
    status, out = run(capsys, "audit", "--cluster", saved(tmp_path, kruise_set(100_001, [1])))
    assert status == 0
    assert "lowest replica count that keeps every zone: not judged (over 100000 members)" in out
    assert "none keeps them all" not in out


@pytest.mark.parametrize(
    ("workload", "lowest", "judged"),
    [
        (kruise_set(100_001, [1]), None, False),
        (kruise_set(3, [1]), 3, True),
        (r.statefulset(3), 3, True),
    ],
    ids=["over 100,000 members", "Advanced StatefulSet", "StatefulSet"],
)
def test_audit_json_tells_a_lowest_count_not_judged_from_none(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    workload: JSON,
    lowest: int | None,
    judged: bool,
) -> None:
    """``lowestSafeReplicas: null`` alone reads as "no count keeps every zone";
    ``lowestSafeJudged`` says whether the guard judged the counts at all: not for an Advanced
    StatefulSet of over 100,000 members (as the table says "not judged"), yes for the others,
    whose three members in a row hold zone-a, zone-b and zone-c."""
    cluster = saved(tmp_path, workload)
    status, out = run(capsys, "audit", "--cluster", cluster, "-o", "json")
    assert status == 0
    (listed,) = json.loads(out)["statefulsets"]
    assert (listed["lowestSafeReplicas"], listed["lowestSafeJudged"]) == (lowest, judged)
    # The gauge has no sample for a count not judged (docs/metrics.md).
    store = load_store(Path(cluster))
    risk = ZoneRisk(RiskScan(store), ready=lambda: True, interval=30, pause=0)
    asyncio.run(risk.refresh())
    samples = parse(Metrics(rendered=[risk.exposition]).exposition().decode())
    gauge = [v for (n, _), v in samples.items() if n == "stszone_statefulset_lowest_safe_replicas"]
    assert gauge == ([] if lowest is None else [lowest])


# --- the zone-risk gauges --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("workload", "labels"),
    [
        (r.statefulset(0), {"statefulset": "db", "kind": "StatefulSet"}),
        (kruise_set(0), {"statefulset": "web", "kind": "AdvancedStatefulSet"}),
        (kruise_set(0, [0, 1]), {"statefulset": "web", "kind": "AdvancedStatefulSet"}),
    ],
    ids=["StatefulSet", "Advanced StatefulSet", "reserveOrdinals"],
)
def test_the_gauges_of_a_set_at_zero_replicas(
    tmp_path: Path, workload: JSON, labels: dict[str, str]
) -> None:
    """A set of no member: its three listed zones, none held, nothing misplaced or unknown, and
    0 the lowest safe count (none held, none to lose), as the gauges a refresh writes."""
    store = load_store(Path(saved(tmp_path, workload)))
    risk = ZoneRisk(RiskScan(store), ready=lambda: True, interval=30, pause=0)
    asyncio.run(risk.refresh())
    samples = parse(Metrics(rendered=[risk.exposition]).exposition().decode())
    ours = frozenset({("namespace", "shop"), *labels.items()})
    assert {name: v for (name, seen), v in samples.items() if seen == ours} == {
        "stszone_statefulset_replicas": 0,
        "stszone_statefulset_zones": 3,
        "stszone_statefulset_zones_held": 0,
        "stszone_statefulset_misplaced_pods": 0,
        "stszone_statefulset_unknown_zone_ordinals": 0,
        "stszone_statefulset_lowest_safe_replicas": 0,
    }


# --- KafkaNodePools ----------------------------------------------------------------------------


def pool(replicas: int, node_ids: list[int] | None) -> JSON:
    """KafkaNodePool ``shop/broker`` of cluster ``my-cluster`` listing zone-a,b,c."""
    return sim.pool_object("broker", replicas=replicas, node_ids=node_ids, namespace="shop")


@pytest.mark.parametrize(
    ("replicas", "node_ids"),
    [(0, []), (3, []), (3, None)],
    ids=["scaled to zero", "no node ID yet", "not reconciled"],
)
def test_a_pool_without_brokers_keeps_every_zone_at_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], replicas: int, node_ids: list[int] | None
) -> None:
    """A pool none of whose brokers holds a zone loses none at any count: its lowest safe
    count is 0 in the table, the JSON and the gauge, as for a StatefulSet with no member."""
    cluster = saved(tmp_path, pool(replicas, node_ids))
    status, out = run(capsys, "audit", "--cluster", cluster)
    assert status == 0
    assert "(imbalance 0); lowest replica count that keeps every zone: 0\n" in out
    status, out = run(capsys, "audit", "--cluster", cluster, "-o", "json")
    (broker,) = json.loads(out)["kafkaNodePools"]
    assert (broker["name"], broker["lowestSafeReplicas"]) == ("broker", 0)
    lowest = {
        sample.labels["kafkanodepool"]: sample.value
        for family in PoolRiskCollector(RiskScan(load_store(Path(cluster)))).collect()
        if family.name == "stszone_kafkanodepool_lowest_safe_replicas"
        for sample in family.samples
    }
    assert lowest == {"broker": 0}


#: ``spec.replicas`` is an int32: a typo away from this.
INT32_MAX = 2**31 - 1
#: Lines of webhook code an answer about a huge pool may run (about 120,000 for the busiest,
#: `explain knp/`): a walk over two billion node IDs fails here at once instead of
#: filling the memory.
HUGE_POOL_LINES = 500_000


def test_a_pool_of_two_billion_replicas_is_audited_and_explained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Brokers 0, 1, 2 in zone-a, zone-b, zone-c, the pool asking for 2147483647: every
    command answers, the brokers it has counted as they are."""
    pods = []
    for node_id, node in enumerate(("a1", "b1", "c1")):
        pod = sim.pod_object("my-cluster", "broker", node_id)
        pod["metadata"]["namespace"] = "shop"
        pod["spec"]["nodeName"] = node
        pods.append(pod)
    cluster = saved(tmp_path, pool(INT32_MAX, [0, 1, 2]), *pods)
    with line_budget(HUGE_POOL_LINES):
        status, out = run(capsys, "audit", "--cluster", cluster)
    assert status == 0
    assert f"replicas {INT32_MAX}\n" in out
    assert "zone-a 1, zone-b 1, zone-c 1 (imbalance 0); lowest replica count that keeps" in out
    with line_budget(HUGE_POOL_LINES):
        status, out = run(capsys, "explain", "--cluster", cluster, "knp/broker")
    assert status == 0
    assert f"{INT32_MAX} -> {INT32_MAX - 1}: removes none: allowed" in out
    with line_budget(HUGE_POOL_LINES):
        status, out = run(capsys, "explain", "--cluster", cluster, "pod/my-cluster-broker-0")
    assert status == 0
    assert "holds zone-a for the scale-down guard" in out


def test_a_broker_of_a_pool_of_two_billion_replicas_is_placed() -> None:
    """The next broker (ID 3) of brokers 0, 1, 2 placed in zone-a, zone-b, zone-c goes to the
    pool's fewest, zone-a (ties: the first listed), however many more the pool asks for."""
    view = sim.store()
    cluster = sim.Cluster(view)
    cluster.create_pool("broker", 3)
    cluster.reconcile()
    assert cluster.zones("broker") == {0: "zone-a", 1: "zone-b", 2: "zone-c"}
    view.put(
        "nodepools",
        nodepool_info(sim.pool_object("broker", replicas=INT32_MAX, node_ids=[0, 1, 2])),
    )
    with line_budget(HUGE_POOL_LINES):
        answer = sim.admit(view, sim.pod_object("my-cluster", "broker", 3))
    assert answer.allowed, answer.message
    assert answer.edited["metadata"]["annotations"]["stszone.io/zone"] == "zone-a"
