"""Scale benchmark of the live view: time to ready and peak memory of ``stszone serve``.

    /tmp/venv/bin/python bench/cache_scale.py                   # 5k nodes, 100k pods/PVs/claims
    /tmp/venv/bin/python bench/cache_scale.py --pods 10000      # a quicker run

Three processes, so the figures are the webhook's own: this driver; the fake API server of the
tests (``tests/fakeapi.py``) filled with generated objects, each built from a recorded fixture
object (same shape and size, managedFields and all: about 5 KB per pod, 3 KB per PV, 1.8 KB per
claim, 5 KB per node); and the real ``stszone serve --kubeconfig`` pointed at it. The driver
polls ``/readyz`` over TLS from the moment it spawns the webhook, then reads the webhook's peak
resident set (``VmHWM`` in /proc) and times a few hundred ``/mutate`` calls against the full
caches. Targets (issue 3): ready in under 30 s and under 400 MB RSS on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import builders  # noqa: E402
from tests.fakeapi import FakeApi  # noqa: E402
from tests.fakestate import API_FIXTURES, Stored  # noqa: E402
from tests.kubeconfig import write_kubeconfig  # noqa: E402

TOKEN = "bench-token"
ZONES = ("zone-a", "zone-b", "zone-c")
_HOLE = re.compile(r"@(\w+)@")


class Template:
    """A recorded object with ``@FIELD@`` holes, filled by joins (300k objects in seconds)."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self._parts = _HOLE.split(json.dumps(obj, separators=(",", ":")))

    def fill(self, **values: str) -> bytes:
        parts = self._parts
        return "".join(p if i % 2 == 0 else values[p] for i, p in enumerate(parts)).encode()


def _recorded(name: str) -> dict[str, Any]:
    item: dict[str, Any] = copy.deepcopy(
        json.loads((API_FIXTURES / f"{name}.json").read_text())["items"][0]
    )
    return item


def _templates() -> dict[str, Template]:
    node = _recorded("nodes-list-limit2")
    node["metadata"].update(name="@NAME@", uid="@UID@")
    node["metadata"]["labels"].update(
        {"kubernetes.io/hostname": "@NAME@", "topology.kubernetes.io/zone": "@ZONE@"}
    )
    pod = _recorded("sts-pods-list")
    meta = pod["metadata"]
    meta.update(name="@STS@-@IDX@", namespace="@NS@", uid="@UID@", generateName="@STS@-")
    meta["labels"].update(
        {
            "app": "@STS@",
            "apps.kubernetes.io/pod-index": "@IDX@",
            "statefulset.kubernetes.io/pod-name": "@STS@-@IDX@",
            "topology.kubernetes.io/zone": "@ZONE@",
        }
    )
    meta["ownerReferences"][0].update(name="@STS@", uid="@OWNER@")
    pod["spec"].update(nodeName="@NODE@", hostname="@STS@-@IDX@", subdomain="@STS@")
    pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = "data-@STS@-@IDX@"
    pv = _recorded("pv-list")
    pv["metadata"].update(name="@NAME@", uid="@UID@")
    pv["metadata"]["annotations"].pop("kubectl.kubernetes.io/last-applied-configuration", None)
    expr = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    expr["values"] = ["@ZONE@"]
    pv["spec"]["claimRef"].update(namespace="@NS@", name="data-@STS@-@IDX@", uid="@CLAIM@")
    pvc = _recorded("pvc-list")
    pvc["metadata"].update(name="data-@STS@-@IDX@", namespace="@NS@", uid="@CLAIM@")
    pvc["metadata"]["labels"] = {"app": "@STS@"}
    pvc["spec"]["volumeName"] = "@PV@"
    sts = _recorded("statefulsets-list")
    sts["metadata"].update(name="@STS@", namespace="@NS@", uid="@OWNER@")
    return {
        k: Template(v)
        for k, v in (("nodes", node), ("pods", pod), ("pvs", pv), ("pvcs", pvc), ("sts", sts))
    }


def _uid(kind: int, n: int) -> str:
    return f"{kind:08x}-0000-4000-8000-{n:012x}"


