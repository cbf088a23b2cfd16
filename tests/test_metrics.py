"""/metrics of the real app over TLS, scraped after real requests and parsed as Prometheus does."""

from __future__ import annotations

import re
import socket
import ssl
from pathlib import Path

import aiohttp
from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families

from tests import builders as b
from tests import poolsim as sim
from tests.conftest import ServeFactory
from tests.fakeapi import FakeApi, eventually
from tests.rawhttp import FIXTURE, connected, request, response
from tests.served import Served
from tests.test_extender import SETTINGS, BrokenStore, args
from tests.test_nodepool_scaling import REMOVE, pool, skewed
from webhook.cluster.credsource import load_credentials
from webhook.cluster.live import LiveView
from webhook.cluster.reflector import Tuning
from webhook.config import Settings
from webhook.install.certfiles import DevCerts
from webhook.model.store import Store
from webhook.rules.decision import allow
from webhook.server import metrics
from webhook.server.app import install_metrics
from webhook.server.runtime import Runtime
from webhook.server.tls import CertReloader
from webhook.wire import review

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of an exposition: (name, labels) -> value (the parser rejects bad syntax)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def scrape(served: Served) -> Samples:
    status, text = await served.get("/metrics")
    assert status == 200, text
    return parse(text)


def runtime_with_metrics(store: Store, settings: Settings | None = None) -> Runtime:
    settings = settings or Settings(host="127.0.0.1", port=0)
    runtime = Runtime(store=store, defaults=settings.defaults(), settings=settings)
    install_metrics(runtime)
    return runtime


def not_after(cert: Path) -> float:
    """notAfter of a PEM certificate file, as Unix time."""
    return x509.load_pem_x509_certificate(cert.read_bytes()).not_valid_after_utc.timestamp()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_requests_are_counted_by_endpoint_kind_and_result(serve: ServeFactory) -> None:
    """patched, allowed, denied (with its reason) and error each land in their own series."""
    served = await serve(runtime=runtime_with_metrics(Store(zones=("a", "b", "c"))))
    conflicting = b.sts_pod("db", 1, node_selector={"topology.kubernetes.io/zone": "x"})
    for obj in (b.sts_pod("db", 0), b.sts_pod("db", 2), b.plain_pod(), conflicting):
        status, _ = await served.post_json("/mutate", b.review(obj))
        assert status == 200
    status, _ = await served.post_raw("/mutate", b"{not json")
    assert status == 400
    status, _ = await served.post_json("/validate", b.review(b.scale("db", replicas=2)))
    assert status == 200

    samples = await scrape(served)
    requests = "stszone_requests_total"
    assert value(samples, requests, endpoint="mutate", kind="Pod", result="patched") == 2
    assert value(samples, requests, endpoint="mutate", kind="Pod", result="allowed") == 1
    assert value(samples, requests, endpoint="mutate", kind="Pod", result="denied") == 1
    assert value(samples, requests, endpoint="mutate", kind="", result="error") == 1
    assert sum(v for (n, _), v in samples.items() if n == requests) == 6
    denials = {
        dict(labels)["reason"]: v
        for (name, labels), v in samples.items()
        if name == "stszone_denials_total" and v
    }
    assert denials == {"ZoneConflict": 1}
    count = "stszone_request_duration_seconds_count"
    assert value(samples, count, endpoint="mutate") == 5
    assert value(samples, count, endpoint="validate") == 1
    inf = value(samples, "stszone_request_duration_seconds_bucket", endpoint="mutate", le="+Inf")
    assert inf == 5
    assert value(samples, "stszone_in_flight_requests") == 0


async def test_offline_view_reports_its_tables(serve: ServeFactory) -> None:
    """A file-loaded view: every loaded table synced with its size; unloaded ones not synced."""
    store = Store(zones=("a", "b"))
    store.replace("nodes", [])
    served = await serve(runtime=runtime_with_metrics(store))
    samples = await scrape(served)
    assert value(samples, "stszone_cache_synced", resource="nodes") == 1
    assert value(samples, "stszone_cache_synced", resource="pods") == 0
    assert value(samples, "stszone_cache_objects", resource="pods") == 0
    assert ("stszone_watch_restarts_total", frozenset({("resource", "pods")})) in samples


async def test_certificate_expiry_is_the_served_certificate(
    serve: ServeFactory, dev_certs: DevCerts
) -> None:
    """The gauge is the notAfter of the certificate the reloader serves, as Unix time."""
    reloader = CertReloader(dev_certs.cert, dev_certs.key)
    settings = Settings(host="127.0.0.1", port=0)
    runtime = Runtime(store=Store(), defaults=settings.defaults(), settings=settings)
    install_metrics(runtime, certificate=lambda: reloader.not_after)
    served = await serve(runtime=runtime)
    samples = await scrape(served)
    expiry = value(samples, "stszone_certificate_expiry_timestamp_seconds")
    assert expiry == not_after(dev_certs.cert)


