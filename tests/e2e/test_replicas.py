"""Two replicas behind one Service address, restarted under load, on a real control plane.

Two ``stszone serve --manage-certs`` processes share the Service's ClusterIP:443
(``--reuse-port``: the lab has no kube-proxy, and a listener that is closed, or not yet open,
gets no connection, as an endpoint that is not ready gets none), with a token of stszone's
ServiceAccount bound to the rendered RBAC, while :class:`~tests.e2e.replicas.Load` creates pods.

- A rolling restart (SIGTERM each replica in turn, each Ready again before the next) costs no
  admission: no FailedCreate event, no ``calling_webhook_error`` in the API server's metrics, no
  failed dry run.
- A SIGKILL of one replica costs only the calls it cut: every call of the load that failed,
  and every pod create the StatefulSet controller recorded as failed (FailedCreate), is a
  webhook call whose connection went with the killed replica, made between the signal and the
  replacement's readiness; together they are every call the API server counted as failed
  (``calling_webhook_error``: it retries no webhook call, so each is one request failed, which
  the load records and the controller records and makes again).
  Once it is back every set converges, each pod in its ordinal's rule zone; the seconds from
  the kill until then are measured.

What happened is printed at the end (``pytest -s``) and written to ``replicas-e2e.json``.
"""

from __future__ import annotations

import json
import secrets
import signal
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import certslab, replicas
from tests.e2e.kube import ZONE_KEY, Kubectl, wait_for, workload
from tests.e2e.replicas import IMAGE, Load, Process
from tests.e2e.server import ZONE_RISK_INTERVAL

#: Seconds of load before, between and after the restarts.
SETTLE = 8.0


@dataclass
class Pair:
    """The installed lab objects and the two running replicas (replaced when restarted)."""

    lab: certslab.Lab
    work: Kubectl
    zones: tuple[str, ...]
    processes: list[Process]

    def stop(self) -> None:
        for process in self.processes:
            process.stop()


@pytest.fixture(scope="module")
def pair(kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    run = secrets.token_hex(3)
    tmp = tmp_path_factory.mktemp("replicas")
    zones = tuple(
        sorted({n["metadata"]["labels"][ZONE_KEY] for n in kubectl.get("nodes")["items"]})
    )
    with ExitStack() as cleanup:
        lab = certslab.install(kubectl, run=run, cleanup=cleanup, prefix="replicas")
        kubeconfig = certslab.token_kubeconfig(kubectl, lab, tmp / "stszone.kubeconfig")
        # Zone-risk gauges refreshed often: they show when a replica's view has a new set.
        risk = ("--zone-risk-interval", str(ZONE_RISK_INTERVAL))
        processes = [
            replicas.launch(
                name, lab, kubeconfig=kubeconfig, zones=",".join(zones), work=tmp, extra=risk
            )
            for name in (f"replica-a-{run}", f"replica-b-{run}")
        ]
        found = Pair(lab, kubectl.within(lab.workload), zones, processes)
        cleanup.callback(found.stop)
        certslab.register(kubectl, lab, cleanup=cleanup)  # deleted first on the way out
        for process in processes:
            process.wait_ready()
        yield found


def _under_load(
    pair: Pair, kubectl: Kubectl, act: Any, *, prefix: str
) -> tuple[dict[str, Any], Load]:
    """Run ``act()`` between two stretches of load; its figures with the failures counted, and
    the load (its failures, with when they happened)."""
    errors_before = replicas.apiserver_webhook_errors(kubectl)
    load = Load(pair.work, prefix=prefix)
    load.start()
    try:
        time.sleep(SETTLE)
        figures: dict[str, Any] = act()
        time.sleep(SETTLE)
    finally:
        load.finish()
    figures.update(
        cycles=load.cycles,
        dry_runs=load.dry_runs,
        dry_run_errors=load.dry_run_errors,
        load_errors=load.errors,
        failed_creates=[e for e in replicas.failed_creates(pair.work) if f"{prefix}-" in e],
        calling_webhook_errors=replicas.apiserver_webhook_errors(kubectl) - errors_before,
        answered={p.name: p.answered() for p in pair.processes},
    )
    return figures, load


def _report(name: str, figures: dict[str, Any]) -> None:
    print(json.dumps({name: figures}, indent=2))


def test_a_rolling_restart_under_load_fails_no_admission(
    pair: Pair, kubectl: Kubectl, tmp_path: Path
) -> None:
    def roll() -> dict[str, Any]:
        seconds, before = {}, {}
        # The API server's few keep-alive connections may all have landed on one replica:
        # that one goes first, so that its restart moves them to the other.
        busiest_first = sorted(
            range(len(pair.processes)), key=lambda i: -pair.processes[i].answered()
        )
        for index in busiest_first:
            process = pair.processes[index]
            before[process.name] = process.answered()
            pair.processes[index], took = process.restart(signal.SIGTERM)
            seconds[process.name] = round(took, 1)
            time.sleep(SETTLE / 2)
        return {"signal_to_ready_s": seconds, "answered_before_sigterm": before}

    figures, _ = _under_load(pair, kubectl, roll, prefix="roll")
    _report("rolling restart", figures)
    (tmp_path / "replicas-e2e.json").write_text(json.dumps(figures, indent=2))
    assert figures["failed_creates"] == []
    assert figures["calling_webhook_errors"] == 0
    assert figures["dry_run_errors"] == []
    assert figures["load_errors"] == []
    assert figures["cycles"] >= 3 and figures["dry_runs"] >= 20
    # Each replica was serving when it was signalled: the API server's connections moved
    # (they stay on the replica they were made to, so a restarted one may idle afterwards).
    assert all(n > 0 for n in figures["answered_before_sigterm"].values()), figures


def _misplaced(work: Kubectl, zones: tuple[str, ...], name: str, replicas_: int) -> list[str]:
    """Why set ``name`` has not converged: missing or unbound pods, pods off their rule zone."""
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in work.get("nodes")["items"]}
    pods = work.get("pods", "-l", f"app={name}")["items"]
    problems = [f"{name}: {len(pods)} of {replicas_} pods"] if len(pods) != replicas_ else []
    for pod in pods:
        meta = pod["metadata"]
        ordinal = int(meta["labels"]["apps.kubernetes.io/pod-index"])
        node = pod["spec"].get("nodeName")
        zone = nodes.get(node or "", {}).get(ZONE_KEY)
        if zone != zones[ordinal % len(zones)]:
            problems.append(f"{meta['name']} on {node} in {zone}")
    return problems


