"""A misspelt ``stszone.io/`` annotation key (``stszone.io/alow-zone-loss``) on a set, an
Advanced StatefulSet or a KafkaNodePool. The view's records keep the names of such keys, so
``stszone audit`` and ``stszone explain`` name them, as an UPDATE of the workload does. What is
allowed stays as it is: a ``/scale`` is judged and a new pod placed on the other annotations,
and the audit's exit status does not turn on the key.

Nodes na, nb, nc in zones a, b, c (n-zone-a.. for the pool); each workload lists a, b, c.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from tests import poolsim as sim
from tests.kruiseobjects import annotated, recorded_items
from webhook.cli import main
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.wire import review

MISSPELT = "stszone.io/alow-zone-loss"
ANNOTATIONS = {"stszone.io/zones": "a,b,c", MISSPELT: "true"}
NODES = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c")]


def _apps() -> list[dict[str, Any]]:
    sts = b.statefulset(replicas=3, annotations=ANNOTATIONS)
    pods = [b.sts_pod(ordinal=o, node=n) for o, n in enumerate(["na", "nb", "nc"])]
    return [*NODES, sts, *pods]


def _kruise() -> list[dict[str, Any]]:
    return [*NODES, annotated(recorded_items("statefulsets.v1beta1.json")[0], ANNOTATIONS)]


def _written(tmp_path: Path, items: list[dict[str, Any]]) -> str:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    return str(path)


def _said(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The printed lines that name the misspelt key."""
    return [line for line in capsys.readouterr().out.splitlines() if MISSPELT in line]


@pytest.mark.parametrize(
    ("items", "target", "namespace"),
    [(_apps, "sts/db", "ns"), (_kruise, "asts/web", "shop")],
)
def test_audit_and_explain_name_a_misspelt_key_of_a_set(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    items: Any,
    target: str,
    namespace: str,
) -> None:
    """A warning line each; the audit exits 0 (the key is no problem of the set's placement)."""
    path = _written(tmp_path, items())
    assert main(["audit", "--cluster", path]) == 0
    (line,) = _said(capsys)
    assert line.startswith("  warning: ") and "unknown annotation" in line, line
    assert main(["audit", "--cluster", path, "-o", "json"]) == 0
    (audited,) = json.loads(capsys.readouterr().out)["statefulsets"]
    assert any(MISSPELT in w for w in audited["warnings"]), audited["warnings"]
    assert main(["explain", "--cluster", path, "-n", namespace, target]) == 0
    assert len(_said(capsys)) == 1


def test_explain_of_a_pod_names_a_misspelt_key_of_its_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _written(tmp_path, _apps())
    assert main(["explain", "--cluster", path, "db-0"]) == 0
    assert len(_said(capsys)) == 1


def _pool_items() -> list[dict[str, Any]]:
    pool = sim.pool_object("pool", replicas=3, node_ids=[0, 1, 2], annotations={MISSPELT: "true"})
    return [*(b.node(f"n-{z}", z) for z in sim.ZONES), pool]


def test_audit_and_explain_name_a_misspelt_key_of_a_pool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pool's audit section and its explanation (of the pool, and of a broker's pod) say it
    too; the audit still exits 0, and the JSON carries it."""
    path = _written(tmp_path, _pool_items())
    assert main(["audit", "--cluster", path]) == 0
    (line,) = _said(capsys)
    assert line.startswith("  warning: pool: unknown annotation"), line
    assert main(["audit", "--cluster", path, "-o", "json"]) == 0
    (pool,) = json.loads(capsys.readouterr().out)["kafkaNodePools"]
    assert any(MISSPELT in w for w in pool["warnings"]), pool
    assert main(["explain", "--cluster", path, "-n", "kafka", "knp/pool"]) == 0
    assert len(_said(capsys)) == 1
    assert main(["explain", "--cluster", path, "-n", "kafka", "knp/pool", "-o", "json"]) == 0
    explained = json.loads(capsys.readouterr().out)
    assert any(MISSPELT in w for w in explained["warnings"]), explained
    assert main(["explain", "--cluster", path, "-n", "kafka", "pod/my-cluster-pool-1"]) == 0
    assert len(_said(capsys)) == 1


def test_a_misspelt_key_changes_nothing_allowed() -> None:
    """alow-zone-loss forces nothing: /scale 3 -> 2 of db still drops c and is refused, as
    without the key; a new pod is still placed on the set's zones."""
    for written in (ANNOTATIONS, {"stszone.io/zones": "a,b,c"}):
        items = _apps()
        items[len(NODES)] = b.statefulset(replicas=3, annotations=written)
        store = store_from_objects(items)
        body = b.review(b.scale(replicas=2), operation="UPDATE", old=b.scale(replicas=3))
        refused = review.answer(
            "validate", review.from_dict(body), store=store, defaults=Defaults()
        )
        assert (refused.allowed, refused.reason) == (False, "ZoneLoss"), refused.message
        pod = copy.deepcopy(b.sts_pod(ordinal=3))
        placed = review.chain(review.from_dict(b.review(pod)), store=store, defaults=Defaults())
        assert placed.allowed, placed.message
        assert placed.edited["metadata"]["annotations"]["stszone.io/zone"] == "a"
