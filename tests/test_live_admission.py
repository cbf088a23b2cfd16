"""The real app over TLS, its view fed live from the fake API server: answers follow the cluster.

Data gravity and the claim mutation read only the caches; the tests change the cluster through
the fake API and watch the admission answers change. The last test runs ``stszone serve`` itself
as a process with ``--kubeconfig``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from tests.conftest import ServeFactory
from tests.fakeapi import FakeApi, Fault, eventually
from tests.hang import HANG_GUARD
from tests.process import start_serve
from tests.served import Served
from webhook.cluster.credsource import load_credentials
from webhook.cluster.live import LiveView
from webhook.cluster.reflector import Tuning
from webhook.config import Settings
from webhook.server.runtime import Runtime
from webhook.wire.patch import apply

TUNING = Tuning(page_size=50, backoff_initial=0.02, backoff_cap=0.1, healthy_after=0.2)
ZONE_KEY = "topology.kubernetes.io/zone"


async def live_app(serve: ServeFactory, kubeconfig: Path) -> tuple[Served, LiveView]:
    """The app as ``stszone serve`` assembles it in live mode, on a free port over TLS."""
    settings = Settings(host="127.0.0.1", port=0)
    view = LiveView(settings, credentials=load_credentials(str(kubeconfig)), tuning=TUNING)
    runtime = Runtime(store=view.store, defaults=settings.defaults(), settings=settings)
    runtime.attach(view.run, check=view.ready)
    return await serve(runtime=runtime), view


async def mutate(served: Served, obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Send ``obj`` for CREATE to /mutate; return the patched object and the warnings."""
    status, body = await served.post_json("/mutate", b.review(obj))
    assert status == 200, body
    response = body["response"]
    assert response["allowed"], response
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    return apply(obj, patch), response.get("warnings", [])


def pinned_zone(pod: dict[str, Any]) -> str:
    """The zone the pod's required node affinity and stszone.io/zone annotation agree on."""
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    zones = {
        value
        for term in terms["nodeSelectorTerms"]
        for expr in term["matchExpressions"]
        if expr["key"] == ZONE_KEY
        for value in expr["values"]
    }
    annotation: str = pod["metadata"]["annotations"]["stszone.io/zone"]
    assert zones == {annotation}
    return annotation


def pv(name: str, zone: str, *, claim: str | None = None) -> dict[str, Any]:
    return b.pv(name, zone, claim=("cap", claim) if claim else None)


async def test_readyz_follows_the_caches(
    serve: ServeFactory, api: FakeApi, kubeconfig: Path
) -> None:
    """The listener answers at once; /readyz is 503 until the last cache is listed, then 200."""
    api.inject("persistentvolumeclaims", "list", *[Fault.status(500)] * 1000)
    served, view = await live_app(serve, kubeconfig)
    assert await served.get("/healthz") == (200, "ok\n")
    await eventually(lambda: len(api.seen("persistentvolumeclaims", "list")) >= 2)
    status, text = await served.get("/readyz")
    assert status == 503 and "claims cache not listed yet" in text and "HTTP 500" in text
    api.clear("persistentvolumeclaims", "list")
    await eventually(lambda: view.ready()[0])
    assert await served.get("/readyz") == (200, "ok\n")


async def test_a_volume_appearing_moves_the_pod(
    serve: ServeFactory, api: FakeApi, kubeconfig: Path
) -> None:
    """db-0's claim is bound to pv-cap-zone-c-1: missing, the rule (zone-a); present, zone-c."""
    recorded_pv = json.loads(api.objects.tables["persistentvolumes"][("", "pv-cap-zone-c-1")].body)
    api.delete("persistentvolumes", "pv-cap-zone-c-1")
    served, view = await live_app(serve, kubeconfig)
    await eventually(lambda: view.ready()[0])
    pod = b.sts_pod("db", 0, namespace="cap")
    placed, warnings = await mutate(served, pod)
    assert pinned_zone(placed) == "zone-a" and warnings == []
    api.put("persistentvolumes", recorded_pv)
    await eventually(lambda: view.store.volume("pv-cap-zone-c-1") is not None)
    placed, warnings = await mutate(served, pod)
    assert pinned_zone(placed) == "zone-c"
    assert warnings and "pv-cap-zone-c-1" in warnings[0] and "the rule says zone-a" in warnings[0]


async def test_a_claim_binding_moves_the_pod(
    serve: ServeFactory, api: FakeApi, kubeconfig: Path
) -> None:
    """Ordinal 5 goes to zone-c by rule until its claim binds to a zone-a volume."""
    api.put("persistentvolumeclaims", b.pvc("data-db-5", namespace="cap"))
    api.put("persistentvolumes", pv("pv-db-5", "zone-a"))
    served, view = await live_app(serve, kubeconfig)
    await eventually(lambda: view.ready()[0])
    pod = b.sts_pod("db", 5, namespace="cap")
    assert pinned_zone((await mutate(served, pod))[0]) == "zone-c"
    api.put("persistentvolumes", pv("pv-db-5", "zone-a", claim="data-db-5"))
    api.put("persistentvolumeclaims", b.pvc("data-db-5", namespace="cap", volume="pv-db-5"))
    await eventually(lambda: view.store.claim_zones("cap", "data-db-5", ZONE_KEY)[0] != "")
    assert pinned_zone((await mutate(served, pod))[0]) == "zone-a"
    api.delete("persistentvolumes", "pv-db-5")  # volume gone (reclaimed): back to the rule
    await eventually(lambda: view.store.volume("pv-db-5") is None)
    assert pinned_zone((await mutate(served, pod))[0]) == "zone-c"


