"""`stszone explain` on saved clusters: where a pod is and why, what each smaller size gets.

The guard example (deploy/examples/guard/cluster.yaml): shop/db's ordinals 0-5 run in zone-a,
zone-a, zone-b, zone-c, zone-b, zone-a, ordinals 1, 2, 3 and 5 with their volumes (so 3 is in
zone-c, away from its rule zone zone-a). Keeping 0-4 or 0-3 keeps every zone; 0-2 loses zone-c
(ordinal 3), 0-1 and 0 lose zone-b (2 and 4) and zone-c; 0 stops the set.

The built cluster (``_facts``): ns/db, zones a, b, c, replicas 5.
  0  on a1 (zone-a, Ready)               holds zone-a
  1  on b1 (zone-b, NotReady)            holds zone-b, its node not Ready
  2  Terminating on c1 (zone-c)          holds nothing; its replacement goes to zone-c (rule)
  3  on x1 (no zone label)               unknown
  4  no pod; data-db-4 bound to a zone-c volume (rule zone-b)   counted in zone-c
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from tests.fakeapi import FakeApi
from tests.kubeconfig import write_kubeconfig
from webhook.cli import main, plugin
from webhook.cli.explain_text import pod_text, workload_json, workload_text
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.rules.admission import Request, validate
from webhook.rules.explain import explain_pod, explain_workload

GUARD = Path(__file__).parent.parent / "deploy" / "examples" / "guard" / "cluster.yaml"
ZONES = {"stszone.io/zones": "zone-a,zone-b,zone-c"}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def _facts() -> Store:
    return store_from_objects(
        [
            b.node("a1", "zone-a", ready="True"),
            b.node("b1", "zone-b", ready="False"),
            b.node("c1", "zone-c", ready="True"),
            b.node("x1", None, ready="True"),
            b.statefulset("db", replicas=5, annotations=ZONES),
            b.sts_pod("db", 0, node="a1"),
            b.sts_pod("db", 1, node="b1"),
            b.sts_pod("db", 2, node="c1", deleting=True),
            b.sts_pod("db", 3, node="x1"),
            b.pvc("data-db-4", volume="pv-4"),
            b.pv("pv-4", "zone-c", claim=("ns", "data-db-4")),
            b.statefulset(
                "pinned",
                replicas=2,
                annotations=ZONES,
                node_selector={"topology.kubernetes.io/zone": "zone-a"},
            ),
            b.sts_pod("pinned", 1, node="a1"),
            b.plain_pod("bare"),
        ]
    )


def test_each_member_and_what_the_guard_counts() -> None:
    explained = explain_workload(_facts(), "ns", "db")
    assert explained is not None
    guard = [(m.row.ordinal, m.row.status, m.guard.zone) for m in explained.members]
    assert guard == [
        (0, "ok", "zone-a"),
        (1, "ok", "zone-b"),
        (2, "going", None),
        (3, "unknown", None),
        (4, "no pod", "zone-c"),
    ]
    zero, one, two, three, four = (m.guard.why for m in explained.members)
    assert zero == "holds zone-a for the scale-down guard"
    assert one.startswith("holds zone-b for the scale-down guard; its node b1 is not Ready")
    assert two == (
        "holds no zone: db-2 is Terminating on node c1 in zone-c; its replacement goes to "
        "zone-c; the guard counts it there"
    )
    assert three.startswith(
        "its zone is unknown (node x1 has no label topology.kubernetes.io/zone)"
    )
    assert four == "not running: the guard counts it in zone-c, where its volume pv-4 puts it"
    assert [m.rule_zone for m in explained.members] == [
        "zone-a",
        "zone-b",
        "zone-c",
        "zone-a",
        "zone-b",
    ]


def test_the_table_says_where_a_going_member_counts() -> None:
    """db-2 is Terminating and its replacement goes to zone-c, where the guard counts it; db-3's
    zone is unknown. The GUARD column tells the two apart: zone-c for db-2, unknown for db-3."""
    explained = explain_workload(_facts(), "ns", "db")
    assert explained is not None
    cells = {
        line.split()[0]: line.split("  ")[-1].strip()
        for line in workload_text(explained).splitlines()[2:7]
    }
    assert cells["2"] == "none (going; counts zone-c)"
    assert cells["3"] == "unknown"
    guards = [m["guard"] for m in workload_json(explained)["members"]]
    assert [(g["zone"], g["counts"]) for g in guards[2:4]] == [(None, "zone-c"), (None, None)]


def test_a_going_pod_of_a_set_being_deleted_has_no_replacement() -> None:
    """A foreground deletion of db leaves it with a deletionTimestamp while its pods go: its
    controller creates no pod for a set being deleted, so db-2 (Terminating) and db-0 (Failed)
    are not replaced, and explain says so instead of naming a replacement's zone."""
    sts = b.statefulset("db", replicas=3, annotations=ZONES)
    sts["metadata"]["deletionTimestamp"] = "2026-12-07T12:00:00Z"
    store = store_from_objects(
        [
            b.node("a1", "zone-a"),
            b.node("c1", "zone-c"),
            sts,
            b.sts_pod("db", 0, node="a1", phase="Failed"),
            b.sts_pod("db", 2, node="c1", deleting=True),
        ]
    )
    explained = explain_pod(store, "ns", "db-2")
    assert explained is not None and explained.member is not None
    assert explained.member.row.status == "going"
    assert explained.member.guard.why == (
        "holds no zone: db-2 is Terminating on node c1 in zone-c; nothing replaces it: its "
        "StatefulSet is being deleted"
    )
    whole = explain_workload(store, "ns", "db")
    assert whole is not None
    assert whole.members[0].row.why == (
        "db-0 has Failed on node a1 in zone-a; nothing replaces it: its StatefulSet is being "
        "deleted"
    )
    for text in (pod_text(explained), workload_text(whole)):
        assert "replacement" not in text, text


