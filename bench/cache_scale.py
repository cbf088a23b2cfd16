"""Scale benchmark of the live view: time to ready, peak memory and event-loop stalls.

    python bench/cache_scale.py                          # 5k nodes, 100k pods/PVs/claims
    python bench/cache_scale.py --pods 10000             # a quicker run
    python bench/cache_scale.py --sweep 10000,50000,100000 --plot docs/cache-growth.png

Three processes, so the figures are the webhook's own: this driver; the fake API server of the
tests (``tests/fakeapi.py``) filled with generated objects, each built from a recorded fixture
object (same shape and size, managedFields and all: about 5 KB per pod, 1.9 KB per PV, 1.3 KB
per claim, 3.9 KB per node); and the real ``stszone serve --kubeconfig`` pointed at it. The
driver polls ``/readyz`` over TLS from the moment it spawns the webhook, then reads the webhook's
peak resident set (``VmHWM`` in /proc) and times a few hundred ``/mutate`` calls against the
full caches.

While the lists load, admission requests are served too: from the moment the webhook accepts
connections until it is ready, an open-loop client (``bench/openloop.py``, ``--stall-rate``
requests/s over eight keep-alive connections) sends ``/mutate`` reviews of generated pods. Each
latency counts from the request's scheduled time, so a request that waited behind a stopped
event loop shows the whole wait: the worst one bounds the longest stall of the loop while
pages were folded. The webhook's own loop-lag probe (``stszone_event_loop_lag_*`` on
``/metrics``, a task that sleeps 5 ms and notes how late it wakes) is read once it is ready: the
same stalls seen from inside, without the client's share of its core, and how much of the
worst one the loop's own work can explain (its CPU time over the probe's sleep; the rest is the
process waiting for a core, which a shared machine adds). Targets: ready
in under 8 s, under 250 MB peak RSS, and no admission request delayed by more than 20 ms (and
no loop lag over 20 ms) while listing. ``--profile DIR`` runs py-spy on the webhook from its
start and prints the top frames (its timings are then not the ones to report). ``--sweep`` runs
several sizes one after the other and prints the growth table (``--plot`` draws it, with
matplotlib).
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
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import openloop  # noqa: E402
from bench.run import PY_SPY, summarise_profile  # noqa: E402
from tests import builders  # noqa: E402
from tests.fakeapi import FakeApi  # noqa: E402
from tests.fakestate import API_FIXTURES, Stored  # noqa: E402
from tests.kubeconfig import write_kubeconfig  # noqa: E402

TOKEN = "bench-token"
ZONES = ("zone-a", "zone-b", "zone-c")
TARGET_READY_S, TARGET_RSS_MB, TARGET_STALL_MS = 8.0, 250.0, 20.0
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


def _pinned(cmd: list[str], core: int | None) -> list[str]:
    return cmd if core is None else ["taskset", "-c", str(core), *cmd]


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


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def _pod_review(args: argparse.Namespace, i: int) -> bytes:
    """A review of the ``i``-th sampled pod of the generated sets (it finds its set, claim and
    volume: data gravity lookups)."""
    n = i * 331 % args.pods
    s, idx = divmod(n, args.per_set)
    pod = builders.sts_pod(f"set-{s:05d}", idx, namespace=f"ns-{s % 200:03d}")
    return json.dumps(builders.review(pod)).encode()


def _pod_reviews(args: argparse.Namespace, count: int = 50) -> list[bytes]:
    """``/mutate`` requests (HTTP bytes) for ``count`` sampled pods."""
    return [openloop.request_bytes("/mutate", _pod_review(args, i)) for i in range(count)]


class ListingLoad:
    """Admission requests at a fixed rate while the lists load, in a thread of its own."""

    def __init__(self, port: int, context: ssl.SSLContext, args: argparse.Namespace) -> None:
        self.ready = threading.Event()
        self.result = openloop.Result()
        self._thread = threading.Thread(
            target=asyncio.run,
            args=(
                openloop.together(
                    host="127.0.0.1",
                    ports=[port],
                    ctx=context,
                    requests=_pod_reviews(args),
                    rate=args.stall_rate,
                    duration=args.timeout,
                    connections=8,
                    results=[self.result],
                    until=self.ready.is_set,
                ),
            ),
            daemon=True,
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        self.ready.set()
        self._thread.join(30)
        latencies = sorted(self.result.latencies)
        return {
            "requests": len(latencies),
            "failed": self.result.failed,
            "p50_ms": round(openloop.percentile(latencies, 50) * 1e3, 2),
            "p99_ms": round(openloop.percentile(latencies, 99) * 1e3, 2),
            "max_ms": round(latencies[-1] * 1e3, 2) if latencies else None,
        }


def drive(args: argparse.Namespace) -> dict[str, Any]:
    """Start the fake API and the webhook, measure, stop both; return the figures."""
    work = Path(tempfile.mkdtemp(prefix="stszone-bench-"))
    child = [sys.executable, __file__, "--fake-api", "--nodes", str(args.nodes)]
    child += ["--pods", str(args.pods), "--per-set", str(args.per_set)]
    fake = subprocess.Popen(_pinned(child, args.client_core), stdout=subprocess.PIPE, text=True)
    try:
        assert fake.stdout is not None
        fake_info = json.loads(fake.stdout.readline())
        kubeconfig = write_kubeconfig(work / "kubeconfig", server=fake_info["url"], token=TOKEN)
        port = _free_port()
        cmd = [sys.executable, "-m", "webhook", "serve", "--kubeconfig", str(kubeconfig)]
        cmd += ["--host", "127.0.0.1", "--port", str(port), "--certs-dir", str(work / "certs")]
        env = {**os.environ, "PYTHONPATH": str(args.root)}
        log = (work / "serve.log").open("w")
        started = time.monotonic()
        webhook = subprocess.Popen(
            _pinned(cmd, args.server_core), stderr=log, env=env, cwd=args.root
        )
        spy = _spy(webhook.pid, args) if args.profile else None
        try:
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = (
                False,
                ssl.CERT_NONE,
            )  # dev CA appears later
            load = ListingLoad(port, context, args)
            ready_after = listening_after = None
            while time.monotonic() - started < args.timeout:
                try:
                    status, _ = _get(port, "/readyz", context)
                except OSError:
                    status = 0
                if status and listening_after is None:
                    listening_after = time.monotonic() - started
                    load.start()
                if status == 200:
                    ready_after = time.monotonic() - started
                    break
                time.sleep(0.1)
            listing = load.stop() if listening_after is not None else {}
            lag = _loop_lag(port, context)
            memory = _status(webhook.pid)
            cpu = _cpu_seconds(webhook.pid)
            latencies = _mutate_latencies(port, context, args) if ready_after else []
            after = _status(webhook.pid)
        finally:
            webhook.send_signal(signal.SIGTERM)
            webhook.wait(30)
            log.close()
            if spy is not None:
                spy.wait(30)
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
        "listening_seconds": listening_after,
        "ready_seconds": ready_after,
        "cpu_seconds_at_ready": cpu,
        "peak_rss_mb_at_ready": memory["VmHWM"] / 1024,
        "rss_mb_at_ready": memory["VmRSS"] / 1024,
        "peak_rss_mb_after_requests": after["VmHWM"] / 1024,
        "mutate_while_listing": listing,
        "loop_lag_until_ready": lag,
        "caches": synced,
        "mutate_ms": latencies,
        "log_tail": text.splitlines()[-3:],
        **({"profile": summarise_profile(args.profile / "serve.pyspy.txt")} if spy else {}),
    }


def _spy(pid: int, args: argparse.Namespace) -> subprocess.Popen[bytes]:
    """py-spy on the webhook from its start until it stops (on the client core), raw stacks.

    py-spy pauses the process for each sample, so a profiled run's timings are not reported.
    """
    args.profile.mkdir(parents=True, exist_ok=True)
    raw = args.profile / "serve.pyspy.txt"
    command = [PY_SPY, "record", "-r", "250", "-p", str(pid), "--format", "raw", "-o", str(raw)]
    return subprocess.Popen(
        _pinned(command, args.client_core), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _loop_lag(port: int, context: ssl.SSLContext) -> dict[str, Any]:
    """The webhook's own event-loop lag probe so far (``/metrics``): worst wake, and wakes
    later than the stall target; empty for a webhook without the probe (an older ``--root``)."""
    status, text = _get(port, "/metrics", context)
    samples = {
        (sample.name, sample.labels.get("le")): sample.value
        for family in text_string_to_metric_families(text.decode())
        for sample in family.samples
        if family.name.startswith("stszone_event_loop_")
    }
    if status != 200 or not samples:
        return {}
    wakes = samples[("stszone_event_loop_lag_seconds_count", None)]
    on_time = samples[("stszone_event_loop_lag_seconds_bucket", repr(TARGET_STALL_MS / 1000))]
    busy = samples.get(("stszone_event_loop_busy_lag_max_seconds", None))
    return {
        "max_ms": round(samples[("stszone_event_loop_lag_max_seconds", None)] * 1e3, 2),
        # The most of one lag the loop's own work can explain (the rest: waiting for a core).
        "busy_max_ms": round(busy * 1e3, 2) if busy is not None else None,
        "wakes": int(wakes),
        f"over_{TARGET_STALL_MS:g}_ms": int(wakes - on_time),
    }


def met(figures: dict[str, Any]) -> dict[str, bool]:
    """Each target, met or not, for one run at the default size."""
    stall = figures["mutate_while_listing"].get("max_ms")
    lag = figures["loop_lag_until_ready"].get("max_ms")
    busy = figures["loop_lag_until_ready"].get("busy_max_ms")
    return {
        f"ready < {TARGET_READY_S:g} s": figures["ready_seconds"] is not None
        and figures["ready_seconds"] < TARGET_READY_S,
        f"peak RSS < {TARGET_RSS_MB:g} MB": figures["peak_rss_mb_at_ready"] < TARGET_RSS_MB,
        f"worst /mutate wait while listing < {TARGET_STALL_MS:g} ms": stall is not None
        and stall < TARGET_STALL_MS,
        f"worst event-loop lag until ready <= {TARGET_STALL_MS:g} ms": lag is not None
        and lag <= TARGET_STALL_MS,
        f"worst lag of the loop's own work until ready <= {TARGET_STALL_MS:g} ms": busy is not None
        and busy <= TARGET_STALL_MS,
    }


def _mutate_latencies(port: int, context: ssl.SSLContext, args: argparse.Namespace) -> list[float]:
    """p50/p99/max milliseconds of /mutate for pods of the generated sets, once ready."""
    timings = []
    for i in range(300):
        body = _pod_review(args, i)
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


def growth(runs: list[dict[str, Any]], plot: Path | None) -> str:
    """The growth table of a sweep (and its plot, when asked for)."""
    lines = [
        "| pods, PVs, claims each | nodes | ready (s) | peak RSS (MB) | worst /mutate wait "
        "while listing (ms) | worst loop lag until ready, of it own work at most (ms) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        objects = run["objects"]
        lines.append(
            f"| {objects['pods']:,} | {objects['nodes']:,} | {run['ready_seconds']:.1f} | "
            f"{run['peak_rss_mb_at_ready']:.0f} | {run['mutate_while_listing'].get('max_ms')} | "
            f"{run['loop_lag_until_ready'].get('max_ms')}, "
            f"{run['loop_lag_until_ready'].get('busy_max_ms')} |"
        )
    if plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot

        sizes = [run["objects"]["pods"] / 1000 for run in runs]
        figure, (ready, rss) = pyplot.subplots(1, 2, figsize=(9, 3.5))
        ready.plot(sizes, [run["ready_seconds"] for run in runs], "o-")
        ready.set(xlabel="thousands of pods, PVs and claims each", ylabel="ready (s)")
        rss.plot(sizes, [run["peak_rss_mb_at_ready"] for run in runs], "o-", color="tab:red")
        rss.set(xlabel="thousands of pods, PVs and claims each", ylabel="peak RSS (MB)")
        for axes in (ready, rss):
            axes.set_ylim(bottom=0)
            axes.grid(alpha=0.3)
        figure.suptitle(f"stszone live view, {runs[0]['objects']['nodes']:,} nodes")
        figure.tight_layout()
        plot.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(plot, dpi=100)
    return "\n".join(lines)


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
    parser.add_argument(
        "--stall-rate",
        type=float,
        default=200.0,
        help="/mutate requests per second while the lists load (default 200)",
    )
    parser.add_argument(
        "--sweep", metavar="N,N,...", help="run at each of these --pods sizes; print the growth"
    )
    parser.add_argument("--plot", type=Path, help="with --sweep: draw the growth into this PNG")
    parser.add_argument("--server-core", type=int, default=0, help="core stszone runs on")
    parser.add_argument(
        "--client-core",
        type=int,
        default=1,
        help="core of the fake API server and of this driver (with its request load)",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=ROOT,
        help="run `stszone serve` from this source tree (e.g. an older checkout to compare)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="py-spy the webhook from start to stop; raw stacks into DIR, the top frames printed",
    )
    parser.add_argument("--fake-api", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fake_api:
        asyncio.run(serve_fake(args))
        return 0
    os.sched_setaffinity(0, {args.client_core})
    if args.sweep:
        runs = [
            drive(argparse.Namespace(**{**vars(args), "pods": int(n)}))
            for n in args.sweep.split(",")
        ]
        for run in runs:
            print(
                json.dumps(
                    {
                        k: run[k]
                        for k in (
                            "objects",
                            "ready_seconds",
                            "peak_rss_mb_at_ready",
                            "mutate_while_listing",
                            "loop_lag_until_ready",
                        )
                    }
                )
            )
        print(growth(runs, args.plot))
        if args.json:
            args.json.write_text(json.dumps(runs, indent=2))
        return 0
    figures = drive(args)
    figures["targets"] = met(figures)
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2))
    return 0 if all(figures["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