async def test_two_apps_keep_separate_counts(serve: ServeFactory) -> None:
    """Each app has its own registry: requests to one never show in the other."""
    one = await serve(runtime=runtime_with_metrics(Store(zones=("a",))))
    two = await serve(runtime=runtime_with_metrics(Store(zones=("a",))))
    await one.post_json("/mutate", b.review(b.sts_pod("db", 0)))
    total = "stszone_request_duration_seconds_count"
    assert value(await scrape(one), total, endpoint="mutate") == 1
    assert value(await scrape(two), total, endpoint="mutate") == 0


async def test_metrics_port_serves_plain_http_and_leaves_the_webhook_port(
    serve: ServeFactory,
) -> None:
    """With --metrics-port, /metrics is plain HTTP there and absent from the TLS port."""
    port = free_port()
    settings = Settings(host="127.0.0.1", port=0, metrics_port=port)
    served = await serve(runtime=runtime_with_metrics(Store(zones=("a",)), settings))
    await served.post_json("/mutate", b.review(b.sts_pod("db", 0)))
    assert (await served.get("/metrics"))[0] == 404
    assert (await served.get("/healthz"))[0] == 200
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as resp,
    ):
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain; version=")
        samples = parse(await resp.text())
    requests = "stszone_requests_total"
    assert value(samples, requests, endpoint="mutate", kind="Pod", result="patched") == 1


TUNING = Tuning(page_size=50, backoff_initial=0.02, backoff_cap=0.1, healthy_after=0.2)


async def test_live_caches_and_watch_restarts(
    serve: ServeFactory, api: FakeApi, kubeconfig: Path
) -> None:
    """Live view: synced and sized per resource as listed; a dropped watch counts a restart."""
    settings = Settings(host="127.0.0.1", port=0)
    view = LiveView(settings, credentials=load_credentials(str(kubeconfig)), tuning=TUNING)
    runtime = Runtime(store=view.store, defaults=settings.defaults(), settings=settings)
    runtime.attach(view.run, check=view.ready)
    install_metrics(runtime, caches=view.statuses)
    served = await serve(runtime=runtime)
    await eventually(lambda: all(s.synced for s in view.statuses()))

    samples = await scrape(served)
    listed = {
        "nodes": len(api.objects.tables["nodes"]),
        "volumes": len(api.objects.tables["persistentvolumes"]),
        "statefulsets": len(api.objects.tables["statefulsets"]),
    }
    for resource, count in listed.items():
        assert value(samples, "stszone_cache_synced", resource=resource) == 1
        assert value(samples, "stszone_cache_objects", resource=resource) == count > 0
        assert value(samples, "stszone_cache_last_sync_timestamp_seconds", resource=resource) > 0
    before = value(samples, "stszone_watch_restarts_total", resource="nodes")

    await api.wait_watching("nodes")
    api.cut("nodes")
    await eventually(lambda: view.statuses()[0].restarts > before)
    after = value(await scrape(served), "stszone_watch_restarts_total", resource="nodes")
    assert after >= before + 1


def test_histogram_buckets_are_cumulative_and_bounds_inclusive() -> None:
    """A duration on a bucket's bound counts in it ("le"); each bucket includes the ones below;
    a client inventing kinds is folded into kind="other" past the series bound."""
    m = metrics.Metrics()
    durations = [0.0005, 0.0007, 0.001, 0.003, 20.0]
    for seconds in durations:
        m.observe("mutate", None, None, seconds, 400)
    samples = parse(m.exposition().decode())
    bucket = "stszone_request_duration_seconds_bucket"
    expected = {"0.0005": 1, "0.001": 3, "0.0025": 3, "0.005": 4, "10.0": 4, "+Inf": 5}
    for le, count in expected.items():
        assert value(samples, bucket, endpoint="mutate", le=le) == count, le
    assert value(samples, "stszone_request_duration_seconds_count", endpoint="mutate") == 5
    total = value(samples, "stszone_request_duration_seconds_sum", endpoint="mutate")
    assert abs(total - sum(durations)) < 1e-9
    assert value(samples, "stszone_requests_total", endpoint="mutate", kind="", result="error") == 5

    request = review.from_dict(b.review(b.sts_pod()))
    for i in range(300):
        invented = request._replace(request=request.request._replace(kind=f"Kind{i}"))
        m.observe("validate", invented, review.render(invented.request, allow()), 0.001, 200)
    samples = parse(m.exposition().decode())
    series = [labels for name, labels in samples if name == "stszone_requests_total"]
    assert len(series) == 257  # the first series, 255 invented kinds, then one "other"
    other = value(
        samples, "stszone_requests_total", endpoint="validate", kind="other", result="allowed"
    )
    assert other == 300 - 255


async def test_in_flight_counts_a_review_uploading_and_not_the_scrape(
    serve: ServeFactory, client_ssl: ssl.SSLContext
) -> None:
    """A review whose body is still on its way counts in flight (a shutdown waits for it); the
    scrape reading the gauge does not count itself."""
    served = await serve(runtime=runtime_with_metrics(Store(zones=("a", "b", "c"))))
    assert value(await scrape(served), "stszone_in_flight_requests") == 0
    body = FIXTURE.read_bytes()
    async with connected(served.port, client_ssl) as (reader, writer):
        writer.write(request(body)[:-10])
        await eventually(lambda: served.runtime.in_flight.count == 1)  # the handler has it
        assert value(await scrape(served), "stszone_in_flight_requests") == 1
        writer.write(body[-10:])
        assert (await response(reader)).status == 200
    assert value(await scrape(served), "stszone_in_flight_requests") == 0


