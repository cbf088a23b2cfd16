"""What ``bench/churn.py`` does to the lab, and reads from it.

The lab is ``../shared/lab`` (its folder ``$STSZONE_LAB``, else ``~/stszone-lab``; its scripts
``$STSZONE_LAB_SCRIPTS``, else ``../shared/lab`` beside the repository, else the folder):
fake nodes ``lab-node-1..6`` in zones zone-a, zone-b, zone-c round robin (``nodes.sh``), a fake
kubelet, and a kube-apiserver started by ``up.sh`` with its pid in ``run/kube-apiserver.pid``.
Everything changed here is put back by :meth:`Lab.restore`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from bench.churnfacts import Obj, Snapshot
from tests.e2e.kube import Kubectl, KubectlError, wait_for
from tests.e2e.replicas import webhook_counts

ROOT = Path(__file__).resolve().parent.parent
NODE_PREFIX: Final = "lab-node-"
NODES: Final = 6


def lab_folder() -> Path:
    return Path(os.environ.get("STSZONE_LAB", str(Path.home() / "stszone-lab")))


def lab_scripts() -> Path:
    """The folder of ``up.sh``, ``nodes.sh`` and ``fake-kubelet.sh``."""
    for candidate in (
        os.environ.get("STSZONE_LAB_SCRIPTS"),
        ROOT.parent / "shared" / "lab",
        lab_folder(),
    ):
        if candidate and (Path(candidate) / "nodes.sh").is_file():
            return Path(candidate)
    raise SystemExit("no lab scripts (nodes.sh, up.sh): set STSZONE_LAB_SCRIPTS")


@dataclass
class Lab:
    """The lab's scripts and folder, and kubectl on its cluster."""

    kubectl: Kubectl
    folder: Path = field(default_factory=lab_folder)
    scripts: Path = field(default_factory=lab_scripts)

    def script(self, name: str, *args: str) -> None:
        done = subprocess.run(
            [str(self.scripts / name), *args],
            env={**os.environ, "LAB": str(self.folder)},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{name} {' '.join(args)} exited {done.returncode}: {done.stderr}")

    def nodes(self) -> list[Obj]:
        items: list[Obj] = self.kubectl.get("nodes")["items"]
        return [n for n in items if n["metadata"]["name"].startswith(NODE_PREFIX)]

    def readyz(self) -> bool:
        try:
            return self.kubectl.run("get", "--raw", "/readyz").strip() == "ok"
        except (KubectlError, subprocess.TimeoutExpired):
            return False

    def restart_apiserver(self) -> float:
        """Kill kube-apiserver (its pid file; SIGKILL, as a crash: SIGTERM makes it wait a
        minute for its long-running connections), let ``up.sh`` start it again: seconds
        until ``/readyz`` answers ok."""
        started = time.monotonic()
        pid = int((self.folder / "run" / "kube-apiserver.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        wait_for("kube-apiserver to exit", lambda: not _alive(pid), timeout=60, interval=0.2)
        self.api_up()
        return time.monotonic() - started

    def api_up(self) -> None:
        """The API server answering (``up.sh`` when it does not)."""
        if not self.readyz():
            self.script("up.sh")
        wait_for("kube-apiserver /readyz", self.readyz, timeout=120, interval=0.5)

    def restore(self) -> None:
        """The API server up, every node back with its labels and uncordoned, the fake kubelet
        running: the lab as ``up.sh && nodes.sh 6 && fake-kubelet.sh start`` leaves it."""
        self.api_up()
        self.script("nodes.sh", str(NODES))
        for node in self.nodes():
            if node["spec"].get("unschedulable"):
                self.kubectl.run("uncordon", node["metadata"]["name"])
        self.script("fake-kubelet.sh", "start")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:", 1)[1].split("\n")[0]
    except (OSError, IndexError):
        return "zombie"


def snapshot(kubectl: Kubectl, namespace: str) -> Snapshot:
    """Nodes, volumes, and the namespace's sets, pods and claims, in one list."""
    items = kubectl.within(namespace).get("nodes,pv,statefulsets,pods,pvc")["items"]
    kinds: dict[str, list[Obj]] = {}
    for item in items:
        kinds.setdefault(item["kind"], []).append(item)
    return Snapshot.of(
        nodes=kinds.get("Node", []),
        sets=kinds.get("StatefulSet", []),
        pods=kinds.get("Pod", []),
        claims=kinds.get("PersistentVolumeClaim", []),
        volumes=kinds.get("PersistentVolume", []),
    )


@dataclass
class Counter:
    """A counter of the API server's, summed across its restarts (a restart zeroes it)."""

    total: float = 0.0
    #: The last value read; None before the first, which is the baseline.
    last: float | None = None

    def add(self, value: float) -> float:
        if self.last is not None:
            self.total += value - self.last if value >= self.last else value
        self.last = value
        return self.total


@dataclass
class WebhookCounts:
    """The API server's counts of stszone's webhook calls: calls answered (admitted, rejected)
    and calls that failed (``calling_webhook_error``: no answer, a timeout, or not a 200)."""

    admitted: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)

    def read(self, kubectl: Kubectl) -> None:
        counts = webhook_counts(kubectl)
        self.admitted.add(counts["admitted"])
        self.rejected.add(counts["rejected"])
        self.errors.add(counts["errors"])
