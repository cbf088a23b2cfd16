"""The real wire: recorded and built AdmissionReviews sent over TLS to the running app."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from tests.conftest import ServeFactory
from tests.hang import HANG_GUARD
from webhook import cli
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import MAX_BODY, Settings
from webhook.model.store import Store
from webhook.server.runtime import Runtime
from webhook.wire.patch import apply

FIXTURES = Path(__file__).parent / "fixtures"
RECORDED = sorted(p.stem for p in (FIXTURES / "admission").glob("0*.json"))


def recorded_cluster() -> Store:
    """The cluster the reviews were recorded in (nodes, PVs, claims, sets, pods)."""
    names = ("nodes-metadata-list", "pv-list", "pvc-list", "statefulsets-list", "sts-pods-list")
    return store_from_objects([b.fixture_api(name) for name in names])


def decoded_patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert response["patchType"] == "JSONPatch"
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return patch


@pytest.mark.parametrize("name", RECORDED)
async def test_every_recorded_review_is_answered_well_formed(
    serve: ServeFactory, name: str
) -> None:
    """Each body a real API server sent gets a v1 AdmissionReview echoing its uid; patches apply."""
    served = await serve(store=recorded_cluster())
    sent = b.fixture_review(name)
    path = "/mutate" if int(name[:3]) % 2 else "/validate"
    status, body = await served.post_json(path, sent)
    assert status == 200
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    response = body["response"]
    assert response["uid"] == sent["request"]["uid"]
    assert isinstance(response["allowed"], bool)
    if "patch" in response:
        apply(sent["request"]["object"], decoded_patch(response))


@pytest.mark.parametrize(
    ("name", "zone"),
    [
        ("003-Pod-CREATE", "zone-c"),  # db-0: claim data-db-0 bound to pv-cap-zone-c-1
        ("007-Pod-CREATE", "zone-a"),  # db-1: pv-cap-zone-a-2
        ("011-Pod-CREATE", "zone-b"),  # db-2: pv-cap-zone-b-1
        ("017-Pod-CREATE", "zone-c"),  # db-3: pv-cap-zone-c-2
        ("021-Pod-CREATE", "zone-b"),  # db-4: pv-cap-zone-b-2
    ],
)
async def test_recorded_pods_follow_their_recorded_volumes(
    serve: ServeFactory, name: str, zone: str
) -> None:
    """In the recorded cluster each db-N claim is bound to a zone-pinned PV: the pod goes there."""
    served = await serve(store=recorded_cluster())
    sent = b.fixture_review(name)
    _, body = await served.post_json("/mutate", sent)
    pod = apply(sent["request"]["object"], decoded_patch(body["response"]))
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}
            ]
        }
    ]
    assert pod["metadata"]["annotations"]["stszone.io/zone"] == zone
    ordinal = int(pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"])
    rule = ("zone-a", "zone-b", "zone-c")[ordinal % 3]
    warned = any("data-db" in w for w in body["response"].get("warnings", []))
    assert warned == (rule != zone)


async def test_reinvocation_over_the_wire_gives_no_patch(serve: ServeFactory) -> None:
    """The mutated pod sent back (reinvocationPolicy IfNeeded) comes back without a patch."""
    served = await serve(store=store_from_objects([], zones=("a", "b", "c")))
    sent = b.fixture_review("007-Pod-CREATE")
    _, first = await served.post_json("/mutate", sent)
    sent["request"]["object"] = apply(sent["request"]["object"], decoded_patch(first["response"]))
    _, second = await served.post_json("/mutate", sent)
    assert second["response"]["allowed"] is True and "patch" not in second["response"]


async def test_dry_run_is_answered_like_a_real_request(serve: ServeFactory) -> None:
    """dryRun: true gets exactly the same response (sideEffects: NoneOnDryRun)."""
    served = await serve(store=store_from_objects([], zones=("a", "b", "c")))
    pod = b.sts_pod(ordinal=2)
    _, real = await served.post_json("/mutate", b.review(pod, uid="u1"))
    _, dry = await served.post_json("/mutate", b.review(pod, uid="u1", dry_run=True))
    assert dry == real and "patch" in real["response"]
    conflicted = b.sts_pod(ordinal=0, node_selector={"topology.kubernetes.io/zone": "b"})
    _, real = await served.post_json("/mutate", b.review(conflicted, uid="u2"))
    _, dry = await served.post_json("/mutate", b.review(conflicted, uid="u2", dry_run=True))
    assert dry == real and real["response"]["allowed"] is False


async def test_v1beta1_is_answered_in_v1beta1(serve: ServeFactory) -> None:
    """An admission.k8s.io/v1beta1 review gets a v1beta1 response with the same decision."""
    served = await serve(store=store_from_objects([], zones=("a", "b", "c")))
    _, body = await served.post_json(
        "/mutate", b.review(b.sts_pod(ordinal=1), api_version="admission.k8s.io/v1beta1")
    )
    assert body["apiVersion"] == "admission.k8s.io/v1beta1"
    assert decoded_patch(body["response"])


async def test_denial_carries_status_for_kubectl(serve: ServeFactory) -> None:
    """A denial is allowed: false with a Status (code, reason, message) kubectl prints."""
    served = await serve(store=store_from_objects([], zones=("a", "b", "c")))
    pod = b.sts_pod(
        ordinal=0, affinity=b.zone_affinity([("topology.kubernetes.io/zone", "In", ["b"])])
    )
    _, body = await served.post_json("/mutate", b.review(pod))
    response = body["response"]
    assert response["allowed"] is False and "patch" not in response
    assert response["status"]["code"] == 403
    assert "topology.kubernetes.io/zone In [b]" in response["status"]["message"]


@pytest.mark.parametrize(
    ("data", "content_type", "status", "says"),
    [
        (b"{not json", "application/json", 400, "not valid JSON"),
        (b"[]", "application/json", 400, "not an AdmissionReview: Expected `object`, got `array`"),
        (b'{"kind": "Pod"}', "application/json", 400, "kind must be AdmissionReview"),
        (
            b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v2"}',
            "application/json",
            400,
            "apiVersion",
        ),
        (
            b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}',
            "application/json",
            400,
            "request",
        ),
        (
            b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {"uid": 5}}',
            "application/json",
            400,
            "uid",
        ),
        (
            b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {"uid": "x", "operation": "CREATE", "object": []}}',
            "application/json",
            400,
            "request.object",
        ),
        (
            b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {"uid": "x", "kind": "Pod"}}',
            "application/json",
            400,
            "Expected `object`, got `str` - at `$.request.kind`",
        ),
        (
            b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {"uid": "x", "operation": "CREATE", "dryRun": "yes"}}',
            "application/json",
            400,
            "Expected `bool`, got `str` - at `$.request.dryRun`",
        ),
        (
            b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {"uid": "x", "operation": "CREATE", "userInfo": {"username": 5}}}',
            "application/json",
            400,
            "Expected `str`, got `int` - at `$.request.userInfo.username`",
        ),
        (b"{}", "text/plain", 400, "Content-Type"),
        (b"\xff\xfe", "application/json", 400, "not valid JSON"),
        (b'{"request": {"uid": "\\ud800"}}', "application/json", 400, "not valid JSON"),
        (
            b'{"request": {"object": {"spec": {"replicas": NaN}}}}',
            "application/json",
            400,
            "not valid JSON",
        ),
        (
            b'{"request": {"object": {"metadata": {"managedFields": ["\xff"]}}}}',
            "application/json",
            400,
            "not valid JSON",
        ),
        (b"[" * 100_000, "application/json", 400, "not valid JSON"),
    ],
)
async def test_malformed_bodies_get_a_clear_400(
    serve: ServeFactory, data: bytes, content_type: str, status: int, says: str
) -> None:
    """Never a 500, never a traceback: a 4xx with a one-line reason."""
    served = await serve()
    got, text = await served.post_raw("/mutate", data, content_type=content_type)
    assert (got, says in text) == (status, True), text
    assert text.endswith("\n") and text.count("\n") == 1, text  # one line
    assert "Traceback" not in text


async def test_body_cap_is_seven_mebibytes(serve: ServeFactory) -> None:
    """A 6 MiB review (a large object) is answered; one over 7 MiB gets 413."""
    served = await serve(store=store_from_objects([], zones=("a", "b", "c")))
    pod = b.sts_pod(ordinal=0)
    pod["metadata"]["annotations"] = {"big": "x" * (6 * 1024 * 1024)}
    status, body = await served.post_json("/mutate", b.review(pod))
    assert status == 200 and body["response"]["allowed"] is True
    pod["metadata"]["annotations"] = {"big": "x" * (7 * 1024 * 1024 + 1)}
    status, _ = await served.post_raw("/mutate", json.dumps(b.review(pod)).encode())
    assert status == 413


def review_of_size(size: int) -> bytes:
    """A Pod CREATE review of exactly ``size`` bytes (a large annotation makes it so)."""
    pod = b.sts_pod(ordinal=0)
    pod["metadata"]["annotations"] = {"big": ""}
    pad = size - len(json.dumps(b.review(pod)).encode())
    pod["metadata"]["annotations"] = {"big": "x" * pad}
    body = json.dumps(b.review(pod)).encode()
    assert len(body) == size
    return body


@pytest.mark.parametrize("size", [MAX_BODY, MAX_BODY + 1])
async def test_offline_review_refuses_what_the_server_refuses_for_its_size(
    serve: ServeFactory,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    size: int,
) -> None:
    """`stszone review` of a body at the cap is answered, as `serve` answers it; one byte over
    is refused (exit 2, one line naming the 413 serve gives it), not answered offline as if
    the server would have taken it."""
    body = review_of_size(size)
    served = await serve(store=store_from_objects([], zones=("a", "b", "c")))
    status, _ = await served.post_raw("/mutate", body)
    path = tmp_path / "review.json"
    path.write_bytes(body)
    exit_status = cli.main(["review", "--zones", "a,b,c", str(path)])
    out, err = capsys.readouterr()
    if status == 200:
        assert (exit_status, err) == (0, "") and json.loads(out)["response"]["allowed"] is True
    else:
        assert (status, exit_status, out) == (413, 2, "")
        assert f"{size} bytes, over the {MAX_BODY} byte" in err and "413" in err, err
        assert err.count("\n") == 1, err


async def test_health_endpoints(serve: ServeFactory) -> None:
    """/healthz is always cheap; /readyz follows the registered checks."""
    served = await serve()
    assert await served.get("/healthz") == (200, "ok\n")
    assert await served.get("/readyz") == (200, "ok\n")
    served.runtime.checks.append(lambda: (False, "nodes cache not synced"))
    status, text = await served.get("/readyz")
    assert status == 503 and "nodes cache not synced" in text


@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/healthz"), ("GET", "/nope"), ("GET", "/mutate")]
)
async def test_no_server_version_banner(serve: ServeFactory, method: str, path: str) -> None:
    """Responses (aiohttp's own 404 and 405 included) do not advertise Python and aiohttp."""
    served = await serve()
    async with served.session.request(method, served.url + path, ssl=served.ssl) as resp:
        assert resp.headers.get("Server") == "stszone"


async def test_malformed_http_is_a_one_line_400(serve: ServeFactory) -> None:
    """A request line that is not HTTP gets aiohttp's protocol-level 400, which says why in one
    line (it is written before any route is found, with aiohttp's own Server header)."""
    served = await serve()
    host, port = served.url.removeprefix("https://").split(":")
    reader, writer = await asyncio.open_connection(
        host, int(port), ssl=served.ssl, server_hostname=host
    )
    writer.write(b"NOT HTTP AT ALL\r\n\r\n")
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(4096), timeout=HANG_GUARD)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"400"
    assert body.startswith(b"Invalid method encountered") and b"Traceback" not in body


