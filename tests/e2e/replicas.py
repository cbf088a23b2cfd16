"""Replicas of ``stszone serve`` behind one Service address on the lab, load, and what the API
server counts.

- :func:`launch`: one ``stszone serve --manage-certs --reuse-port`` bound to the Service's
  ClusterIP:443 (the lab's Service range is on loopback, and it has no kube-proxy: several
  processes bound with SO_REUSEPORT stand in for the Service's endpoints), with plain-HTTP
  ``/metrics`` on its own port of the same address. :meth:`Process.restart` signals it, waits
  for it to exit and starts it again with the same command.
- :class:`Load`: pods created in a loop while something else happens; each of its calls that
  fails is a :class:`Failure`, which says whether it is a call lost with a killed replica.
- :func:`apiserver_webhook_errors`, :func:`apiserver_webhook_calls`: the API server's own
  counts of stszone's webhook calls; :func:`failed_creates`, :func:`failed_create_events`: the
  StatefulSet controller's, each a :class:`FailedCreate` that says whether the kill cost it.
"""

from __future__ import annotations

import math
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from tests.e2e.certslab import ROOT, WEBHOOK_NAMES, Lab
from tests.e2e.kube import Kubectl, KubectlError, owned_pod, wait_for, workload
from tests.process import clean_environ, free_port, tail

IMAGE = "registry.k8s.io/pause:3.10"
#: Seconds a replica may take to list the cluster and become Ready.
READY_TIMEOUT = 120.0