def test_each_smaller_size_gets_the_webhooks_answer() -> None:
    explained = explain_workload(_facts(), "ns", "db")
    assert explained is not None
    answers = [(a.replicas, a.allowed, a.reason) for a in explained.sizes]
    # 4 and 3 keep zone-a, zone-b (on a NotReady node) and zone-c (db-2's replacement goes
    # there), removing db-3 whose zone is unknown; 2 loses zone-c (db-2 and db-4), 1 zone-b
    # too; 0 stops the set.
    assert answers == [
        (4, True, ""),
        (3, True, ""),
        (2, False, "ZoneLoss"),
        (1, False, "ZoneLoss"),
        (0, True, ""),
    ]
    unknown = (
        "db: ordinal 3, whose zone is unknown (node x1 has no label topology.kubernetes.io/zone); "
        "no listed zone is lost"
    )
    assert explained.sizes[0].warnings == explained.sizes[1].warnings == (unknown,)
    assert explained.sizes[2].message.startswith(
        "scale-down of db from 5 to 2 would drop zone zone-c (ordinals 2 and 4 are the only "
        "ones there; db-2 is Terminating on node c1 in zone-c; its replacement goes to zone-c"
    )
    assert explained.unjudged == 0


def test_a_pod_left_alone_says_why() -> None:
    store = _facts()
    # The view holds StatefulSet pods only: a pod no StatefulSet controls is not in it.
    assert explain_pod(store, "ns", "bare") is None
    assert explain_pod(store, "ns", "nothing-here") is None
    opted_out = store_from_objects(
        [
            {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "lab"}},
            b.statefulset("db", namespace="lab", annotations=ZONES),
            b.sts_pod("db", 0, namespace="lab"),
        ]
    )
    lab = explain_pod(opted_out, "lab", "db-0")
    assert lab is not None and lab.member is not None
    assert lab.left_alone == "namespace lab is not opted in (label stszone.io/enabled=true)"
    kube = explain_pod(opted_out, "lab", "db-0", excluded={"lab"})
    assert kube is not None and kube.left_alone.startswith("namespace lab is never intercepted")


def test_own_constraints_that_exclude_the_zone_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    explained = explain_pod(_facts(), "ns", "pinned-1")
    assert explained is not None and explained.allowed_zones == ("zone-a",)
    path = tmp_path / "cluster.json"
    path.write_text(
        json.dumps(
            {
                "kind": "List",
                "apiVersion": "v1",
                "items": [
                    b.node("a1", "zone-a"),
                    b.statefulset(
                        "pinned",
                        replicas=2,
                        annotations=ZONES,
                        node_selector={"topology.kubernetes.io/zone": "zone-a"},
                    ),
                    b.sts_pod("pinned", 1, node="a1"),
                ],
            }
        )
    )
    status, out, _ = _run(["explain", "--cluster", str(path), "pinned-1"], capsys)
    assert status == 0
    assert (
        "  own constraints: allow only zone-a: they exclude zone-b, so a new pod of this "
        "ordinal is refused"
    ) in out.splitlines()


