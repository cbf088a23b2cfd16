"""The Events a churn run made stszone write, read from the cluster and from the replicas.

The API server holds the truth: every ``events.k8s.io/v1`` Event of the run's namespace whose
``reportingController`` is stszone's, with its ``series`` (repeats folded into one object). Each
object is one create; each series is at most a few patches (client-go's rhythm: the first
repeat, then every 6 quiet minutes or 30 minutes). The replicas' own counters
(``stszone_events_written_total`` and the outbox's drops) add what their processes saw since they
last started. "Never flooded": the busiest 10 seconds of creates, next to the admissions answered.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

from tests.e2e.kube import Kubectl
from tests.e2e.replicas import Process

REPORTER = "stszone.io/webhook"
WINDOW = 10.0


def _when(event: dict[str, Any]) -> float | None:
    stamp = event.get("eventTime") or event.get("deprecatedFirstTimestamp")
    if not isinstance(stamp, str):
        return None
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def figures(work: Kubectl, replicas: list[Process], *, seconds: float) -> dict[str, Any]:
    """Events written during a run of ``seconds``: objects, occurrences, rates, reasons."""
    items = work.get("events.events.k8s.io")["items"]
    mine = [e for e in items if e.get("reportingController") == REPORTER]
    occurrences = sum((e.get("series") or {}).get("count", 1) for e in mine)
    times = sorted(t for e in mine if (t := _when(e)) is not None)
    peak = 0
    for i, start in enumerate(times):
        peak = max(peak, sum(1 for t in times[i:] if t < start + WINDOW))
    written: Counter[str] = Counter()
    dropped = 0.0
    for process in replicas:
        try:
            for labels, value in process.labelled("stszone_events_written_total").items():
                written[labels.split('write="', 1)[1].split('"', 1)[0]] += int(value)
            dropped += process.metrics().get("stszone_events_dropped_total", 0.0)
        except OSError:
            continue  # a replica stopped at the end: its figures went with it
    answered = sum(p.answered() for p in replicas if p.ready())
    return {
        "objects": len(mine),
        "occurrences": occurrences,
        "objects_per_second": round(len(mine) / seconds, 4),
        "occurrences_per_second": round(occurrences / seconds, 4),
        f"peak_creates_in_{WINDOW:g}s": peak,
        "by_reason": dict(Counter(e["reason"] for e in mine)),
        "writes_by_live_replicas": dict(written),
        "dropped_by_live_replicas": dropped,
        "admissions_answered_by_live_replicas": answered,
    }
