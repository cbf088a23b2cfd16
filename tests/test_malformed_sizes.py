"""A set whose ``stszone.io/*`` annotations are malformed: its new pods are refused until they
are fixed, but a scale-down cannot change them, so the guard judges it on the defaults (the
server's zones, ordinal mode) with a warning, for a StatefulSet and an Advanced StatefulSet
alike; ``stszone explain`` gives each smaller size that same answer after its PROBLEM line.

db: six members on nodes in zone-a, zone-a, zone-b, zone-c, zone-b, zone-a (the zones of the
server: zone-a, zone-b, zone-c). Keeping 0-3 keeps every zone; keeping 0-2 loses zone-c.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from webhook.cli import main
from webhook.cli.explain_text import workload_json, workload_text
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.rules.admission import Request, validate
from webhook.rules.decision import Decision
from webhook.rules.explain import explain_workload

KRUISE = "apps.kruise.io"
KINDS = pytest.mark.parametrize("group", ["", KRUISE], ids=["apps", "kruise"])
NODES = ("a1", "a2", "b1", "c1", "b2", "a3")
BAD = {"stszone.io/mode": "bogus"}


def _cluster(group: str) -> Store:
    sts = b.statefulset("db", replicas=6, annotations=BAD)
    pods: list[dict[str, Any]] = [b.sts_pod("db", i, node=n) for i, n in enumerate(NODES)]
    if group:
        sts["apiVersion"] = f"{KRUISE}/v1beta1"
        for pod in pods:
            pod["metadata"]["ownerReferences"][0]["apiVersion"] = f"{KRUISE}/v1beta1"
    nodes = [b.node(n, f"zone-{n[0]}") for n in NODES]
    return store_from_objects([*nodes, sts, *pods])


def _scale(store: Store, new: int, *, group: str) -> Decision:
    """``kubectl scale --replicas NEW`` of db (six replicas), as /validate gets it."""
    request = Request(
        "Scale", "autoscaling", "statefulsets", "scale", "UPDATE", "ns", "db",
        b.scale(replicas=new), b.scale(replicas=6), resource_group=group or "apps",
    )  # fmt: skip
    return validate(request, store=store, defaults=Defaults())


@KINDS
def test_a_scale_down_of_a_malformed_set_is_judged_on_the_defaults_with_a_warning(
    group: str,
) -> None:
    """6 -> 3 loses zone-c and is refused; 6 -> 4 keeps every zone and is allowed, warned that
    the annotations are malformed, for an Advanced StatefulSet as for a StatefulSet."""
    store = _cluster(group)
    refused = _scale(store, 3, group=group)
    assert (refused.allowed, refused.reason) == (False, "ZoneLoss"), refused.message
    allowed = _scale(store, 4, group=group)
    assert allowed.allowed, allowed.message
    assert any("stszone.io/mode 'bogus'" in w for w in allowed.warnings), allowed.warnings


@KINDS
def test_explain_gives_each_size_the_guards_answer_after_the_problem(group: str) -> None:
    """Each smaller size's answer in explain is the guard's answer to that Scale: allowed or
    refused, with the same reason, message and warnings; the PROBLEM line says why its pods
    are refused, and no member table is drawn from annotations that do not read."""
    store = _cluster(group)
    explained = explain_workload(store, "ns", "db", group=group)
    assert explained is not None
    assert "malformed stszone annotations" in explained.problem
    assert explained.members == ()
    sizes = [(a.replicas, a.allowed, a.reason, a.message, a.warnings) for a in explained.sizes]
    guard = [(n, *_said(_scale(store, n, group=group))) for n in range(5, -1, -1)]
    assert sizes == guard
    assert [(n, allowed, reason) for n, allowed, reason, _, _ in sizes] == [
        (5, True, ""),
        (4, True, ""),
        (3, False, "ZoneLoss"),
        (2, False, "ZoneLoss"),
        (1, False, "ZoneLoss"),
        (0, True, ""),
    ]
    text = workload_text(explained).splitlines()
    (problem,) = [i for i, line in enumerate(text) if line.startswith("  PROBLEM: ")]
    after = "\n".join(text[problem + 1 :])
    assert "    6 -> 4: allowed" in after and "    6 -> 3: refused (ZoneLoss)" in after, after
    assert [s["replicas"] for s in workload_json(explained)["sizes"]] == [5, 4, 3, 2, 1, 0]


def _said(decision: Decision) -> tuple[bool, str, str, tuple[str, ...]]:
    return decision.allowed, decision.reason, decision.message, decision.warnings


def test_stszone_explain_prints_the_sizes_of_a_malformed_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``stszone explain sts/db --cluster FILE``: the PROBLEM line, then each size's answer."""
    sts = b.statefulset("db", replicas=6, annotations=BAD)
    pods = [b.sts_pod("db", i, node=n) for i, n in enumerate(NODES)]
    nodes = [b.node(n, f"zone-{n[0]}") for n in NODES]
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": [*nodes, sts, *pods]}))
    assert main(["explain", "sts/db", "--cluster", str(path)]) == 0
    out = capsys.readouterr().out
    assert "PROBLEM: StatefulSet ns/db has malformed stszone annotations" in out
    assert out.index("PROBLEM") < out.index("6 -> 4: allowed") < out.index("6 -> 3: refused")


