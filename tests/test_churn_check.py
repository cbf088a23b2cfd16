"""bench/churncheck.py's last check: each replica's zone-risk gauges equal ``stszone audit``'s
figures. Both sides are made here by stszone's own code (the gauges' exposition, the audit's
JSON) from one cluster, so the check must agree where they agree and see a replica that
exports a series audit has no figure for, or drops one it has."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any, cast

import pytest

from bench.churncheck import figures, gauges
from tests import builders as b
from tests.e2e.replicas import Process
from webhook.cli.audit import render_json
from webhook.cluster.clusterfile import store_from_objects
from webhook.model.store import Store
from webhook.rules.audit import audit
from webhook.rules.risk import RiskScan
from webhook.server.riskmetrics import ZoneRisk

NODES = [b.node(n, f"zone-{n[0]}") for n in ("a1", "b1", "c1")]


class Scraped(Process):
    """A replica whose /metrics answers ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__("replica", cast("subprocess.Popen[bytes]", None), "", Path())
        self.text = text

    def _scrape(self) -> str:
        return self.text


def _cluster(replicas: int, *, nodes: tuple[str, ...], **marks: Any) -> Store:
    """db over zone-a,b,c, its members on ``nodes``; ``annotations`` replaces its zone list,
    ``deleting`` gives it a deletionTimestamp."""
    sts = b.statefulset(
        "db", replicas=replicas, annotations=marks.get("annotations", {"stszone.io/zones":
                                                                       "zone-a,zone-b,zone-c"})
    )  # fmt: skip
    if marks.get("deleting"):
        sts["metadata"]["deletionTimestamp"] = "2026-12-07T12:00:00Z"
    pods = [b.sts_pod("db", i, node=node) for i, node in enumerate(nodes)]
    return store_from_objects([*NODES, sts, *pods])


CLUSTERS = {
    "whole": lambda: _cluster(3, nodes=("a1", "b1", "c1")),
    "being deleted": lambda: _cluster(3, nodes=("a1", "b1", "c1"), deleting=True),
    "malformed": lambda: _cluster(3, nodes=("a1", "b1", "c1"),
                                  annotations={"stszone.io/mode": "bogus"}),
    "stopped": lambda: _cluster(0, nodes=()),
    "in one zone": lambda: _cluster(2, nodes=("a1", "a1")),
}  # fmt: skip


def _sides(store: Store) -> tuple[str, dict[str, Any]]:
    """(the exposition of a replica's zone-risk gauges, the audit's JSON) of ``store``."""
    risk = ZoneRisk(RiskScan(store), ready=lambda: True, interval=30, pause=0)
    asyncio.run(risk.refresh())
    return risk.exposition().decode(), render_json(audit(store))


@pytest.mark.parametrize("name", CLUSTERS)
def test_the_gauges_of_a_replica_agree_with_audit(name: str) -> None:
    text, report = _sides(CLUSTERS[name]())
    assert gauges(Scraped(text), "ns") == figures(report)


def _lowest(text: str) -> list[str]:
    return [line for line in text.splitlines() if "lowest_safe_replicas{" in line]


def test_a_replica_that_drops_a_figure_audit_has_disagrees() -> None:
    """A stopped set's lowest safe count is 0, a figure: a replica without the series is wrong
    (an alert on it would read no data), not equal to one saying 0."""
    text, report = _sides(CLUSTERS["stopped"]())
    (line,) = _lowest(text)
    assert line.endswith(" 0.0")
    dropped = "\n".join(x for x in text.splitlines() if x != line) + "\n"
    assert gauges(Scraped(dropped), "ns") != figures(report)


def test_a_replica_that_says_a_set_being_deleted_is_live_disagrees() -> None:
    """A set being deleted exports its replicas alone; a replica that still exports its zones
    (it missed the deletionTimestamp) is wrong, though audit knows how many zones it lists."""
    _, report = _sides(CLUSTERS["being deleted"]())
    live, _ = _sides(CLUSTERS["whole"]())
    assert gauges(Scraped(live), "ns") != figures(report)


def test_the_gauges_of_a_set_whose_pod_template_is_skipped_agree_with_audit() -> None:
    """shop/db's pod template is labelled stszone.io/skip=true: a replica exports no zones and
    no zones held for it (stszone places none of its pods), and audit's JSON says the set is
    skipped, so the check expects neither, though audit lists its zones and those held."""
    text, report = _sides(store_from_objects(b.skipped_template_cluster()))
    (db,) = report["statefulsets"]
    assert db["skipped"] is True
    assert (db["zones"], db["zonesHeld"]) == (["zone-a", "zone-b", "zone-c"], ["zone-a", "zone-c"])
    assert figures(report) == {"db": (3.0, None, None, 0.0, 0.0, 3.0)}
    assert gauges(Scraped(text), "shop") == figures(report)
