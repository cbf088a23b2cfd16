"""The checks of ``bench/churn.py`` that read stszone's replicas -- memory (invariant 5) and, at
the end, the zone-risk gauges against ``stszone audit`` (invariant 5) -- and what a run
counts."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from tests.e2e.kube import Kubectl, wait_for
from tests.e2e.replicas import Process

ROOT = Path(__file__).resolve().parent.parent
#: Growth of a replica's RSS over its first plateau that breaks invariant 5.
RSS_GROWTH = 0.15
LAST_PASS = "stszone_zone_risk_last_pass_timestamp_seconds"
#: One set's gauges, in the order of :func:`gauges`; None for a series not exported.
Figure = tuple[float | None, ...]


class Broken(Exception):
    """An invariant did not hold."""

    def __init__(self, invariant: int, detail: str, objects: Any = None) -> None:
        super().__init__(f"invariant {invariant}: {detail}")
        self.invariant, self.detail, self.objects = invariant, detail, objects


@dataclass
class Watched:
    """One process's memory: its first plateau (the highest RSS in the ``plateau`` seconds
    after ``warmup`` seconds of life), then every later sample within ``RSS_GROWTH`` of it."""

    name: str
    born: float = field(default_factory=time.monotonic)
    plateau: int = 0
    highest: int = 0
    checked: int = 0

    def sample(self, rss: int, *, warmup: float, plateau: float) -> None:
        age = time.monotonic() - self.born
        if age < warmup:
            return
        if age < warmup + plateau or not self.plateau:
            self.plateau = max(self.plateau, rss)
            return
        self.checked += 1
        self.highest = max(self.highest, rss)
        if rss > self.plateau * (1 + RSS_GROWTH):
            raise Broken(5, f"{self.name}: RSS {rss} B after {age:.0f} s, plateau {self.plateau} B")

    def summary(self) -> dict[str, Any]:
        mib = 2**20
        return {
            "name": self.name,
            "lived_s": round(time.monotonic() - self.born),
            "plateau_mib": round(self.plateau / mib, 1),
            "highest_after_mib": round(self.highest / mib, 1),
            "samples_checked": self.checked,
        }


def gauges_agree(replicas: list[Process], *, work: Kubectl, zones: tuple[str, ...]) -> None:
    """Invariant 5, the end: each replica's zone-risk gauges are ``stszone audit``'s, once
    all have refreshed them after the audit's list (figures made meanwhile may differ)."""
    last: tuple[Any, Any] = ({}, [])
    for _ in range(30):
        listed = time.time()
        audited = audit(work, zones)
        for process in replicas:
            wait_for(
                f"a zone-risk pass of {process.name}",
                partial(_refreshed_after, process, listed),
                timeout=60,
                interval=0.5,
            )
        found = [gauges(process, work.namespace or "") for process in replicas]
        if all(g == audited for g in found):
            return
        last = (audited, found)
        time.sleep(1)
    raise Broken(5, f"gauges {last[1]} disagree with audit {last[0]}")


def audit(work: Kubectl, zones: tuple[str, ...]) -> dict[str, Figure]:
    """Per set of the namespace, from ``stszone audit -o json``: what the gauges say."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "audit",
            "--kubeconfig",
            work.kubeconfig,
            "-n",
            work.namespace or "",
            "--zones",
            ",".join(zones),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(f"stszone audit exited {done.returncode}: {done.stderr}")
    return figures(json.loads(done.stdout))


def figures(report: dict[str, Any]) -> dict[str, Figure]:
    """Per set of an ``stszone audit -o json`` report, the gauges it implies, None where a set
    exports no sample (docs/metrics.md): a set being deleted or with malformed annotations
    exports ``replicas`` alone, a set whose pod template is skipped no ``zones`` and no
    ``zones_held``, and a set no count keeps whole no ``lowest_safe_replicas``."""
    found: dict[str, Figure] = {}
    for s in report["statefulsets"]:
        replicas = float(s["replicas"])
        if s["problem"] or s["deleting"]:
            found[s["name"]] = (replicas, None, None, None, None, None)
            continue
        unknown = sum(r["status"] == "unknown" for r in s["ordinals"])
        listed = None if s["skipped"] else float(len(set(s["zones"])))
        held = None if s["skipped"] else float(len(set(s["zones"]) & set(s["zonesHeld"])))
        lowest = s["lowestSafeReplicas"]
        found[s["name"]] = (
            replicas, listed, held, float(s["misplaced"]),
            float(unknown), None if lowest is None else float(lowest),
        )  # fmt: skip
    return found


def gauges(process: Process, namespace: str) -> dict[str, Figure]:
    """Per set of ``namespace``, the zone-risk gauges of one replica, None for a series it does
    not export: an absent sample is not a 0 (a Prometheus alert reads it as no data)."""
    families = (
        "replicas",
        "zones",
        "zones_held",
        "misplaced_pods",
        "unknown_zone_ordinals",
        "lowest_safe_replicas",
    )
    read = [process.labelled(f"stszone_statefulset_{f}") for f in families]
    selector = f'namespace="{namespace}"'
    found: dict[str, Figure] = {}
    for labels in read[0]:
        if selector in labels:
            name = labels.split('statefulset="', 1)[1].split('"', 1)[0]
            found[name] = tuple(r.get(labels) for r in read)
    return found


def _refreshed_after(process: Process, moment: float) -> bool:
    return process.metrics().get(LAST_PASS, 0.0) > moment


@dataclass
class Figures:
    steps: Counter[str] = field(default_factory=Counter)
    checks: Counter[str] = field(default_factory=Counter)
    scale_downs: Counter[str] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)
    kill_failures: float = 0.0
    restarts: list[dict[str, Any]] = field(default_factory=list)
    instances: list[dict[str, Any]] = field(default_factory=list)
    step_errors: list[str] = field(default_factory=list)


def summarise(churn: Any, run_id: str, args: argparse.Namespace) -> dict[str, Any]:
    """The run's figures as JSON (``churn``: the run, :class:`bench.churn.Churn`)."""
    f = churn.figures
    return {
        "run": run_id,
        "seed": args.seed,
        "minutes": args.minutes,
        "steps": churn.step_no,
        "step_kinds": dict(f.steps),
        "webhook_calls": {
            "admitted": churn.counts.admitted.total,
            "rejected": churn.counts.rejected.total,
        },
        "failed_webhook_calls": churn.counts.errors.total,
        "failed_during_sigkill": f.kill_failures,
        "scale_downs": dict(f.scale_downs),
        "refusals": dict(f.refusals),
        "invariant_checks": dict(f.checks),
        "restarts": f.restarts,
        "step_errors": f.step_errors,
        "memory": [*f.instances, *(w.summary() for w in churn.watched)],
        "events": churn.events,
        "load": {
            "statefulsets": churn.load.cycles if churn.load else 0,
            "dry_runs": churn.load.dry_runs if churn.load else 0,
            "errors": len(churn.load.errors) if churn.load else 0,
        },
    }
