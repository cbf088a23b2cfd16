"""The start of an Advanced StatefulSet as the reports show it: kruise-manager honours
``spec.ordinals.start`` only with its ``StatefulSetStartOrdinal`` feature gate (off by default;
``getStartOrdinal`` in ``pkg/controller/statefulset/stateful_set_control.go``), and stszone only
with ``--kruise-start-ordinal``. Without them the members start at 0 whatever the field says,
and ``stszone audit`` / ``stszone explain`` say the start the members really have."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.builders import node
from webhook.cli.audit import render_json
from webhook.cli.explain import run_explain
from webhook.cluster.clusterfile import store_from_objects
from webhook.model.store import Store
from webhook.rules.audit import audit

OBJECTS = Path(__file__).parent / "fixtures" / "kruise" / "objects"


def _store(*, gate: bool, start: int = 3, malformed: bool = False) -> Store:
    """web: replicas 3, ordinal 1 reserved, ``spec.ordinals.start: 3`` (or ``start``);
    ``malformed``: its ``stszone.io/mode`` names no mode."""
    (sts,) = json.loads((OBJECTS / "statefulsets.v1beta1.json").read_text())["items"]
    sts = copy.deepcopy(sts)
    sts["metadata"].setdefault("annotations", {})["stszone.io/zones"] = "a,b,c"
    if malformed:
        sts["metadata"]["annotations"]["stszone.io/mode"] = "nope"
    sts["spec"]["ordinals"] = {"start": start}
    namespace = {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": "shop", "labels": {"stszone.io/enabled": "true"}},
    }
    objects: list[Any] = [*(node(f"n-{z}", z) for z in "abc"), sts, namespace]
    store = store_from_objects(objects)
    store.kruise_start_ordinal = gate
    return store


@pytest.mark.parametrize(
    ("gate", "members", "start"), [(False, [0, 2, 3], 0), (True, [3, 4, 5], 3)]
)
def test_audit_json_says_the_start_the_members_have(
    gate: bool, members: list[int], start: int
) -> None:
    report = audit(_store(gate=gate))
    (web,) = report.sets
    assert [row.ordinal for row in web.rows] == members
    (data,) = render_json(report)["statefulsets"]
    assert data["start"] == start


@pytest.mark.parametrize(("gate", "start"), [(False, 0), (True, 3)])
def test_explain_json_says_the_start_the_members_have(
    gate: bool, start: int, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(gate=gate)
    assert run_explain(store, kind="asts", name="web", namespace="shop", output="json") == 0
    assert json.loads(capsys.readouterr().out)["start"] == start


@pytest.mark.parametrize(
    ("gate", "spec_start", "start"), [(False, 3, 0), (False, -3, 0), (True, 3, 3), (True, -3, -3)]
)
def test_a_malformed_sets_json_says_the_start_the_members_have(
    gate: bool, spec_start: int, start: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Malformed annotations leave audit and explain no policy to read the start from: both
    give the start the members have all the same, the one stszone counts them from (0 without
    the gate, whatever spec.ordinals.start says), next to the problem, never the raw field."""
    store = _store(gate=gate, start=spec_start, malformed=True)
    (data,) = render_json(audit(store))["statefulsets"]
    assert (data["start"], data["problem"] is not None) == (start, True)
    assert run_explain(store, kind="asts", name="web", namespace="shop", output="json") == 0
    explained = json.loads(capsys.readouterr().out)
    assert (explained["start"], explained["problem"] is not None) == (start, True)