def recorded_claim(name: str, *, namespace: str = "cap") -> dict[str, Any]:
    """The claim the StatefulSet controller created (recorded review 001), renamed."""
    claim: dict[str, Any] = b.fixture_review("001-PersistentVolumeClaim-CREATE")["request"][
        "object"
    ]
    claim["metadata"].update(name=name, namespace=namespace)
    return claim


async def with_template(api: FakeApi, view: LiveView) -> None:
    """Give StatefulSet cap/db a zone list and a storage-class template, through the API."""
    sts = json.loads(api.objects.tables["statefulsets"][("cap", "db")].body)
    sts["metadata"]["annotations"] = {
        "stszone.io/zones": "zone-a,zone-b,zone-c",
        "stszone.io/storage-class-template": "ssd-{zone}",
    }
    api.put("statefulsets", sts)
    await eventually(
        lambda: (
            "stszone.io/storage-class-template"
            in view.store.statefulsets[("cap", "db")].annotations
        )
    )


async def prebind(api: FakeApi, view: LiveView, volume: str, *, claim: str) -> None:
    """Make ``volume`` pre-bound by name to ``claim`` of namespace cap, which does not exist
    (deleted, as an admin does to restore a volume to a set): a claimRef without uid."""
    api.delete("persistentvolumeclaims", claim, namespace="cap")
    pv = json.loads(api.objects.tables["persistentvolumes"][("", volume)].body)
    pv["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": "cap", "name": claim}
    api.put("persistentvolumes", pv)
    await eventually(
        lambda: (
            view.store.volumes[volume].claim_uid == "" and ("cap", claim) not in view.store.claims
        )
    )


@pytest.mark.parametrize(
    ("claim", "prebound", "zone", "storage_class", "says"),
    [
        # no volume: ordinal 5 -> zones[5 mod 3], and the template's class
        ("data-db-5", False, "zone-c", "ssd-zone-c", "storageClassName manual -> ssd-zone-c"),
        # pv-cap-zone-c-1 names it in a claimRef without uid (pre-bound): its zone, its class kept
        ("data-db-0", True, "zone-c", "manual", "names volume pv-cap-zone-c-1: storageClassName kept"),
        # pv-cap-zone-c-1's claimRef names the uid of another data-db-0: the PV controller never
        # binds it to a claim being created (its uid comes after admission), so the rule places it
        ("data-db-0", False, "zone-a", "ssd-zone-a", "storageClassName manual -> ssd-zone-a"),
    ],
    ids=["unbound", "pre-bound", "bound-to-an-earlier-claim"],
)  # fmt: skip
async def test_claim_gets_zone_and_storage_class(
    serve: ServeFactory,
    api: FakeApi,
    kubeconfig: Path,
    claim: str,
    prebound: bool,
    zone: str,
    storage_class: str,
    says: str,
) -> None:
    """A StatefulSet's new claim gets stszone.io/zone and the template's StorageClass, unless a
    volume is pre-bound to it: Kubernetes binds it only if the classes match."""
    served, view = await live_app(serve, kubeconfig)
    await eventually(lambda: view.ready()[0])
    await with_template(api, view)
    if prebound:
        await prebind(api, view, "pv-cap-zone-c-1", claim=claim)
    mutated, warnings = await mutate(served, recorded_claim(claim))
    assert mutated["metadata"]["annotations"]["stszone.io/zone"] == zone
    assert mutated["spec"]["storageClassName"] == storage_class
    assert any(says in w for w in warnings), warnings


@pytest.mark.parametrize(
    ("claim", "namespace"),
    [
        ("scratch", "cap"),  # no StatefulSet naming scheme
        ("log-db-0", "cap"),  # db has no "log" template
        ("data-dbx-0", "cap"),  # no StatefulSet dbx
        ("data-db-0", "other"),  # db lives in cap, not here
        ("data-web-0", "verify"),  # web has no volumeClaimTemplates
        ("data-db-x", "cap"),  # not an ordinal
    ],
)
async def test_claims_of_other_owners_are_untouched(
    serve: ServeFactory, api: FakeApi, kubeconfig: Path, claim: str, namespace: str
) -> None:
    """Claims no watched StatefulSet template produces are allowed without a patch."""
    served, view = await live_app(serve, kubeconfig)
    await eventually(lambda: view.ready()[0])
    await with_template(api, view)
    status, body = await served.post_json(
        "/mutate", b.review(recorded_claim(claim, namespace=namespace))
    )
    assert status == 200 and body["response"]["allowed"]
    assert "patch" not in body["response"]


async def test_stszone_serve_runs_live_from_a_kubeconfig(
    api: FakeApi, kubeconfig: Path, tmp_path: Path, stopper: list[subprocess.Popen[bytes]]
) -> None:
    """``stszone serve --kubeconfig`` goes ready, logs its zone source, answers, stops on SIGTERM."""
    args = ["--kubeconfig", str(kubeconfig), "--zones", "zone-b,zone-c,zone-a"]
    # In threads: the fake API server runs on this test's event loop, which must keep serving.
    server = await asyncio.to_thread(start_serve, tmp_path, *args, ready="/readyz")
    stopper.append(server.proc)
    pod = b.sts_pod("db", 7, namespace="cap")
    review = json.dumps(b.review(pod)).encode()
    status, body = await asyncio.to_thread(server.post, "/mutate", review)
    assert status == 200, body
    response = json.loads(body)["response"]
    patched = apply(pod, json.loads(base64.b64decode(response["patch"])))
    assert pinned_zone(patched) == "zone-c"  # --zones order: ordinal 7 -> zones[1]
    server.terminate()
    assert await asyncio.to_thread(server.proc.wait, HANG_GUARD) == 0
    text = server.log.read_text()
    assert "live view from kubeconfig" in text
    assert "zone source: --zones zone-b,zone-c,zone-a (discovery ignored)" in text, text