def test_pod_text_on_the_guard_example(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(["explain", "--cluster", str(GUARD), "pod/db-3"], capsys)
    assert status == 0
    assert out.splitlines() == [
        "Pod shop/db-3: ordinal 3 of StatefulSet shop/db: mode affinity, zones "
        "zone-a,zone-b,zone-c, replicas 6 (ordinals 0-5)",
        "  rule zone:       zone-a",
        "  stszone's zone:  zone-c (set by volume pvc-db-3), away from its rule zone zone-a: "
        "its data is there",
        "  own constraints: name no zone",
        "  runs on:         node node-c1, zone zone-c, Ready",
        "  status:          ok",
        "  guard:           holds zone-c for the scale-down guard",
    ]


def test_statefulset_json_on_the_guard_example(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(
        ["explain", "--cluster", str(GUARD), "-n", "shop", "statefulset/db", "-o", "json"], capsys
    )
    assert status == 0
    report: dict[str, Any] = json.loads(out)
    assert (report["kind"], report["namespace"], report["name"], report["replicas"]) == (
        "StatefulSet",
        "shop",
        "db",
        6,
    )
    assert [m["guard"]["zone"] for m in report["members"]] == [
        "zone-a",
        "zone-a",
        "zone-b",
        "zone-c",
        "zone-b",
        "zone-a",
    ]
    sizes = [(s["replicas"], s["allowed"], s["reason"]) for s in report["sizes"]]
    assert sizes == [
        (5, True, None),
        (4, True, None),
        (3, False, "ZoneLoss"),
        (2, False, "ZoneLoss"),
        (1, False, "ZoneLoss"),
        (0, True, None),
    ]
    three = report["sizes"][2]["message"]
    assert three.startswith(
        "scale-down of db from 6 to 3 would drop zone zone-c (ordinal 3 is its only pod); "
        "the smallest replica count that keeps every zone is 4"
    )
    assert report["sizes"][5]["warnings"] == [
        "db: 6 -> 0 stops the set in every zone; scaling up puts each ordinal back in its zone"
    ]


def test_statefulset_text_on_the_guard_example(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(["explain", "--cluster", str(GUARD), "sts/cache"], capsys)
    assert status == 0
    lines = out.splitlines()
    assert lines[:5] == [
        "StatefulSet shop/cache: mode affinity, zones zone-a,zone-b,zone-c, replicas 3 (ordinals 0-2)",
        "  ORDINAL  RULE    EXPECTED  SET BY  NODE     ZONE    STATUS     GUARD",
        "  0        zone-a  zone-a    rule    node-a1  zone-a  ok         holds zone-a",
        "  1        zone-b  zone-b    rule    node-a2  zone-a  MISPLACED  holds zone-a",
        "  2        zone-c  zone-c    rule    node-b1  zone-b  MISPLACED  holds zone-b",
    ]
    assert lines[5] == "  a scale-down to each smaller size would be:"
    assert lines[6].startswith("    3 -> 2: refused (ZoneLoss): scale-down of cache from 3 to 2 ")
    # What kubectl scale to 2 is told of the count, as kubectl patch of spec.replicas is.
    assert lines[7] == (
        "      warning: cache: 2 replica(s) for 3 zones leaves a zone empty; 3 or more survive "
        "the loss of any zone"
    )
    assert lines[10] == "    3 -> 0: allowed"


def test_not_found_and_ambiguous_names_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = _run(["explain", "--cluster", str(GUARD), "sts/nope"], capsys)
    assert (status, err) == (
        1,
        "stszone explain: no statefulset nope in any namespace of the view\n",
    )
    path = tmp_path / "two.json"
    items = [b.sts_pod("db", 0, namespace=ns) for ns in ("one", "two")]
    items += [b.statefulset("db", namespace=ns, annotations=ZONES) for ns in ("one", "two")]
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    status, _, err = _run(["explain", "--cluster", str(path), "db-0"], capsys)
    assert status == 1 and "ambiguous (pod one/db-0, pod two/db-0)" in err
    status, out, _ = _run(["explain", "--cluster", str(path), "-n", "two", "db-0"], capsys)
    assert status == 0 and out.startswith("Pod two/db-0: ordinal 0 of StatefulSet two/db")


def test_an_orphaned_pod_is_said_to_have_no_owner_and_be_no_member(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """db-3 left by kubectl delete sts db --cascade=orphan: its labels still name the set, so
    the reason it is not found says why such a pod is no member, not only that the view holds
    the pods of StatefulSets."""
    orphan = b.sts_pod("db", 3, node="node-a1")
    orphan["metadata"].pop("ownerReferences", None)
    assert orphan["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "db-3"
    path = tmp_path / "orphan.json"
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": [orphan]}))
    status, _, err = _run(["explain", "--cluster", str(path), "pod/db-3"], capsys)
    assert status == 1
    assert "no owner -- orphaned by kubectl delete sts --cascade=orphan, or made by hand" in err
    assert "is no member: neither the guard nor audit counts it" in err


def test_a_bad_target_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["explain", "--cluster", str(GUARD), "deployment/web"])
    assert exited.value.code == 2
    assert "is not TYPE/NAME" in capsys.readouterr().err


async def test_kubectl_stszone_explain_reads_the_contexts_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kubectl stszone explain pod/db-0` against the fake API server (the recorded cluster:
    cap/db, whose claim data-db-0 is bound to a volume in zone-c): one list, no watch."""
    async with FakeApi(token="t0k3n") as api:
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", server=api.url, token="t0k3n", ca=api.ca
        )
        # kubectl hands the plugin its environment, which the command reads $KUBECONFIG from.
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        out = tmp_path / "out.json"

        def run() -> int:
            with out.open("w") as handle, contextlib.redirect_stdout(handle):
                environ = {"KUBECONFIG": str(kubeconfig)}
                return plugin.main(
                    ["explain", "-n", "cap", "pod/db-0", "-o", "json"], environ=environ
                )

        assert await asyncio.to_thread(run) == 0
        assert not [s for s in api.requests if s.verb == "watch"]
    report = json.loads(out.read_text())
    assert report["member"]["expectedZone"] == "zone-c"
    assert report["member"]["node"] == "lab-node-6"
    assert report["leftAlone"] == "namespace cap is not opted in (label stszone.io/enabled=true)"


def test_help_has_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    out = capsys.readouterr().out
    assert "kubectl stszone explain pod/db-3" in out and "exit status:" in out


def test_a_node_ordinal_pod_off_its_node_is_told_where_it_goes_not_to_rebalance() -> None:
    """db-0 runs on n1, labelled for ordinal 1, in the same zone b as its own node n0: it is
    outside its node, not outside b, and `stszone rebalance` moves no node-ordinal pod (it
    says "nothing to rebalance"); re-created, stszone pins it to n0."""
    label = "example.io/node"
    store = store_from_objects(
        [
            b.node("n0", "b", labels={label: "0"}),
            b.node("n1", "b", labels={label: "1"}),
            b.statefulset(
                "db",
                replicas=2,
                templates=(),
                annotations={"stszone.io/mode": "node-ordinal", "stszone.io/node-label": label},
            ),
            b.sts_pod("db", 0, node="n1", claims=()),
        ]
    )
    explained = explain_pod(store, "ns", "db-0")
    assert explained is not None
    assert (
        "  status:          MISPLACED: it runs on none of the nodes labelled for its ordinal "
        "(n0); re-created, stszone pins it to them (`stszone rebalance` moves no pod of "
        "node-ordinal mode)"
    ) in pod_text(explained).splitlines()


def test_a_pod_of_a_skipped_template_is_not_sent_to_rebalance() -> None:
    """db's pod template is labelled stszone.io/skip=true, so stszone placed none of its pods:
    db-1 runs in zone-a, where the rule would have put zone-b, and explain says stszone gives
    it no zone and does not move it (rebalance has nothing to do for the set), as the audit
    marks it `skipped`; the guard still counts where it is."""
    sts = b.statefulset("db", replicas=3, templates=(), annotations=ZONES)
    sts["spec"]["template"]["metadata"]["labels"]["stszone.io/skip"] = "true"
    skip = {"stszone.io/skip": "true"}
    store = store_from_objects(
        [
            b.node("a1", "zone-a"),
            b.node("b1", "zone-b"),
            b.node("c1", "zone-c"),
            sts,
            b.sts_pod("db", 0, claims=(), labels=skip, node="a1"),
            b.sts_pod("db", 1, claims=(), labels=skip, node="a1"),
        ]
    )
    explained = explain_pod(store, "ns", "db-1")
    assert explained is not None
    assert explained.left_alone == "its pod template is labelled stszone.io/skip=true"
    lines = pod_text(explained).splitlines()
    assert "  stszone's zone:  no zone: stszone.io/skip=true on the pod template" in lines
    assert (
        "  status:          skipped: stszone expects it nowhere, and `stszone rebalance` moves "
        "none of its set"
    ) in lines
    assert "  guard:           holds zone-a for the scale-down guard" in lines


def test_a_set_labelled_skip_has_every_size_allowed_as_the_webhook_allows_it() -> None:
    """db is labelled stszone.io/skip=true: the objectSelector keeps its updates from the
    guard and its /scale is allowed unjudged, so 3 -> 2 (which would drop zone-c, ordinal 2's
    alone) passes whichever way it is asked; explain says so instead of "refused"."""
    sts = b.statefulset("db", replicas=3, templates=(), annotations=ZONES)
    sts["metadata"]["labels"] = {"stszone.io/skip": "true"}
    store = store_from_objects(
        [
            b.node("a1", "zone-a"),
            b.node("b1", "zone-b"),
            b.node("c1", "zone-c"),
            sts,
            *(b.sts_pod("db", o, claims=(), node=n) for o, n in enumerate(("a1", "b1", "c1"))),
        ]
    )
    explained = explain_workload(store, "ns", "db")
    assert explained is not None
    said = "not judged: the StatefulSet is labelled stszone.io/skip=true"
    assert [(s.replicas, s.allowed, s.warnings) for s in explained.sizes] == [
        (2, True, (said,)),
        (1, True, (said,)),
        (0, True, (said,)),
    ]
    scale = validate(
        Request("Scale", "autoscaling", "statefulsets", "scale", "UPDATE", "ns", "db",
                b.scale(replicas=2), b.scale(replicas=3), resource_group="apps"),
        store=store,
        defaults=Defaults(),
    )  # fmt: skip
    assert scale.allowed


def test_a_pod_left_over_by_a_scale_down_is_not_sent_to_rebalance_nor_replaced() -> None:
    """db went from 4 to 2 replicas: db-3 still runs in zone-b (the controller deletes one
    condemned pod at a time) and db-2 is Terminating in zone-a. Neither is a member: the
    controller deletes them and re-creates neither, so neither is misplaced (rebalance plans
    members only) and nothing replaces db-2 in zone-c."""
    store = store_from_objects(
        [
            b.node("a1", "zone-a"),
            b.node("b1", "zone-b"),
            b.statefulset("db", replicas=2, annotations=ZONES, templates=()),
            b.sts_pod("db", 0, node="a1", claims=()),
            b.sts_pod("db", 1, node="b1", claims=()),
            b.sts_pod("db", 2, node="a1", claims=(), deleting=True),
            b.sts_pod("db", 3, node="b1", claims=()),
        ]
    )
    for name in ("db-2", "db-3"):
        explained = explain_pod(store, "ns", name)
        assert explained is not None
        text = pod_text(explained)
        assert "MISPLACED" not in text and "rebalance" not in text, text
        assert "replacement goes to" not in text, text
        assert explained.member is not None and explained.member.row.status == "going"


def test_a_set_in_a_namespace_not_opted_in_has_every_size_allowed_as_the_api_server_allows_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Namespace off is labelled stszone.io/enabled=false: the webhooks' namespaceSelector never
    sends its requests to stszone, so `kubectl scale sts db --replicas=2` (dropping zone-c,
    ordinal 2's alone) goes through; explain must not call it refused."""
    labels = {"stszone.io/enabled": "false"}
    off = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "off", "labels": labels}}
    objects = [
        off,
        b.node("a1", "zone-a"),
        b.node("b1", "zone-b"),
        b.node("c1", "zone-c"),
        b.statefulset("db", namespace="off", replicas=3, templates=(), annotations=ZONES),
        *(
            b.sts_pod("db", o, namespace="off", claims=(), node=n)
            for o, n in enumerate(("a1", "b1", "c1"))
        ),
    ]
    saved = tmp_path / "cluster.json"
    saved.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    status, out, _ = _run(["explain", "--cluster", str(saved), "-n", "off", "sts/db"], capsys)
    assert status == 0
    assert "refused" not in out, out
    assert "namespace off is not opted in" in out, out
