"""What stszone adds to a StatefulSet's start on a real control plane: pods to bound, with and
without the webhook, in the same run.

    python bench/lab_overhead.py --kubeconfig $LAB/kubeconfig              # 100 pods, 3 rounds
    python bench/lab_overhead.py --kubeconfig $LAB/kubeconfig --pods 50 --rounds 5

Against the cluster of ``--kubeconfig`` (the lab of ``../shared/lab``: kube-apiserver,
controller-manager, scheduler and a fake kubelet on this machine), it starts ``stszone serve``
with its live view, registered by URL for one opted-in namespace only, as ``tests/e2e`` does.
Each round creates a ``podManagementPolicy: Parallel`` StatefulSet of ``--pods`` replicas in a
plain namespace and in the opted-in one (the order alternates between rounds) and times each
from its creation until every pod is bound to a node (``spec.nodeName``), then deletes it and
waits for its pods to go. In the opted-in namespace every pod CREATE goes through ``/mutate``
and ``/validate`` and is pinned to its ordinal's zone. It prints each round's seconds and the
ratio of the medians (the target: at most 1.05). Everything it creates is deleted at the end,
also when it is interrupted.
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes import client
from kubernetes import config as kubeconfig_loader

from tests.e2e.conftest import delete_namespace, opted_in_namespace, registrations
from tests.e2e.kube import RUN_LABEL, Kubectl, wait_for, workload
from tests.e2e.server import serving
from webhook.install.certfiles import issue

TARGET = 1.05
IMAGE = "registry.k8s.io/pause:3.10"


def bound(api: client.CoreV1Api, namespace: str, name: str, pods: int) -> bool:
    """Whether every pod of StatefulSet ``name`` exists and is bound to a node.

    Read with the API client, not kubectl, and as plain JSON, not the client's models: those
    take a millisecond or two a pod to build, a tenth of a second or more for a hundred pods at
    every poll, on the cores of the control plane being timed. Decoded with ``json``, a list
    takes milliseconds, so the time measured is the cluster's, not the poll's.
    """
    # Without preloading, the client returns the HTTP response, not the V1PodList it declares.
    answer: Any = api.list_namespaced_pod(
        namespace, label_selector=f"app={name}", _preload_content=False
    )
    items = json.loads(answer.data)["items"]
    return len(items) == pods and all(p.get("spec", {}).get("nodeName") for p in items)


def time_to_bound(
    kubectl: Kubectl, api: client.CoreV1Api, name: str, *, pods: int, timeout: float
) -> float:
    """Create a Parallel StatefulSet of ``pods`` replicas; seconds until all are bound."""
    namespace = kubectl.namespace or "default"
    labels = {RUN_LABEL: "bench"}
    started = time.monotonic()
    kubectl.create(workload("StatefulSet", name, image=IMAGE, replicas=pods, labels=labels))
    wait_for(f"{pods} pods of {name} bound", lambda: bound(api, namespace, name, pods),
             timeout=timeout, interval=0.02)  # fmt: skip
    seconds = time.monotonic() - started
    kubectl.run("delete", "statefulset", name, "--wait=true", "--timeout=120s")
    gone = lambda: not api.list_namespaced_pod(namespace, label_selector=f"app={name}").items  # noqa: E731
    wait_for(f"pods of {name} gone", gone, timeout=timeout)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--kubeconfig", required=True, help="the cluster (the lab's kubeconfig)")
    parser.add_argument("--pods", type=int, default=100, help="replicas of each StatefulSet")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per wait")
    parser.add_argument("--host", default="127.0.0.1", help="the address the API server dials")
    args = parser.parse_args(argv)
    binary = shutil.which("kubectl")
    if binary is None:
        parser.error("kubectl is not on PATH (the lab's is in $LAB/bin)")
    kubectl = Kubectl(binary, args.kubeconfig)
    loaded = kubeconfig_loader.new_client_from_config(config_file=args.kubeconfig)  # type: ignore[no-untyped-call]
    api = client.CoreV1Api(loaded)
    zones = tuple(sorted({n["metadata"]["labels"].get("topology.kubernetes.io/zone", "")
                          for n in kubectl.get("nodes")["items"]} - {""}))  # fmt: skip
    run = secrets.token_hex(3)
    opted, plain = f"stszone-bench-{run}", f"stszone-bench-plain-{run}"
    times: dict[str, list[float]] = {opted: [], plain: []}
    with tempfile.TemporaryDirectory(prefix="stszone-lab-overhead-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        issue(work / "certs", service="stszone-bench", namespace=opted, ips=[args.host])
        for namespace, obj in (
            (opted, opted_in_namespace(opted, run)),
            (plain, {"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": plain, "labels": {RUN_LABEL: run}}}),
        ):  # fmt: skip
            stack.callback(delete_namespace, kubectl, namespace)
            kubectl.create(obj)
        webhook = stack.enter_context(
            serving(host=args.host, bind=args.host, kubeconfig=args.kubeconfig,
                    certs=work / "certs", zones=zones, work=work)
        )  # fmt: skip
        ca_bundle = base64.b64encode((work / "certs" / "ca.crt").read_bytes()).decode()
        for config in registrations(
            name=opted, url=webhook.url, ca_bundle=ca_bundle, namespace=opted, run=run
        ):
            stack.callback(kubectl.delete, config["kind"].lower(), opted)
            kubectl.create(config)
        # Registrations take effect within moments; a first set in each namespace, not
        # counted, warms the webhook's connections and the controllers' caches.
        time.sleep(2)
        for namespace in (plain, opted):
            time_to_bound(kubectl.within(namespace), api, "warm", pods=3, timeout=args.timeout)
        for round_ in range(args.rounds):
            order = (plain, opted) if round_ % 2 == 0 else (opted, plain)
            for namespace in order:
                seconds = time_to_bound(kubectl.within(namespace), api, f"r{round_}",
                                        pods=args.pods, timeout=args.timeout)  # fmt: skip
                times[namespace].append(seconds)
            print(f"round {round_ + 1}: plain {times[plain][-1]:.2f} s, "
                  f"opted in {times[opted][-1]:.2f} s", flush=True)  # fmt: skip
        placed = check_placement(kubectl.within(opted), api, zones, pods=min(args.pods, 12))
    ratio = statistics.median(times[opted]) / statistics.median(times[plain])
    print(f"{args.pods} pods to bound, median of {args.rounds}: plain "
          f"{statistics.median(times[plain]):.2f} s, opted in {statistics.median(times[opted]):.2f}"
          f" s; ratio {ratio:.3f} (target <= {TARGET}); {placed}")  # fmt: skip
    return 0 if ratio <= TARGET else 1


def check_placement(
    kubectl: Kubectl, api: client.CoreV1Api, zones: tuple[str, ...], *, pods: int
) -> str:
    """Create a small set in the opted-in namespace and check its pods went by the rule."""
    kubectl.create(workload("StatefulSet", "placed", image=IMAGE, replicas=pods, labels={}))
    wait_for("the placed set bound", lambda: bound(api, kubectl.namespace or "", "placed", pods),
             timeout=120)  # fmt: skip
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"].get("topology.kubernetes.io/zone")
             for n in kubectl.get("nodes")["items"]}  # fmt: skip
    wrong = []
    for pod in kubectl.get("pods", "-l", "app=placed")["items"]:
        ordinal = int(pod["metadata"]["name"].rsplit("-", 1)[1])
        if nodes.get(pod["spec"]["nodeName"]) != zones[ordinal % len(zones)]:
            wrong.append(pod["metadata"]["name"])
    kubectl.run("delete", "statefulset", "placed", "--wait=false")
    if wrong:
        raise SystemExit(f"pods not in their rule zone: {', '.join(wrong)}")
    return f"{pods} pods of the opted-in namespace checked in their rule zones"


if __name__ == "__main__":
    raise SystemExit(main())
