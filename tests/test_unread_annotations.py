"""An annotation the set's mode does not read (``stszone.io/node-label`` without node-ordinal
mode): admission allows it with a warning, and ``stszone audit`` and ``stszone explain`` say
the same words of the set as it stands."""

from __future__ import annotations

from typing import Any

from tests import builders as b
from webhook.cli.audit import render_json, render_text
from webhook.cli.explain_text import pod_json, pod_text, workload_json, workload_text
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.rules.admission import Request, validate
from webhook.rules.audit import audit
from webhook.rules.explain import explain_pod, explain_workload

LABEL = {"stszone.io/zones": "zone-a,zone-b,zone-c", "stszone.io/node-label": "example.io/node"}
SAID = (
    "db: stszone.io/node-label 'example.io/node' does nothing in affinity mode, it is read only "
    'with stszone.io/mode: "node-ordinal"; set that mode, or remove stszone.io/node-label'
)


def _cluster(sts: dict[str, Any]) -> Store:
    return store_from_objects(
        [
            b.node("a1", "zone-a"),
            b.node("b1", "zone-b"),
            b.node("c1", "zone-c"),
            sts,
            b.sts_pod("db", 0, node="a1"),
            b.sts_pod("db", 1, node="b1"),
            b.sts_pod("db", 2, node="c1"),
        ]
    )


def _admission_warnings(sts: dict[str, Any], store: Store) -> tuple[str, ...]:
    """What an UPDATE of ``sts`` that changes nothing stszone reads is warned of."""
    decided = validate(
        Request("StatefulSet", "apps", "statefulsets", "", "UPDATE", "ns", "db", sts, sts,
                resource_group="apps"),
        store=store,
        defaults=Defaults(),
    )  # fmt: skip
    assert decided.allowed
    return decided.warnings


def test_audit_and_explain_say_what_admission_says_of_an_annotation_not_read() -> None:
    sts = b.statefulset("db", replicas=3, annotations=LABEL)
    store = _cluster(sts)
    assert _admission_warnings(sts, store) == (SAID,)
    report = audit(store)
    assert report.sets[0].warnings == (SAID,)
    assert f"  warning: {SAID}" in render_text(report).splitlines()
    assert render_json(report)["statefulsets"][0]["warnings"] == [SAID]
    assert not report.has_problems  # allowed by admission: audit exits 0 for it
    whole = explain_workload(store, "ns", "db")
    assert whole is not None
    assert f"  warning: {SAID}" in workload_text(whole).splitlines()
    assert workload_json(whole)["warnings"] == [SAID]
    pod = explain_pod(store, "ns", "db-1")
    assert pod is not None
    assert f"  warning: {SAID}" in pod_text(pod).splitlines()
    assert pod_json(pod)["workload"]["warnings"] == [SAID]


def test_a_set_whose_mode_reads_its_annotations_is_not_warned_of() -> None:
    sts = b.statefulset("db", replicas=3, annotations={**LABEL, "stszone.io/mode": "node-ordinal"})
    store = _cluster(sts)
    assert _admission_warnings(sts, store) == ()
    report = audit(store)
    assert report.sets[0].warnings == ()
    assert "warning" not in render_text(report)
    whole = explain_workload(store, "ns", "db")
    assert whole is not None and whole.workload.warnings == ()


def test_a_malformed_set_is_named_a_problem_and_warned_of_as_its_updates_are() -> None:
    """stszone.io/zones with an empty entry: audit's problem, and admission warns of both on
    an update that leaves them as they are; the annotation not read is said alike."""
    sts = b.statefulset(
        "db", replicas=3, annotations={**LABEL, "stszone.io/zones": "zone-a,,zone-b"}
    )
    store = _cluster(sts)
    ratchet, unread = _admission_warnings(sts, store)
    assert "unchanged by this update" in ratchet and unread == SAID
    report = audit(store)
    assert report.sets[0].problem and report.sets[0].warnings == (SAID,)
    assert f"  warning: {SAID}" in render_text(report).splitlines()
    whole = explain_workload(store, "ns", "db")
    assert whole is not None and whole.problem
    assert f"  warning: {SAID}" in workload_text(whole).splitlines()
