"""A randomized, seeded churn on a real control plane, with invariants checked after every step.

    python bench/churn.py --minutes 10 --seed 1          against $STSZONE_E2E_KUBECONFIG
    python bench/churn.py --minutes 2 --seed 7 --json churn.json

It installs stszone as ``tests/e2e/test_certs.py`` does (its namespace, the rendered RBAC, a
Service in the lab's loopback range, both webhook configurations), starts three ``stszone
serve --manage-certs --reuse-port`` replicas on the Service's address, runs the pod load of
``tests/e2e/replicas.py`` beside it, and then takes random steps (``random.Random(seed)``) for
``--minutes``: StatefulSets created, scaled up, scaled down (by the scale subresource or an
update; some below what keeps every zone, some with ``stszone.io/allow-zone-loss``), deleted;
nodes cordoned, unlabelled and relabelled, deleted and re-created; a zone's nodes deleted and
brought back; replica a or b restarted with SIGTERM or SIGKILL (the one the API server's
connections are on: they stay on the listener they were made to; c is never signalled);
the API server restarted.
After every step:

1. every bound pod of an opted-in, non-skipped set is in its rule zone or its volume's zone;
2. every scale-down the API server accepted (not forced) left every listed zone held by the
   facts (``bench/churnfacts.py``, not stszone's code);
3. every refusal named a zone that really would have been lost, or an unknown it named;
4. no webhook call failed (the API server's ``calling_webhook_error``, a "failed calling
   webhook" answer to a request) except during a step that SIGKILLs a replica;
5. each replica process's RSS stays within 15% of its first plateau after the warm-up
   (``--warmup``, ``--plateau``: a restarted process starts its own; c lives the whole run);
   at the end every replica's zone-risk gauges agree with ``stszone audit``.

A broken invariant stops the run; it prints the seed, the step and the objects involved, and
exits 1. Exit 0 only when every invariant held. The summary counts the Events stszone wrote
(``bench/churnevents.py``). Everything it created is deleted and the lab restored, however it
ends.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import secrets
import shutil
import signal
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import churnevents
from bench import churnfacts as facts
from bench.churncheck import Broken, Figures, Watched, gauges_agree, summarise
from bench.churnlab import NODES, Lab, WebhookCounts, snapshot
from tests.e2e import certslab, replicas
from tests.e2e.kube import Kubectl, KubectlError, workload
from tests.e2e.replicas import IMAGE, Load, Process

ROOT = Path(__file__).resolve().parent.parent
MAX_MINUTES = 120.0
WEBHOOK_FAILED = "failed calling webhook"
#: Step kinds and their weights.
STEPS = {
    "create": 3,
    "scale-up": 3,
    "scale-down": 5,
    "delete": 1,
    "cordon": 1,
    "relabel": 1,
    "delete-node": 1,
    "nodes-back": 1,
    "zone-to-zero": 1,
    "sigterm": 1,
    "sigkill": 1,
    "restart-apiserver": 1,
}
#: The replicas a signal may go to (the busier one); replica c is never signalled, so one
#: process's memory is watched for the whole run.
SIGNALLED = (0, 1)
#: Steps after which missing nodes are brought back whatever the draw.
NODES_BACK_AFTER = 6


class Churn:
    def __init__(
        self, args: argparse.Namespace, *, lab: Lab, work: Kubectl, replicas: list[Process]
    ) -> None:
        self.args, self.lab, self.work, self.replicas = args, lab, work, replicas
        self.rng = random.Random(args.seed)
        self.zones: tuple[str, ...] = tuple(args.zones.split(","))
        self.counts = WebhookCounts()
        self.figures = Figures()
        self.sets = 0
        self.missing_since: int | None = None
        self.step_no = 0
        self.step_text = "start"
        self.load: Load | None = None
        self.load_seen = 0
        self.watched = [Watched(p.name) for p in replicas]
        self.deck: list[str] = []
        #: The Events the run made stszone write (bench/churnevents.py), read at the end.
        self.events: dict[str, Any] = {}

    def names(self) -> list[str]:
        items = self.work.get("statefulsets", "-l", "churn=step")["items"]
        return sorted(s["metadata"]["name"] for s in items)

    def act(self, what: str, *args: str) -> str:
        """kubectl ARGS in the workload namespace; a failed webhook call is recorded."""
        self.step_text += f"; {what}"
        return self.work.run(*args)

    def create(self) -> None:
        name = f"s{self.sets}"
        self.sets += 1
        forced = self.rng.random() < 0.2
        sts = workload("StatefulSet", name, image=IMAGE, replicas=self.rng.randint(1, 6), labels={})
        sts["metadata"]["labels"] = {"churn": "step"}
        if forced:
            sts["metadata"]["annotations"] = {facts.FORCE_ANNOTATION: "true"}
        self.step_text += f" {name} replicas {sts['spec']['replicas']} forced {forced}"
        self.work.create(sts)

    def scale_up(self, name: str) -> None:
        old = int(self.work.get("statefulset", name)["spec"]["replicas"])
        new = min(old + self.rng.randint(1, 3), 9)
        self.act(f"{name} {old} -> {new}", "scale", "statefulset", name, f"--replicas={new}")

    def scale_down(self, name: str) -> None:
        before = snapshot(self.work, self.work.namespace or "")
        sts = before.sets[name]
        old = int(sts["spec"]["replicas"])
        if old == 0:
            self.scale_up(name)
            return
        new = self.rng.randint(0, old - 1)
        by = self.rng.choice(["scale", "update"])
        forced = (sts["metadata"].get("annotations") or {}).get(facts.FORCE_ANNOTATION) == "true"
        self.step_text += f" {name} {old} -> {new} by {by} forced {forced}"
        args = (
            ["scale", "statefulset", name, f"--replicas={new}"]
            if by == "scale"
            else [
                "patch",
                "statefulset",
                name,
                "--type=merge",
                "-p",
                f'{{"spec":{{"replicas":{new}}}}}',
            ]
        )
        try:
            self.work.run(*args)
        except KubectlError as err:
            if "denied the request" not in err.stderr:
                raise
            self.refused(name, new, err.stderr, before)
            return
        self.figures.scale_downs["accepted"] += 1
        if new == 0 or forced:
            self.figures.scale_downs["to zero" if new == 0 else "forced"] += 1
            return
        after = snapshot(self.work, self.work.namespace or "")
        self.figures.checks["2 accepted scale-down kept every zone"] += 1
        why = facts.accepted_scale_down([before, after], name, new, self.zones)
        if why:
            raise Broken(2, f"{name} {old} -> {new} was accepted: {why}", self.objects(name))

    def refused(self, name: str, new: int, stderr: str, before: facts.Snapshot) -> None:
        found = re.search(r"Error from server \((\w+)\)", stderr)
        reason = found[1] if found else "?"
        self.figures.refusals[reason] += 1
        self.figures.checks["3 refusal borne out"] += 1
        if reason not in ("ZoneLoss", "ZoneUnknown"):
            raise Broken(3, f"refused for another reason: {stderr.strip()}", self.objects(name))
        after = snapshot(self.work, self.work.namespace or "")
        why = facts.refusal([before, after], name, new, stderr, self.zones)
        if why:
            raise Broken(3, f"{stderr.strip()}\nnot borne out: {why}", self.objects(name))

    def node_step(self, kind: str) -> None:
        present = {n["metadata"]["name"]: n for n in self.lab.nodes()}
        if kind == "nodes-back" or not present:
            self.step_text += " nodes.sh"
            self.lab.script("nodes.sh", str(NODES))
            self.missing_since = None
            return
        name = self.rng.choice(sorted(present))
        node = present[name]
        if kind == "cordon":
            verb = "uncordon" if node["spec"].get("unschedulable") else "cordon"
            self.act(f"{verb} {name}", verb, name)
        elif kind == "relabel":
            zone = self.zones[(int(name.rsplit("-", 1)[1]) - 1) % len(self.zones)]
            labelled = facts.ZONE_KEY in node["metadata"]["labels"]
            change = f"{facts.ZONE_KEY}-" if labelled else f"{facts.ZONE_KEY}={zone}"
            self.act(f"label {name} {change}", "label", "node", name, change, "--overwrite")
        else:
            zone = node["metadata"]["labels"].get(facts.ZONE_KEY)
            doomed = (
                [
                    n
                    for n, o in present.items()
                    if o["metadata"]["labels"].get(facts.ZONE_KEY) == zone
                ]
                if kind == "zone-to-zero" and zone
                else [name]
            )
            for gone in doomed:
                self.act(f"delete node {gone}", "delete", "node", gone, "--wait=false")
            self.missing_since = self.missing_since or self.step_no

    def replica_step(self, sig: signal.Signals) -> None:
        # The replica the API server's connections are on: they stay on the listener they
        # were made to, so the other one may have nothing to lose.
        slot = max(SIGNALLED, key=lambda i: self.replicas[i].answered())
        answered = self.replicas[slot].answered()
        errors = self.counts.errors.total
        self.figures.instances.append(self.watched[slot].summary())
        self.replicas[slot], took = self.replicas[slot].restart(sig)
        self.watched[slot] = Watched(self.replicas[slot].name)
        self.step_text += f" {self.replicas[slot].name} (answered {answered:g})"
        self.figures.restarts.append(
            {"signal": sig.name, "answered_before": answered, "to_ready_s": round(took, 1)}
        )
        if sig == signal.SIGKILL:
            self.counts.read(self.work)
            self.figures.kill_failures += self.counts.errors.total - errors

    def step(self) -> str:
        if not self.deck and self.step_no <= len(STEPS):
            # The first round takes every kind once, in a shuffled order: a short run
            # exercises them all; later steps are drawn by weight.
            self.deck = [k for k in STEPS if k != "create"]
            self.rng.shuffle(self.deck)
            self.deck.append("create")  # drawn first: the other set steps need a set
        dealt = bool(self.deck)
        if dealt:
            kind = self.deck.pop()
        else:
            kinds = list(STEPS)
            kind = self.rng.choices(kinds, weights=[STEPS[k] for k in kinds])[0]
        if self.missing_since is not None and self.step_no - self.missing_since >= NODES_BACK_AFTER:
            if dealt:
                self.deck.append(kind)  # still the next step's
            kind = "nodes-back"
        names = self.names()
        if kind in ("scale-up", "scale-down", "delete") and not names:
            kind = "create"
        self.step_text = kind
        if kind == "create":
            self.create()
        elif kind == "scale-up":
            self.scale_up(self.rng.choice(names))
        elif kind == "scale-down":
            self.scale_down(self.rng.choice(names))
        elif kind == "delete":
            name = self.rng.choice(names)
            self.act(name, "delete", "statefulset", name, "--wait=false")
        elif kind in ("cordon", "relabel", "delete-node", "nodes-back", "zone-to-zero"):
            self.node_step(kind)
        elif kind in ("sigterm", "sigkill"):
            self.replica_step(signal.SIGTERM if kind == "sigterm" else signal.SIGKILL)
        else:
            took = self.lab.restart_apiserver()
            self.figures.restarts.append({"apiserver": True, "to_ready_s": round(took, 1)})
        return kind

    def objects(self, name: str | None = None) -> Any:
        return facts.described(snapshot(self.work, self.work.namespace or ""), name)

    def check(self, kind: str, errors_before: float) -> None:
        snap = snapshot(self.work, self.work.namespace or "")
        self.figures.checks["1 pods in their zones"] += 1
        misplaced = facts.misplaced_pods(snap, self.zones)
        if misplaced:
            raise Broken(1, "; ".join(misplaced), self.objects())
        self.counts.read(self.work)
        self.figures.checks["4 no failed webhook call"] += 1
        failed = self.counts.errors.total - errors_before
        assert self.load is not None
        new = [e for e in self.load.errors + self.load.dry_run_errors if WEBHOOK_FAILED in e]
        if kind != "sigkill" and (failed or len(new) > self.load_seen):
            raise Broken(4, f"{failed:g} failed webhook calls; {new[self.load_seen :]}")
        self.load_seen = len(new)
        self.figures.checks["5 memory flat"] += 1
        for process, watched in zip(self.replicas, self.watched, strict=True):
            watched.sample(process.rss(), warmup=self.args.warmup, plateau=self.args.plateau)


def run(args: argparse.Namespace) -> int:
    kubeconfig = os.path.expanduser(os.environ.get("STSZONE_E2E_KUBECONFIG", ""))
    if not kubeconfig or not Path(kubeconfig).is_file():
        raise SystemExit("set STSZONE_E2E_KUBECONFIG to the lab's kubeconfig")
    binary = shutil.which("kubectl") or str(Path(kubeconfig).parent / "bin" / "kubectl")
    kubectl = Kubectl(binary, kubeconfig)
    lab = Lab(kubectl)
    run_id = secrets.token_hex(3)
    work_dir = Path(tempfile.mkdtemp(prefix="stszone-churn-"))
    if not args.zones:
        args.zones = ",".join(
            sorted({n["metadata"]["labels"][facts.ZONE_KEY] for n in lab.nodes()})
        )
    churn: Churn | None = None
    with ExitStack() as cleanup:
        cleanup.callback(lab.restore)  # last: after the objects are gone
        installed = certslab.install(kubectl, run=run_id, cleanup=cleanup, prefix="churn")
        token = certslab.token_kubeconfig(kubectl, installed, work_dir / "stszone.kubeconfig")
        processes = [
            replicas.launch(
                f"replica-{x}-{run_id}",
                installed,
                kubeconfig=token,
                zones=args.zones,
                work=work_dir,
                extra=["--zone-risk-interval", "2"],
            )
            for x in "abc"
        ]

        def stop_all() -> None:  # the processes in the slots at the end
            for process in processes:
                process.stop()

        cleanup.callback(stop_all)
        certslab.register(kubectl, installed, cleanup=cleanup)
        cleanup.callback(lab.api_up)  # first: the deletions need it
        for process in processes:
            process.wait_ready()
        work = kubectl.within(installed.workload)
        churn = Churn(args, lab=lab, work=work, replicas=processes)
        churn.load = Load(work, prefix="load")
        churn.load.start()
        cleanup.callback(churn.load.finish)
        churn.counts.read(work)
        began = time.monotonic()
        deadline = began + args.minutes * 60
        try:
            while time.monotonic() < deadline:
                churn.step_no += 1
                errors = churn.counts.errors.total
                try:
                    kind = churn.step()
                except KubectlError as err:
                    if WEBHOOK_FAILED in err.stderr:
                        raise Broken(4, err.stderr.strip()) from None
                    # The API server just restarted, or an object went meanwhile: not
                    # stszone's doing; counted, and the run goes on.
                    kind = "failed: " + churn.step_text.split(" ", 1)[0]
                    churn.figures.step_errors.append(
                        f"{churn.step_text}: {err.stderr.strip()[:200]}"
                    )
                churn.figures.steps[kind] += 1
                print(f"step {churn.step_no}: {churn.step_text}", flush=True)
                time.sleep(args.pause)
                churn.check(kind, errors)
            churn.load.finish()
            churn.events = churnevents.figures(
                work, churn.replicas, seconds=time.monotonic() - began
            )
            churn.figures.checks["5 gauges agree with audit"] += 1
            gauges_agree(churn.replicas, work=work, zones=churn.zones)
        except Broken as broken:
            print(f"\nBROKEN {broken}\nseed {args.seed}, step {churn.step_no}: {churn.step_text}")
            print(json.dumps(broken.objects, indent=1, sort_keys=True))
            print(f"replica logs: {work_dir}")
            return 1
        finally:
            summary = summarise(churn, run_id, args)
            print(json.dumps(summary, indent=2))
            if args.json:
                Path(args.json).write_text(json.dumps(summary, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--zones", default="", help="default: the zones of the lab's nodes")
    parser.add_argument(
        "--warmup", type=float, default=None, help="seconds (default: 60, at most a fifth)"
    )
    parser.add_argument("--plateau", type=float, default=None, help="seconds measured as plateau")
    parser.add_argument("--pause", type=float, default=0.5, help="seconds after each step")
    parser.add_argument("--json", default="", help="write the figures to this file")
    args = parser.parse_args(argv)
    if not 0 < args.minutes <= MAX_MINUTES:
        parser.error(f"--minutes must be in (0, {MAX_MINUTES:g}]")
    seconds = args.minutes * 60
    args.warmup = min(60.0, seconds / 5) if args.warmup is None else args.warmup
    args.plateau = min(30.0, seconds / 10) if args.plateau is None else args.plateau
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