def generate(api: FakeApi, *, nodes: int, pods: int, per_set: int) -> None:
    """Fill the fake API: nodes over three zones; StatefulSets of ``per_set`` pods, each pod with
    a claim bound to a zone-pinned PV (in the zone the default scheduler happened to pick)."""
    t = _templates()
    objects = api.objects

    def node_items() -> Iterator[Stored]:
        for i in range(nodes):
            name = f"node-{i:05d}"
            labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": ZONES[i % 3]}
            yield Stored(
                ("", name), labels, t["nodes"].fill(NAME=name, UID=_uid(1, i), ZONE=ZONES[i % 3])
            )

    objects.load_raw("nodes", node_items())
    sets = [(f"ns-{s % 200:03d}", f"set-{s:05d}") for s in range((pods + per_set - 1) // per_set)]
    objects.load_raw(
        "statefulsets",
        (
            Stored((ns, name), {}, t["sts"].fill(NS=ns, STS=name, OWNER=_uid(2, s)))
            for s, (ns, name) in enumerate(sets)
        ),
    )
    pod_items, pv_items, pvc_items = [], [], []
    for n in range(pods):
        s, idx = divmod(n, per_set)
        ns, sts = sets[s]
        zone, node = ZONES[n * 7 % 3], f"node-{n * 7 % nodes:05d}"
        pv = f"pv-{n:06d}"
        fields = {"NS": ns, "STS": sts, "IDX": str(idx), "ZONE": zone, "OWNER": _uid(2, s)}
        labels = {"app": sts, "statefulset.kubernetes.io/pod-name": f"{sts}-{idx}"}
        pod_items.append(
            Stored(
                (ns, f"{sts}-{idx}"), labels, t["pods"].fill(**fields, UID=_uid(3, n), NODE=node)
            )
        )
        pv_items.append(
            Stored(("", pv), {}, t["pvs"].fill(**fields, NAME=pv, UID=_uid(4, n), CLAIM=_uid(5, n)))
        )
        pvc_items.append(
            Stored((ns, f"data-{sts}-{idx}"), {}, t["pvcs"].fill(**fields, PV=pv, CLAIM=_uid(5, n)))
        )
    objects.load_raw("pods", pod_items)
    objects.load_raw("persistentvolumes", pv_items)
    objects.load_raw("persistentvolumeclaims", pvc_items)


async def serve_fake(args: argparse.Namespace) -> None:
    """Child process: generate the objects, serve them, print the URL, run until killed."""
    started = time.monotonic()
    api = FakeApi(token=TOKEN, fixtures=False)
    generate(api, nodes=args.nodes, pods=args.pods, per_set=args.per_set)
    sizes = {r: sum(len(s.body) for s in t.values()) for r, t in api.objects.tables.items()}
    async with api:
        print(
            json.dumps({"url": api.url, "bytes": sizes, "seconds": time.monotonic() - started}),
            flush=True,
        )
        await asyncio.Event().wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _status(pid: int) -> dict[str, int]:
    """VmRSS / VmHWM (peak RSS) of a process, in kB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


def _get(
    port: int, path: str, context: ssl.SSLContext, body: bytes | None = None
) -> tuple[int, bytes]:
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        headers = {"Content-Type": "application/json"}
        conn.request("POST" if body else "GET", path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def drive(args: argparse.Namespace) -> dict[str, Any]:
    """Start the fake API and the webhook, measure, stop both; return the figures."""
    work = Path(tempfile.mkdtemp(prefix="stszone-bench-"))
    child = [sys.executable, __file__, "--fake-api", *sys.argv[1:]]
    fake = subprocess.Popen(child, stdout=subprocess.PIPE, text=True)
    try:
        assert fake.stdout is not None
        fake_info = json.loads(fake.stdout.readline())
        kubeconfig = write_kubeconfig(work / "kubeconfig", server=fake_info["url"], token=TOKEN)
        port = _free_port()
        cmd = [sys.executable, "-m", "webhook", "serve", "--kubeconfig", str(kubeconfig)]
        cmd += ["--host", "127.0.0.1", "--port", str(port), "--certs-dir", str(work / "certs")]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        log = (work / "serve.log").open("w")
        started = time.monotonic()
        webhook = subprocess.Popen(cmd, stderr=log, env=env, cwd=ROOT)
        try:
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = (
                False,
                ssl.CERT_NONE,
            )  # dev CA appears later
            ready_after = None
            while time.monotonic() - started < args.timeout:
                try:
                    status, _ = _get(port, "/readyz", context)
                except OSError:
                    status = 0
                if status == 200:
                    ready_after = time.monotonic() - started
                    break
                time.sleep(0.1)
            memory = _status(webhook.pid)
            latencies = _mutate_latencies(port, context, args) if ready_after else []
            after = _status(webhook.pid)
        finally:
            webhook.send_signal(signal.SIGTERM)
            webhook.wait(30)
            log.close()
    finally:
        fake.kill()
        fake.wait()
    text = (work / "serve.log").read_text()
    synced = {
        m[0]: (int(m[1]), float(m[2]))
        for m in re.findall(r"(\w+) cache synced: (\d+) objects in ([\d.]+)s", text)
    }
    return {
        "objects": {"nodes": args.nodes, "pods": args.pods, "pvs": args.pods, "claims": args.pods},
        "api_bytes": fake_info["bytes"],
        "ready_seconds": ready_after,
        "peak_rss_mb_at_ready": memory["VmHWM"] / 1024,
        "rss_mb_at_ready": memory["VmRSS"] / 1024,
        "peak_rss_mb_after_requests": after["VmHWM"] / 1024,
        "caches": synced,
        "mutate_ms": latencies,
        "log_tail": text.splitlines()[-3:],
    }


def _mutate_latencies(port: int, context: ssl.SSLContext, args: argparse.Namespace) -> list[float]:
    """p50/p99/max milliseconds of /mutate for pods of the generated sets (data gravity lookups)."""
    timings = []
    for i in range(300):
        n = i * 331 % args.pods
        s, idx = divmod(n, args.per_set)
        pod = builders.sts_pod(f"set-{s:05d}", idx, namespace=f"ns-{s % 200:03d}")
        body = json.dumps(builders.review(pod)).encode()
        t0 = time.perf_counter()
        status, _ = _get(port, "/mutate", context, body)
        timings.append((time.perf_counter() - t0) * 1000)
        assert status == 200
    timings.sort()
    return [
        round(timings[len(timings) // 2], 2),
        round(timings[int(len(timings) * 0.99)], 2),
        round(timings[-1], 2),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument(
        "--pods", type=int, default=100_000, help="pods, and as many PVs and claims"
    )
    parser.add_argument("--per-set", type=int, default=50, help="pods per StatefulSet")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--fake-api", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fake_api:
        asyncio.run(serve_fake(args))
        return 0
    figures = drive(args)
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2))
    ok = figures["ready_seconds"] is not None and figures["ready_seconds"] < 30
    return 0 if ok and figures["peak_rss_mb_at_ready"] < 400 else 1


if __name__ == "__main__":
    sys.exit(main())