@dataclass
class Process:
    """One ``stszone serve --manage-certs`` on the Service's ClusterIP:443."""

    name: str
    proc: subprocess.Popen[bytes]
    metrics_url: str
    log: Path
    cmd: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def _scrape(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as resp:
            text: str = resp.read().decode()
        return text

    def metrics(self) -> dict[str, float]:
        """``stszone_*`` samples without labels, from its ``/metrics``."""
        found = {}
        for line in self._scrape().splitlines():
            match = re.match(r"^(stszone_[a-z_]+) (\S+)$", line)
            if match:
                found[match[1]] = float(match[2])
        return found

    def labelled(self, family: str) -> dict[str, float]:
        """Samples of ``family`` with labels: the label text (``{a="b",...}``) -> value."""
        found = {}
        for line in self._scrape().splitlines():
            if line.startswith(family + "{"):
                labels, _, value = line.rpartition(" ")
                found[labels[len(family) :]] = float(value)
        return found

    def answered(self) -> float:
        """Admission requests it answered (``stszone_requests_total``, every label set)."""
        return sum(self.labelled("stszone_requests_total").values())

    def ready(self) -> bool:
        try:
            return self.metrics().get("stszone_ready") == 1.0
        except OSError:
            return False

    def alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited {self.proc.returncode}:\n{tail(self.log)}")

    def rss(self) -> int:
        """Resident memory in bytes (``VmRSS`` of /proc)."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        (kib,) = re.findall(r"^VmRSS:\s+(\d+) kB$", status, re.MULTILINE)
        return int(kib) * 1024

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def lines(self, needle: str) -> list[str]:
        return [line for line in self.log.read_text().splitlines() if needle in line]

    def wait_ready(self) -> None:
        def ready() -> bool:
            self.alive()
            return self.ready()

        wait_for(f"{self.name} to be Ready", ready, timeout=READY_TIMEOUT, interval=0.2)

    def restart(self, sig: signal.Signals) -> tuple[Process, float]:
        """Send ``sig``, wait for the exit, start the same command again and wait until it is
        Ready: (the new process, seconds from the signal to Ready)."""
        signalled = time.monotonic()
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=60)
        if sig == signal.SIGTERM and code != 0:
            raise AssertionError(f"{self.name} exited {code} on SIGTERM:\n{tail(self.log)}")
        with self.log.open("ab") as out:
            proc = subprocess.Popen(
                self.cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT
            )
        again = Process(self.name, proc, self.metrics_url, self.log, self.cmd, self.env)
        try:
            again.wait_ready()
        except BaseException:
            # The caller holds only this process, which has exited: nothing else would stop
            # the new one, left serving the Service's address after the run.
            again.stop()
            raise
        return again, time.monotonic() - signalled


def launch(
    name: str,
    lab: Lab,
    *,
    kubeconfig: Path,
    zones: str,
    work: Path,
    validity: str = "365d",
    extra: Sequence[str] = (),
) -> Process:
    """Start one process; its identity (the Lease holder) is ``name``."""
    port = free_port(lab.cluster_ip)
    log = work / f"{name}.log"
    cmd = [
        sys.executable, "-m", "webhook", "serve",
        "--kubeconfig", str(kubeconfig),
        "--manage-certs",
        "--cert-validity", validity,
        "--namespace", lab.namespace,
        "--webhook-config-name", lab.config_name,
        "--host", lab.cluster_ip,
        "--port", "443",
        "--reuse-port",
        "--metrics-port", str(port),
        "--zones", zones,
        *extra,
    ]  # fmt: skip
    env = {**clean_environ(), "POD_NAME": name}
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    return Process(name, proc, f"http://{lab.cluster_ip}:{port}/metrics", log, cmd, env)


def webhook_counts(kubectl: Kubectl) -> dict[str, float]:
    """The API server's counts of stszone's two webhooks' calls, from its ``/metrics``:
    ``admitted`` and ``rejected`` (``apiserver_admission_webhook_request_total`` by its
    ``rejected`` label: "true" when the call failed or denied), and ``errors``
    (``apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error"}``: calls
    it could not make or complete, TLS included, timeouts and answers other than 200 too)."""
    counts = {"admitted": 0.0, "rejected": 0.0, "errors": 0.0}
    for line in kubectl.run("get", "--raw", "/metrics").splitlines():
        labels, _, value = line.rpartition(" ")
        if not any(f'name="{name}"' in labels for name in WEBHOOK_NAMES):
            continue
        if labels.startswith("apiserver_admission_webhook_request_total{"):
            counts["rejected" if 'rejected="true"' in labels else "admitted"] += float(value)
        elif labels.startswith("apiserver_admission_webhook_rejection_count{") and (
            'error_type="calling_webhook_error"' in labels
        ):
            counts["errors"] += float(value)
    return counts


def apiserver_webhook_errors(kubectl: Kubectl) -> float:
    """Calls of stszone's webhooks the API server could not make or complete."""
    return webhook_counts(kubectl)["errors"]


def apiserver_webhook_calls(kubectl: Kubectl) -> dict[str, float]:
    """Calls of stszone's webhooks by ``rejected`` ("true": the call failed or denied)."""
    counts = webhook_counts(kubectl)
    return {"admitted": counts["admitted"], "rejected": counts["rejected"]}


def failed_create_events(kubectl: Kubectl) -> list[FailedCreate]:
    """The StatefulSet controller's FailedCreate events in the namespace."""
    events = kubectl.get("events", "--field-selector", "reason=FailedCreate")["items"]
    return [FailedCreate.of(event) for event in events]


def failed_creates(kubectl: Kubectl) -> list[str]:
    """The same, as their counts and messages."""
    return [f"{e.count}x {e.message}" for e in failed_create_events(kubectl)]


#: How the API server says that a webhook replica it was calling went away under the call: the
#: connection was reset (the process died with the request unread), closed before the answer
#: (EOF), refused, or closed as the request went on it. That last one is a kept-alive connection
#: the dying replica's kernel had closed, taken up by the API server before it read the close:
#: writing on it draws a reset ("broken pipe"), or Go's transport reads the close first and
#: does not retry a POST ("server closed idle connection").
GONE: Final = (
    "connection reset by peer",
    "EOF",
    "connection refused",
    "broken pipe",
    "server closed idle connection",
)


@dataclass(frozen=True, slots=True)
class Failure:
    """A call of the :class:`Load` that failed: when it ran (``time.monotonic()``) and what it
    said, whole (kubectl puts the reason last)."""

    started: float
    ended: float
    message: str

    def cut_by_kill(self, *, signalled: float, replaced: float) -> bool:
        """Whether this is a webhook call the API server lost with a replica SIGKILLed at
        ``signalled`` and replaced by a Ready one at ``replaced``.

        The kernel closes the dead process's connections at once and the API server drops each
        as it reads the close, so the calls the kill may cost are those it made on them before:
        under way at the kill, not begun once the replacement was Ready. A failure outside that
        span, or for another reason, is something else's doing.
        """
        return (
            "failed calling webhook" in self.message
            and any(reason in self.message for reason in GONE)
            and self.ended >= signalled
            and self.started <= replaced
        )


@dataclass(frozen=True, slots=True)
class FailedCreate:
    """A FailedCreate event of the StatefulSet controller: its set, what it said (the latest,
    when it counts several), the failed creates it counts, and when the first and the last
    failed (Unix seconds, whole: an Event's timestamps are kept to the second)."""

    statefulset: str
    message: str
    count: int
    first: float
    last: float

    @classmethod
    def of(cls, event: dict[str, Any]) -> FailedCreate:
        series = event.get("series") or {}
        first = event.get("firstTimestamp") or event["eventTime"]
        last = event.get("lastTimestamp") or series.get("lastObservedTime") or first
        return cls(
            statefulset=event["involvedObject"]["name"],
            message=event.get("message", ""),
            count=int(event.get("count") or series.get("count") or 1),
            first=datetime.fromisoformat(first).timestamp(),
            last=datetime.fromisoformat(last).timestamp(),
        )

    def cut_by_kill(self, *, signalled: float, replaced: float) -> bool:
        """Whether its creates are ones the API server lost with a replica SIGKILLed at
        ``signalled`` and replaced by a Ready one at ``replaced`` (Unix time), as
        :meth:`Failure.cut_by_kill` judges the load's calls. The API server answers a call cut
        by the kill at once and the controller records the failure as it is answered: between
        the two (to the second: from the signal's own)."""
        return (
            "failed calling webhook" in self.message
            and any(reason in self.message for reason in GONE)
            and self.first >= math.floor(signalled)
            and self.last <= replaced
        )


class Load:
    """Pods created in a loop: a new StatefulSet scaled from 0 to 6 every cycle (its controller
    creates the pods; it is deleted once they exist), and server-side dry runs of a
    StatefulSet's pod, counting refusals.

    A new StatefulSet each cycle, not one scaled up and down: the controller's event recorder
    drops an object's events beyond a burst of 25 (client-go's spam filter refills one per
    5 minutes), so on one long-lived StatefulSet a FailedCreate could go unrecorded. Each is
    created ``AHEAD`` cycles (seconds) before it is scaled up: the pod of a StatefulSet the
    webhook's view has not seen yet is refused by design (``StatefulSetNotYetSeen``, retried by
    the controller), which is not what the load is for. A set whose creation failed is created
    again by the next cycle, so that one lost call is one failure, not also a scale of a set
    that does not exist ``AHEAD`` cycles later. A kubectl call that fails is recorded (in
    ``errors`` or ``dry_run_errors``, and with its times in ``failures``) and the loop goes on
    (an API server restart makes some fail on purpose).
    """

    AHEAD = 4

    def __init__(self, kubectl: Kubectl, *, prefix: str = "load") -> None:
        self.kubectl = kubectl
        self.prefix = prefix
        self.stop = threading.Event()
        self.cycles = 0
        self.dry_runs = 0
        self.dry_run_errors: list[str] = []
        self.errors: list[str] = []
        self.failures: list[Failure] = []
        self.owner: dict[str, Any] = {}
        #: The indices of the cycles' StatefulSets created so far.
        self.prepared: set[int] = set()
        self.threads = [
            threading.Thread(target=self._cycle, daemon=True),
            threading.Thread(target=self._dry_run, daemon=True),
        ]

    def _prepare(self, index: int) -> None:
        sts = workload("StatefulSet", f"{self.prefix}-{index}", image=IMAGE, replicas=0, labels={})
        self.kubectl.create(sts)
        self.prepared.add(index)

    def prepare(self) -> None:
        """Create the dry runs' owner and the first cycles' StatefulSets."""
        sts = workload("StatefulSet", f"{self.prefix}-owner", image=IMAGE, replicas=0, labels={})
        self.owner = self.kubectl.create(sts)
        for index in range(self.AHEAD):
            self._prepare(index)

    def start(self) -> None:
        self.prepare()
        for thread in self.threads:
            thread.start()

    def _failed(self, err: KubectlError, into: list[str]) -> None:
        message = err.stderr.strip()
        into.append(message)
        self.failures.append(Failure(err.started, err.ended, message))

    def _cycle(self) -> None:
        while not self.stop.is_set():
            if not self.step():
                time.sleep(1)

    def step(self) -> bool:
        """One cycle; False when one of its calls failed (recorded)."""
        try:
            self._one_cycle()
            return True
        except KubectlError as err:
            self._failed(err, self.errors)
            return False
        finally:
            self.cycles += 1

    def _one_cycle(self) -> None:
        name = f"{self.prefix}-{self.cycles}"
        for index in range(self.cycles, self.cycles + self.AHEAD + 1):
            if index not in self.prepared:
                self._prepare(index)
        self.kubectl.run("scale", "statefulset", name, "--replicas=6")
        # A cycle ends with its 6 pods even when the load is stopping: a StatefulSet deleted
        # while its controller still creates pods gets those creates refused (the set has left
        # the webhook's view), which is the load's doing, not what it measures.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if len(self.kubectl.get("pods", "-l", f"app={name}")["items"]) == 6:
                break
            time.sleep(0.5)
        self.kubectl.delete("statefulset", name)

    def _dry_run(self) -> None:
        pod = owned_pod(self.owner, 9, image=IMAGE, labels={"app": f"{self.prefix}-owner"})
        while not self.stop.wait(0.3):
            started = time.monotonic()
            try:
                created = self.kubectl.create(pod, dry_run=True)
                if "stszone.io/zone" not in created["metadata"].get("annotations", {}):
                    message = "a dry-run pod came back without its zone"
                    self.dry_run_errors.append(message)
                    self.failures.append(Failure(started, time.monotonic(), message))
            except KubectlError as err:
                self._failed(err, self.dry_run_errors)
            self.dry_runs += 1

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=90)
