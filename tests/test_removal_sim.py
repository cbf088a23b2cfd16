"""Node removal as ``stszone audit`` lists it: the nodes a zone of a workload rests on stay."""

from __future__ import annotations

from tests import builders as b
from tests import guardref
from webhook.rules.audit import audit


def test_a_node_whose_ordinal_label_alone_holds_a_zone_is_not_removable() -> None:
    """db in node-ordinal mode, 1 replica, its template only for disk=ssd nodes: a0 (zone-a)
    carries its label 0 but no ssd, b0 (zone-b) is the ssd node. db-0 has no pod, so the
    guard counts it in a0's zone; without a0 it is in no zone the guard can tell, and zone-a
    is lost. a0 stays; b0, which nothing needs, may go."""
    mode = {
        "stszone.io/zones": "zone-a,zone-b,zone-c",
        "stszone.io/mode": "node-ordinal",
        "stszone.io/node-label": "example.io/node",
    }
    labelled = b.node("a0", "zone-a", labels={"example.io/node": "0"})
    ssd = b.node("b0", "zone-b", labels={"disk": "ssd"})
    sts = b.statefulset(replicas=1, annotations=mode, node_selector={"disk": "ssd"})
    report = audit(guardref.view([labelled, ssd, sts]))
    assert [s.held for s in report.sets] == [("zone-a",)]
    assert [s.held for s in audit(guardref.view([ssd, sts])).sets] == [()]
    assert report.removable == ("b0",)
    assert report.removable_together == ("b0",)
