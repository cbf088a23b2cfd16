"""Events written by stszone's recorder to a real API server: accepted as ``events.k8s.io/v1``
validates them, folded into a series, shown by ``kubectl describe`` on the StatefulSet."""

from __future__ import annotations

import asyncio
import json
import time

from tests.e2e.kube import RUN_LABEL, Cluster, workload
from webhook.cluster.api import Api
from webhook.cluster.correlator import Correlator
from webhook.cluster.credsource import load_credentials
from webhook.cluster.events import ApiSink, EventWriter
from webhook.model import notices
from webhook.model.outbox import Outbox


async def _record(kubeconfig: str, posts: list[tuple[notices.Notice, bool]]) -> None:
    """Post each (notice, dry run) and write, one round each; then the series' final count."""
    async with Api(load_credentials(kubeconfig)) as api:
        outbox = Outbox()
        writer = EventWriter(outbox, sink=ApiSink(api), correlator=Correlator(instance="e2e"))
        for notice, dry_run in posts:
            outbox.post([notice], dry_run=dry_run)
            await writer.round(now=time.time())
        await writer.round(now=time.time() + 361, tick=True)
        assert writer.stats().failed == 0, writer.stats()


def test_events_are_accepted_and_described_on_the_statefulset(cluster: Cluster) -> None:
    name = "noted"
    cluster.kubectl.create(
        workload(
            "StatefulSet", name, image=cluster.image, replicas=0, labels={RUN_LABEL: cluster.run}
        )
    )
    uid = cluster.kubectl.get("statefulset", name)["metadata"]["uid"]
    sts = notices.statefulset(cluster.namespace, name, uid=uid)
    refused = notices.scale_down_refused(
        sts,
        note=f"scale-down of {name} from 6 to 3 would drop zone zone-c (ordinal 3 is its only pod)",
    )
    placed = notices.placed_with_data(
        sts,
        pod=notices.pod(cluster.namespace, f"{name}-3"),
        note=f"{name}-3 follows volume pv-3 (claim data-{name}-3) to zone-c; the rule says zone-a",
    )
    dry = notices.members_moved(sts, note="a dry run's notice: never written")
    posts = [(placed, False), (refused, False), (dry, True), (refused, False), (refused, False)]
    asyncio.run(_record(cluster.kubectl.kubeconfig, posts))
    events = cluster.kubectl.get("events.events.k8s.io")["items"]
    # Other tests of the namespace run the webhook, which writes Events on their own sets.
    mine = {
        e["reason"]: e
        for e in events
        if e["reportingController"] == "stszone.io/webhook" and e["regarding"]["uid"] == uid
    }
    assert set(mine) == {"PlacedWithData", "ScaleDownRefused"}, json.dumps(events)
    assert mine["ScaleDownRefused"]["series"]["count"] == 3
    assert mine["ScaleDownRefused"]["regarding"]["uid"] == uid
    assert mine["PlacedWithData"]["related"]["name"] == f"{name}-3"
    described = cluster.kubectl.run("describe", "statefulset", name)
    assert "Warning  ScaleDownRefused" in described and "(x3 over" in described, described
    assert "Normal   PlacedWithData" in described and "stszone.io/webhook" in described, described
    selected = cluster.kubectl.get(
        "events",
        "--field-selector",
        f"reportingComponent=stszone.io/webhook,type=Warning,involvedObject.uid={uid}",
    )["items"]
    assert [e["reason"] for e in selected] == ["ScaleDownRefused"]