def _in_view(process: Process, namespace: str, names: list[str]) -> bool:
    """Whether ``process`` reports the zone risk of every set of ``names``: its view has them."""
    held = process.labelled("stszone_statefulset_replicas")
    return all(
        any(f'namespace="{namespace}"' in key and f'statefulset="{name}"' in key for key in held)
        for name in names
    )


def test_a_killed_replica_costs_only_its_calls_and_every_set_converges(
    pair: Pair, kubectl: Kubectl
) -> None:
    sets = [f"scaled-{i}" for i in range(3)]
    for name in sets:
        pair.work.create(workload("StatefulSet", name, image=IMAGE, replicas=0, labels={}))
    # The sets reach both views before their pods are asked for: a pod of a set a replica has
    # not seen is refused (StatefulSetNotYetSeen), a FailedCreate the kill did not cause.
    wait_for(
        "both replicas' views to hold the sets",
        lambda: all(_in_view(p, pair.lab.workload, sets) for p in pair.processes),
        timeout=60,
        interval=0.5,
    )

    window: dict[str, float] = {}
    #: The same moments as Unix time, for the controller's Events.
    wall: dict[str, float] = {}

    def kill() -> dict[str, Any]:
        # The replica the API server's connections are on (they stay where they were made).
        busy = max((0, 1), key=lambda i: pair.processes[i].answered())
        answered = pair.processes[busy].answered()
        killed = time.monotonic()
        for name in sets:  # pods being created as the replica dies
            pair.work.run("scale", "statefulset", name, "--replicas=6")
        window["signalled"], wall["signalled"] = time.monotonic(), time.time()
        pair.processes[busy], took = pair.processes[busy].restart(signal.SIGKILL)
        window["replaced"], wall["replaced"] = time.monotonic(), time.time()

        def converged() -> bool:
            return not any(_misplaced(pair.work, pair.zones, name, 6) for name in sets)

        wait_for("every set to converge, placed by the rule", converged, timeout=180)
        return {
            "killed": pair.processes[busy].name,
            "answered_before_sigkill": answered,
            "signal_to_ready_s": round(took, 1),
            "kill_to_converged_s": round(time.monotonic() - killed, 1),
        }

    figures, load = _under_load(pair, kubectl, kill, prefix="sigkill")
    figures["failed_creates"] += [e for e in replicas.failed_creates(pair.work) if "scaled-" in e]
    figures["cut_by_the_kill"] = sum(f.cut_by_kill(**window) for f in load.failures)
    _report("SIGKILL", figures)
    problems = [p for name in sets for p in _misplaced(pair.work, pair.zones, name, 6)]
    assert problems == []
    assert figures["answered_before_sigkill"] > 0
    # A call the API server made on the killed replica's connections fails (Failure.cut_by_kill
    # says which: they are the cost a SIGKILL may have). Any other failure of the load, of its
    # cycles or its dry runs, is not.
    assert [f.message for f in load.failures if not f.cut_by_kill(**window)] == []
    # The load's sets converge too: each cycle ended with its 6 pods.
    assert figures["cycles"] >= 3

    failed: float = figures["calling_webhook_errors"]
    calls = len(load.failures)  # each a webhook call cut by the kill, as just checked

    def accounted() -> bool:
        """Whether the controller's failed creates recorded so far, each cut by the kill, and
        the load's failed calls are every call the API server failed (more would be a call
        counted twice)."""
        found = replicas.failed_create_events(pair.work)
        creates = [c for c in found if c.statefulset.startswith(("sigkill-", "scaled-"))]
        assert [c.message for c in creates if not c.cut_by_kill(**wall)] == [], wall
        counted = sum(c.count for c in creates) + calls
        assert counted <= failed, (
            f"{counted} failed calls seen, {failed:g} counted by the API server"
        )
        return counted == failed

    # The controller records its Events in the background: waited for, not read once.
    try:
        wait_for(
            f"the failed pod creates and the load's {calls} failed calls to add up to the "
            f"{failed:g} the API server counted",
            accounted,
            timeout=60,
        )
    except AssertionError as err:
        events = replicas.failed_creates(pair.work)
        raise AssertionError(f"{err}; FailedCreate events: {events}") from None