def _set(group: str, *, replicas: int, annotations: dict[str, str]) -> dict[str, Any]:
    sts = b.statefulset("db", replicas=replicas, annotations=annotations)
    if group:
        sts["apiVersion"] = f"{KRUISE}/v1beta1"
    return sts


def _update(store: Store, new: dict[str, Any], *, group: str) -> Decision:
    """An UPDATE of db (six replicas, ``stszone.io/mode: bogus``) to ``new``."""
    request = Request(
        "StatefulSet", group or "apps", "statefulsets", "", "UPDATE", "ns", "db",
        new, _set(group, replicas=6, annotations=BAD), resource_group=group or "apps",
    )  # fmt: skip
    return validate(request, store=store, defaults=Defaults())


@KINDS
def test_the_way_out_of_a_malformed_sets_refusal_is_one_that_is_taken(group: str) -> None:
    """The guard reads none of a malformed set's annotations, and an update that adds
    allow-zone-loss to them, leaving them malformed, is refused: the refusal of 6 -> 3 (by a
    Scale, or by an update that keeps the annotations) names the malformed one to fix in the
    same update, and that update is allowed."""
    store = _cluster(group)
    scaled = _scale(store, 3, group=group)
    kept = _update(store, _set(group, replicas=3, annotations=BAD), group=group)
    for refused in (scaled, kept):
        assert (refused.allowed, refused.reason) == (False, "ZoneLoss"), refused.message
        assert "stszone.io/mode 'bogus' is not a mode" in refused.message, refused.message
        assert "in the same update that sets stszone.io/allow-zone-loss" in refused.message
    forced = {**BAD, "stszone.io/allow-zone-loss": "true"}
    added = _update(store, _set(group, replicas=3, annotations=forced), group=group)
    assert (added.allowed, added.reason) == (False, "Invalid"), added.message
    fixed = {"stszone.io/mode": "affinity", "stszone.io/allow-zone-loss": "true"}
    taken = _update(store, _set(group, replicas=3, annotations=fixed), group=group)
    assert taken.allowed, taken.message
    assert any("allowed by stszone.io/allow-zone-loss" in w for w in taken.warnings)


@KINDS
def test_the_malformed_warning_and_refusal_name_the_sets_kind(group: str) -> None:
    """An Advanced StatefulSet's malformed annotations are spoken of as an Advanced
    StatefulSet's, on a Scale, on an update that keeps them, in explain, and when an update
    changes them; a StatefulSet's as a StatefulSet's."""
    kind = "Advanced StatefulSet" if group else "StatefulSet"
    store = _cluster(group)
    scaled = _scale(store, 4, group=group)
    kept = _update(store, _set(group, replicas=4, annotations=BAD), group=group)
    explained = explain_workload(store, "ns", "db", group=group)
    assert explained is not None
    (four,) = [a for a in explained.sizes if a.replicas == 4]
    for warnings in (scaled.warnings, kept.warnings, four.warnings):
        said = [w for w in warnings if "stszone.io/mode 'bogus'" in w]
        assert said and all(w.startswith(f"{kind} db: ") for w in said), warnings
    changed = _update(
        store, _set(group, replicas=6, annotations={"stszone.io/mode": "x"}), group=group
    )
    assert (changed.allowed, changed.reason) == (False, "Invalid")
    assert changed.message.startswith(f"{kind} db: stszone.io/mode 'x'"), changed.message