async def test_extender_internal_errors_count_as_errors(serve: ServeFactory) -> None:
    """An internal error in filter travels in ExtenderFilterResult.Error (HTTP 200, so that
    kube-scheduler shows it on the pod) and in prioritize as a 500: both are stszone's own
    errors, counted as ``error`` like an admission request's, never as ``allowed``."""
    served = await serve(runtime=runtime_with_metrics(BrokenStore(zones=("zone-a",)), SETTINGS))
    body = args(b.sts_pod("db", 0), ["a-ok"], cache=True)
    status, result = await served.post_json("/extender/filter", body)
    assert status == 200 and "internal error" in result["Error"]
    status, _ = await served.post_json("/extender/prioritize", body)
    assert status == 500
    status, result = await served.post_json("/extender/filter", {**body, "Pod": b.plain_pod()})
    assert status == 200 and result["Error"] == ""  # a pod of no set: no view lookup

    samples = await scrape(served)
    requests = "stszone_requests_total"
    kind = "ExtenderArgs"
    assert value(samples, requests, endpoint="extender/filter", kind=kind, result="error") == 1
    assert value(samples, requests, endpoint="extender/filter", kind=kind, result="allowed") == 1
    assert value(samples, requests, endpoint="extender/prioritize", kind=kind, result="error") == 1


async def test_a_refused_kafkanodepool_is_counted_under_its_own_kind(serve: ServeFactory) -> None:
    """The webhooks are registered for KafkaNodePools: a refused pool scale-down counts as
    kind="KafkaNodePool", beside the Scale of `kubectl scale kafkanodepool`, not as "other"."""
    view, _ = skewed()
    served = await serve(runtime=runtime_with_metrics(view))
    lowered, before = pool(view, **{REMOVE: "[4, 5]"}), pool(view)
    lowered["spec"]["replicas"] = 4
    status, answer = await served.post_json(
        "/validate", sim.body(lowered, old=before, operation="UPDATE")
    )
    assert status == 200 and answer["response"]["status"]["reason"] == "ZoneLoss"
    new, old = sim.scale("pool", old=6, new=4)
    status, answer = await served.post_json("/validate", sim.body(new, old=old, operation="UPDATE"))
    assert status == 200 and answer["response"]["status"]["reason"] == "ZoneLoss"

    samples = await scrape(served)
    denials = "stszone_denials_total"
    pools = value(samples, denials, endpoint="validate", kind="KafkaNodePool", reason="ZoneLoss")
    assert pools == 1
    assert value(samples, denials, endpoint="validate", kind="Scale", reason="ZoneLoss") == 1
    assert value(samples, denials, endpoint="validate", kind="other", reason="ZoneLoss") == 0


def runbook_reasons() -> set[str]:
    """The Status reasons the StszonePodCreatesDenied runbook (docs/metrics.md) explains."""
    text = (Path(__file__).parent.parent / "docs" / "metrics.md").read_text()
    section = text.split("### StszonePodCreatesDenied", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"`([A-Z][A-Za-z]+)`", section))


async def test_pod_denials_are_exported_as_zero_before_the_first(serve: ServeFactory) -> None:
    """StszonePodCreatesDenied reads increase(): a series that first appears at 1 has none, so
    the first denial of a reason on a replica would never alert. Every reason the runbook
    explains is there from the first scrape, at 0, on both endpoints, and then counts up."""
    served = await serve(runtime=runtime_with_metrics(Store(zones=("a", "b", "c"))))
    reasons = runbook_reasons()
    assert {"ZoneConflict", "StatefulSetNotYetSeen"} <= reasons
    denials = "stszone_denials_total"
    samples = await scrape(served)
    for endpoint in ("mutate", "validate"):
        for reason in reasons:
            labels = {"endpoint": endpoint, "kind": "Pod", "reason": reason}
            assert samples.get((denials, frozenset(labels.items()))) == 0, labels

    conflicting = b.sts_pod("db", 1, node_selector={"topology.kubernetes.io/zone": "x"})
    status, answer = await served.post_json("/mutate", b.review(conflicting))
    assert status == 200 and answer["response"]["status"]["reason"] == "ZoneConflict"
    samples = await scrape(served)
    assert value(samples, denials, endpoint="mutate", kind="Pod", reason="ZoneConflict") == 1


def test_the_runbook_explains_every_reason_a_pod_create_is_refused_with() -> None:
    """StszonePodCreatesDenied names the reason it fires with: its runbook says what each means."""
    missing = set(metrics.POD_DENIAL_REASONS) - runbook_reasons()
    assert not missing, f"docs/metrics.md#stszonepodcreatesdenied does not explain {missing}"