async def test_a_background_job_that_dies_fails_readiness_at_once(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A job that ends with an error (say, a metrics port in use) is logged when it happens and
    /readyz names it, instead of the server claiming to be ready without it."""

    async def metrics_port_taken() -> None:
        raise OSError(98, "address already in use")

    settings = Settings(host="127.0.0.1", port=0)
    runtime = Runtime(store=Store(), defaults=settings.defaults(), settings=settings)
    runtime.jobs.append(metrics_port_taken)
    served = await serve(runtime=runtime)
    await asyncio.sleep(0.05)
    status, text = await served.get("/readyz")
    assert status == 503 and "metrics_port_taken failed" in text and "already in use" in text
    assert any("metrics_port_taken failed" in r.getMessage() for r in caplog.records)


async def test_an_observer_that_fails_is_logged_and_the_answer_and_others_stand(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Observers (metrics, the decision log) run after the answer is written: one that fails
    cannot reach the client; it is logged, and the observers after it still run."""
    seen: list[tuple[str, int]] = []

    def broken(*_: object) -> None:
        raise RuntimeError("a bug in an observer")

    settings = Settings(host="127.0.0.1", port=0)
    runtime = Runtime(
        store=Store(zones=("a", "b", "c")), defaults=settings.defaults(), settings=settings
    )
    runtime.observers[:] = [
        broken,
        lambda endpoint, _r, _o, _s, status: seen.append((endpoint, status)),
    ]
    served = await serve(runtime=runtime)
    with caplog.at_level("ERROR", logger="stszone.server"):
        status, body = await served.post_json("/mutate", b.fixture_review("003-Pod-CREATE"))
        assert status == 200 and body["response"]["allowed"] is True
        status, _ = await served.post_raw("/validate", b"{")
        assert status == 400
    assert seen == [("mutate", 200), ("validate", 400)]
    assert "internal error observing a request to /mutate" in caplog.text
    assert "a bug in an observer" in caplog.text
