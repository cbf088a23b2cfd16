"""The rebalance executor's test rig: the fake API server, a fake clock, and a stand-in for the
rest of Kubernetes (:class:`Controller`).

Once an eviction has deleted a pod, the controller brings it back -- new uid, Ready, on a node
of the zone the webhook would pick -- at the executor's next sleep. The clock and the sleep are
fake: waiting costs nothing and no assertion depends on the wall clock. :func:`open_rig` serves
one rig per test; a test module makes it a fixture.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests import rebalancing as r
from tests.fakeapi import FakeApi
from tests.fakestate import RESOURCES
from tests.kubeconfig import write_kubeconfig
from webhook.cluster.api import Api
from webhook.cluster.credsource import load_credentials
from webhook.cluster.rebalance import Event, Rebalancer, Timing
from webhook.cluster.snapshot import from_objects, list_cluster
from webhook.config import Settings
from webhook.rules.rebalance import chosen, plan
from webhook.rules.rebalance_plan import Plan

TOKEN = "rebalance-token"
JSON = dict[str, Any]


@dataclass
class Clock:
    """Fake time: ``sleep`` advances it at once and lets the controller act."""

    now: float = 0.0
    slept: list[float] = field(default_factory=list)
    ticks: list[Callable[[], None]] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        for tick in self.ticks:
            tick()
        await asyncio.sleep(0)


@dataclass
class Controller:
    """StatefulSet controller + webhook + scheduler + kubelet: an evicted pod comes back Ready
    in ``zone(ordinal)`` on the next tick; ``None`` from ``zone`` means it never comes back."""

    api: FakeApi
    zone: Callable[[int], str | None] = lambda ordinal: r.ZONES[ordinal % 3]
    pending: list[tuple[str, str]] = field(default_factory=list)
    #: Pods of the set present (not deleted) right after each eviction.
    present_after: list[int] = field(default_factory=list)
    generation: int = 0

    def evicted(self, namespace: str, name: str) -> None:
        self.present_after.append(len(self.api.objects.tables["pods"]))
        self.pending.append((namespace, name))

    def tick(self) -> None:
        for _, name in self.pending:
            ordinal = int(name.rpartition("-")[2])
            zone = self.zone(ordinal)
            if zone is None:
                continue
            self.generation += 1
            claims = self.api.objects.tables["persistentvolumeclaims"]
            for key in [k for k, v in claims.items() if b"deletionTimestamp" in v.body]:
                # pvc-protection lets go once the pod is gone; the controller makes a new one.
                self.api.delete("persistentvolumeclaims", key[1], namespace=key[0])
                fresh = r.claim(key[1], "")
                fresh["metadata"]["uid"] = f"uid-{key[1]}-new"
                self.api.put("persistentvolumeclaims", fresh)
            node = next(n for n, z in r.NODES.items() if z == zone)
            self.api.put("pods", self.remake(name, node, uid=f"{name}-new-{self.generation}"))
        self.pending = [p for p in self.pending if self.zone(int(p[1].rpartition("-")[2])) is None]

    def remake(self, name: str, node: str, *, uid: str) -> JSON:
        """The pod the set's controller makes again under ``name``, Ready on ``node``."""
        sts, _, ordinal = name.rpartition("-")
        return r.pod(int(ordinal), node, sts=sts, uid=uid)


@dataclass
class Rig:
    api: FakeApi
    client: Api
    clock: Clock
    controller: Controller
    kubeconfig: Path
    events: list[Event] = field(default_factory=list)

    async def plan(self, *, move_data: bool = False) -> Plan:
        snap = from_objects(await list_cluster(Settings(), api=self.client), namespaces_listed=True)
        sets = chosen(snap.store, excluded={"kube-system"})
        return plan(snap.store, snap.state, sets=sets, move_data=move_data)

    def rebalancer(self, *, timeout: float = 60.0) -> Rebalancer:
        return Rebalancer(
            self.client,
            timing=Timing(timeout=timeout, poll=1.0, backoff_initial=1.0, backoff_cap=8.0),
            report=self.events.append,
            sleep=self.clock.sleep,
            clock=self.clock,
            rand=lambda: 0.0,
        )

    def load(self, objects: list[JSON]) -> None:
        resource = {
            "Namespace": "namespaces",
            "Node": "nodes",
            "StatefulSet": "statefulsets",
            "Pod": "pods",
            "PersistentVolumeClaim": "persistentvolumeclaims",
            "PersistentVolume": "persistentvolumes",
        }
        for obj in objects:
            kruise = str(obj.get("apiVersion", "")).startswith("apps.kruise.io/")
            self.api.put("kruisesets" if kruise else resource[obj["kind"]], obj)

    def where(self) -> dict[str, tuple[str, str]]:
        """pod -> (uid, zone) now."""
        found = {}
        for stored in self.api.objects.tables["pods"].values():
            pod = json.loads(stored.body)
            node = pod["spec"].get("nodeName")
            found[pod["metadata"]["name"]] = (pod["metadata"]["uid"], r.NODES.get(node, "-"))
        return found

    def interrupted_on(self, kind: str) -> Rebalancer:
        """A rebalancer whose stop is set (Ctrl-C) when it reports an event of ``kind``."""
        executor = self.rebalancer()

        def report(event: Event) -> None:
            self.events.append(event)
            if event.kind == kind:
                executor.stop.set()

        executor.report = report
        return executor

    def evictions(self) -> list[tuple[str, bool]]:
        """(pod, dry run) of every eviction asked for, in order."""
        return [(s.name, s.query.get("dryRun") == "All") for s in self.api.seen("pods", "evict")]


def hold_available(
    rig: Rig, *, table: str, name: str, replicas: int, after: float | None
) -> list[float]:
    """Play the set's controller under ``minReadySeconds``: a pod re-created Ready counts as
    available only ``after`` seconds later (None: never), and ``status.availableReplicas``
    says so, one short of ``replicas`` meanwhile. The times pods came back, as they do."""
    came_back: list[float] = []
    plays = rig.controller

    def status(available: int) -> None:
        current = json.loads(rig.api.objects.tables[table][(r.NAMESPACE, name)].body)
        current["status"]["availableReplicas"] = available
        rig.api.put(table, current)

    def tick() -> None:
        if plays.pending:  # the controller re-creates it Ready on this tick
            came_back.append(rig.clock.now)
            status(replicas - 1)
        elif came_back and after is not None and rig.clock.now >= came_back[-1] + after:
            status(replicas)

    rig.clock.ticks.insert(0, tick)
    return came_back


@contextlib.asynccontextmanager
async def open_rig(
    tmp_path: Path, *, controller: type[Controller] | None = None
) -> AsyncIterator[Rig]:
    """A rig on a fresh fake API server (``controller``: another stand-in class)."""
    async with FakeApi(token=TOKEN, fixtures=False) as fake:
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", server=fake.url, token=TOKEN, ca=fake.ca
        )
        clock = Clock()
        plays = (controller or Controller)(fake)
        fake.on_evict.append(plays.evicted)
        clock.ticks.append(plays.tick)
        async with Api(load_credentials(str(kubeconfig))) as client:
            yield Rig(fake, client, clock, plays, kubeconfig)


def asked(api: FakeApi) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) of every request ``api`` received, as RBAC names them."""
    found = set()
    for seen in api.requests:
        if seen.verb == "evict":
            found.add(("", "pods/eviction", "create"))
            continue
        path = RESOURCES[seen.resource][0]
        group = "" if path.startswith("/api/v1") else path.split("/")[2]
        found.add((group, path.rpartition("/")[2], seen.verb))
    return found
