"""A volume's node affinity read with every operator, on the guard's example cluster.

``deploy/examples/guard/cluster.yaml``: StatefulSet shop/db with zones zone-a,zone-b,zone-c
and six pods; db-3 on node-c1 is the only zone-c pod, its volume pvc-db-3 pinned to zone-c.
Here pvc-db-3's affinity is written other ways Kubernetes reads the same -- ``NotIn`` the
other zones, the other nodes by hostname, an empty term beside the zone's -- and db-3 is
re-created (its pod deleted): stszone must pin the new pod to zone-c and refuse a scale-down
that leaves zone-c without its only ordinal, through ``stszone review`` as a person runs it;
``stszone audit`` and ``stszone rebalance`` read the volume the same way.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cli import main
from webhook.cluster.clusterfile import store_from_objects
from webhook.cluster.snapshot import from_objects
from webhook.rules.audit import audit
from webhook.rules.rebalance import chosen, plan
from webhook.rules.risk import SetRisk

JSON = dict[str, Any]
EXAMPLES = Path(__file__).resolve().parent.parent / "deploy" / "examples" / "guard"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def items() -> list[JSON]:
    found: list[JSON] = yaml.safe_load((EXAMPLES / "cluster.yaml").read_text())["items"]
    return found


def named(objects: list[JSON], kind: str, name: str) -> JSON:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


#: pvc-db-3's nodeSelectorTerms, each admitting node-c1 (zone-c) alone.
AFFINITIES = {
    "NotIn the other zones": [
        {"matchExpressions": [{"key": ZONE, "operator": "NotIn", "values": ["zone-a", "zone-b"]}]}
    ],
    "NotIn the other nodes": [
        {
            "matchExpressions": [
                {
                    "key": HOST,
                    "operator": "NotIn",
                    "values": ["node-a1", "node-a2", "node-b1", "node-b2"],
                }
            ]
        }
    ],
    "an empty term beside the zone's": [
        {},
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-c"]}]},
    ],
    "Exists on the zone and NotIn two zones": [
        {
            "matchExpressions": [
                {"key": ZONE, "operator": "Exists"},
                {"key": ZONE, "operator": "NotIn", "values": ["zone-a", "zone-b"]},
            ]
        }
    ],
}


def cluster(terms: list[JSON], *, running: bool) -> list[JSON]:
    """The example with pvc-db-3's terms replaced (and db-3's pod deleted unless ``running``)."""
    objects = items()
    pv = named(objects, "PersistentVolume", "pvc-db-3")
    pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] = terms
    if not running:
        objects.remove(named(objects, "Pod", "db-3"))
    return objects


def review(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    objects: list[JSON],
    body: JSON,
    *,
    endpoint: str,
) -> JSON:
    """``stszone review --cluster FILE --endpoint ENDPOINT REVIEW``'s response."""
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump({"kind": "List", "items": objects}))
    (tmp_path / "review.json").write_text(json.dumps(body))
    argv = ["review", "--cluster", str(tmp_path / "cluster.yaml"), "--endpoint", endpoint]
    main([*argv, str(tmp_path / "review.json")])
    response: JSON = json.loads(capsys.readouterr().out)["response"]
    return response


def create_db_3() -> JSON:
    """The AdmissionReview the API server sends when the controller re-creates db-3."""
    pod = copy.deepcopy(named(items(), "Pod", "db-3"))
    del pod["spec"]["nodeName"], pod["status"]
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "3f6c1d2e-8a4b-4f7e-9c1d-5b2a7e8f0c14",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "shop",
            "operation": "CREATE",
            "object": pod,
        },
    }


def scale_6_to_3() -> JSON:
    body: JSON = json.loads((EXAMPLES / "scale-db-6-to-3.json").read_text())
    return body


@pytest.mark.parametrize("terms", list(AFFINITIES.values()), ids=list(AFFINITIES))
def test_the_re_created_pod_goes_where_its_volume_can_attach(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], terms: list[JSON]
) -> None:
    """The rule says zone-a for ordinal 3; its volume admits node-c1 alone: zone-c."""
    objects = cluster(terms, running=False)
    response = review(tmp_path, capsys, objects, create_db_3(), endpoint="mutate")
    assert response["allowed"] and response["warnings"] == [
        "db-3 follows volume pvc-db-3 (claim data-db-3) to zone-c; the rule says zone-a"
    ]


@pytest.mark.parametrize("terms", list(AFFINITIES.values()), ids=list(AFFINITIES))
@pytest.mark.parametrize("running", [False, True], ids=["pod deleted", "pod on a gone node"])
def test_a_scale_down_dropping_the_zone_of_the_only_ordinal_there_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], terms: list[JSON], running: bool
) -> None:
    """6 -> 3 removes db-3, the only ordinal of zone-c (its pod deleted, or still bound to
    node-c0, a zone-c node since deleted, so going away): refused, naming zone-c and why."""
    objects = cluster(terms, running=running)
    if running:  # only its volume's affinity, read exactly, says where db-3 comes back
        named(objects, "Pod", "db-3")["spec"]["nodeName"] = "node-c0"
    response = review(tmp_path, capsys, objects, scale_6_to_3(), endpoint="validate")
    assert not response["allowed"]
    status = response["status"]
    assert status["reason"] == "ZoneLoss", status["message"]
    assert status["message"].startswith(
        "scale-down of db from 6 to 3 would drop zone zone-c (ordinal 3 is the only one there; "
    )


@pytest.mark.parametrize("terms", list(AFFINITIES.values()), ids=list(AFFINITIES))
def test_audit_and_the_gauges_read_the_volume_the_same_way(terms: list[JSON]) -> None:
    """Ordinal 3 without its pod: expected in zone-c by its volume; the set holds zone-c."""
    store = store_from_objects(cluster(terms, running=False))
    (report,) = [s for s in audit(store).sets if s.name == "db"]
    row = report.rows[3]
    assert (row.expected_zone, row.expected_by, row.status) == (
        "zone-c",
        "volume pvc-db-3",
        "no pod",
    )
    assert "zone-c" in report.held and report.lowest == 4
    assert SetRisk.of(report).held == 3


@pytest.mark.parametrize("terms", list(AFFINITIES.values()), ids=list(AFFINITIES))
def test_rebalance_keeps_a_pod_with_its_volume(terms: list[JSON]) -> None:
    """db-3 runs in zone-c, its rule zone is zone-a, and its volume can attach only in zone-c:
    pinned by data, never evicted into a zone where it would stay Pending."""
    snap = from_objects(cluster(terms, running=True))
    (result,) = [s for s in plan(snap.store, snap.state, sets=chosen(snap.store)).sets
                 if s.name == "db"]  # fmt: skip
    row = result.rows[3]
    assert (row.zone, row.target) == ("zone-c", "zone-a")
    assert row.kind != "movable", row
    assert "its volume pvc-db-3 is in zone-c" in row.notes
