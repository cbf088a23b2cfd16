"""The Grafana dashboard asks only for series stszone really serves.

The app runs in-process as ``stszone serve --manage-certs --metrics-port P`` builds it
(``webhook/cli/serve.py``): the live view of the fake API server, the certificate work with
its Lease, the metrics on their own port. Once it is ready, has written its certificates and
has computed the zone risk of an opted-in StatefulSet, it answers a few admission requests, and
``/metrics`` is scraped as Prometheus would. Every query of ``files/dashboard.json`` (panels
and variables) is parsed with a PromQL parser, and each series it selects must be one of the
scraped samples' names: a renamed metric, a typo or a counter without ``_total`` fails here
instead of leaving an empty panel.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import promql_parser
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests import builders as b
from tests.fakeapi import FakeApi, eventually
from tests.helm import CHART
from tests.kubeconfig import write_kubeconfig
from tests.served import served
from webhook.cli import managedcerts
from webhook.cluster.live import start_live
from webhook.config import Settings
from webhook.server.app import install_metrics
from webhook.server.runtime import Runtime

DASHBOARD = CHART / "files" / "dashboard.json"
TOKEN = "dashboard-token"
NS = "stszone-dash"
#: Grafana's own variables stand for a range; the dashboard's variables for label values.
RANGES = re.compile(r"\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}")
VARIABLES = re.compile(r"\$\{?\w+\}?")
LABEL_VALUES = re.compile(r"^label_values\((?:(.+),\s*)?(\w+)\)$")


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def queries(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression of the dashboard: its panels' targets and its variables'
    ``label_values(SELECTOR, label)`` selectors."""
    found = [
        target["expr"]
        for panel in _panels(dashboard["panels"])
        for target in panel.get("targets", [])
    ]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]
        text = query["query"] if isinstance(query, dict) else query
        match = LABEL_VALUES.match(text.strip())
        assert match and match.group(1), f"variable {variable['name']}: {text}"
        found.append(match.group(1))
    return found


def selected(expr: str) -> set[str]:
    """The metric names an expression selects (Grafana's variables filled in first)."""
    promql = VARIABLES.sub("x", RANGES.sub("5m", expr))
    names: set[str] = set()

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"a selector without a metric name in {expr}"
            names.add(node.name)

    promql_parser.walk(promql_parser.parse(promql), pre_visit=visit)
    return names


def unserved(exprs: list[str], served: set[str]) -> dict[str, set[str]]:
    """Expression -> the names it selects that nothing serves (empty: all served)."""
    return {expr: missing for expr in exprs if (missing := selected(expr) - served)}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _configuration(kind: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": "stszone"},
        "webhooks": [
            {
                "name": f"{'mutate' if kind.startswith('M') else 'validate'}.stszone.io",
                "clientConfig": {"service": {"name": "stszone", "namespace": NS, "port": 443}},
            }
        ],
    }


@contextlib.asynccontextmanager
async def serving(tmp_path: Path) -> AsyncIterator[tuple[str, int]]:
    """The app as ``stszone serve --manage-certs --metrics-port P`` builds it, against the fake
    API server's recorded cluster with namespace ``rec`` opted in; yields the /metrics URL and
    the webhook's port."""
    async with FakeApi(token=TOKEN) as fake:
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            fake.put(kind.lower() + "s", _configuration(kind))
        fake.put(
            "namespaces",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "rec", "labels": {"stszone.io/enabled": "true"}},
            },
        )
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", server=fake.url, token=TOKEN, ca=fake.ca
        )
        metrics_port = _free_port()
        settings = Settings(
            host="127.0.0.1",
            port=0,
            kubeconfig=str(kubeconfig),
            namespace=NS,
            manage_certs=True,
            cert_validity=120.0,
            lease_duration=0.6,
            renew_deadline=0.4,
            retry_period=0.05,
            identity="dashboard-0",
            metrics_port=metrics_port,
            zone_risk_interval=0.2,
        )
        managed = await managedcerts.start(settings)
        live = await start_live(settings)
        runtime = Runtime(store=live.store, defaults=settings.defaults(), settings=settings)
        managed.attach(runtime)
        runtime.attach(live.run, check=live.ready)
        metrics = install_metrics(runtime, caches=live.statuses, certificate=managed.tls.expiry)
        metrics.registry.register(managed.collector)
        client = ssl.create_default_context()
        client.check_hostname = False
        client.verify_mode = ssl.CERT_NONE  # the pair is stszone's own, made during the test
        async with served(runtime, tls=managed.tls, client=client) as app:
            await eventually(lambda: managed.ready()[0])
            await eventually(lambda: managed.keeper.outcome.last_success is not None)
            yield f"http://127.0.0.1:{metrics_port}/metrics", app.port
            return


async def _scrape(session: aiohttp.ClientSession, url: str) -> str:
    async with session.get(url) as resp:
        assert resp.status == 200
        return await resp.text()


def _sample_names(text: str) -> set[str]:
    return {
        sample.name for family in text_string_to_metric_families(text) for sample in family.samples
    }


@pytest.fixture
async def scraped(tmp_path: Path) -> set[str]:
    """The names of the samples a ready stszone's /metrics serves after answering reviews."""
    async with serving(tmp_path) as (url, port), aiohttp.ClientSession() as session:
        text = await _scrape(session, url)
        for _ in range(300):  # the refresh runs every 0.2 s once the view is ready
            if 'statefulset="rec"' in text:
                break
            await asyncio.sleep(0.1)
            text = await _scrape(session, url)
        assert 'statefulset="rec"' in text, "the zone risk of rec/rec was never computed"
        client = ssl.create_default_context()
        client.check_hostname = False
        client.verify_mode = ssl.CERT_NONE
        reviews = [
            ("/mutate", b.review(b.sts_pod("rec", 0, namespace="rec"))),
            ("/mutate", b.review(b.sts_pod("db", 0, namespace="rec"))),
            ("/validate", b.review(b.scale("rec", namespace="rec", replicas=1))),
        ]
        for path, body in reviews:
            async with session.post(f"https://127.0.0.1:{port}{path}", json=body, ssl=client) as r:
                assert r.status == 200, await r.text()
        return _sample_names(await _scrape(session, url))


async def test_every_dashboard_query_selects_served_series(scraped: set[str]) -> None:
    """Each query parses, and every series it selects is one /metrics serves."""
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = queries(dashboard)
    used = set().union(*(selected(expr) for expr in exprs))
    missing = unserved(exprs, scraped)
    stszone_served = {name for name in scraped if name.startswith("stszone_")}
    print(
        f"dashboard: {len(exprs)} queries select {len(used)} series names; "
        f"/metrics served {len(stszone_served)} stszone_* sample names; unserved: {missing or 'none'}"
    )
    assert not missing, missing


async def test_dashboard_covers_what_operators_look_at(scraped: set[str]) -> None:
    """Decisions and refusals, latency, zone risk per workload, certificate expiry and
    rotation, and the view's sync each have a query (by the family they read)."""
    used = set().union(*(selected(expr) for expr in queries(json.loads(DASHBOARD.read_text()))))
    topics = {
        "decisions": "stszone_requests_total",
        "refusals": "stszone_denials_total",
        "latency": "stszone_request_duration_seconds_bucket",
        "zone risk": "stszone_statefulset_zones_held",
        "misplaced": "stszone_statefulset_misplaced_pods",
        "certificate expiry": "stszone_certificate_expiry_timestamp_seconds",
        "rotation": "stszone_certificate_rotation_last_success_timestamp_seconds",
        "view sync": "stszone_cache_synced",
    }
    assert {topic for topic, name in topics.items() if name not in used} == set()


def per_workload_groupings(expr: str) -> list[list[str]]:
    """The ``by`` labels of each aggregation of ``expr`` that keeps the ``statefulset`` label."""
    promql = VARIABLES.sub("x", RANGES.sub("5m", expr))
    found: list[list[str]] = []

    def visit(node: promql_parser.Expr) -> None:
        if not isinstance(node, promql_parser.AggregateExpr) or node.modifier is None:
            return
        if "statefulset" in node.modifier.labels:
            found.append(list(node.modifier.labels))

    promql_parser.walk(promql_parser.parse(promql), pre_visit=visit)
    return found


def test_workloads_of_one_name_and_two_kinds_stay_apart() -> None:
    """An Advanced StatefulSet may share its name with a StatefulSet: every per-workload
    aggregation keeps ``kind``, else one row (or line) would mix the two sets' figures."""
    exprs = queries(json.loads(DASHBOARD.read_text()))
    groupings = [labels for expr in exprs for labels in per_workload_groupings(expr)]
    assert groupings, "no per-workload query found: the check would pass vacuously"
    assert [labels for labels in groupings if "kind" not in labels] == []
    assert per_workload_groupings("max by (namespace, statefulset) (x)") == [
        ["namespace", "statefulset"]
    ]


def test_a_misspelt_series_is_found() -> None:
    """The check can fail: a counter without _total, and a typo, are reported."""
    served = {"stszone_requests_total", "stszone_ready"}
    exprs = [
        'sum(rate(stszone_requests{job=~"$job"}[$__rate_interval]))',
        "sum(stszone_redy)",
        'sum(rate(stszone_requests_total{job=~"$job"}[$__rate_interval])) / sum(stszone_ready)',
    ]
    assert unserved(exprs, served) == {
        exprs[0]: {"stszone_requests"},
        exprs[1]: {"stszone_redy"},
    }


def test_variables_are_read_as_selectors() -> None:
    """label_values(SELECTOR, label) contributes its selector; a bare label_values(label) (no
    metric to check) is refused."""
    variable: dict[str, Any] = {
        "type": "query",
        "name": "job",
        "query": {"query": "label_values(up, job)"},
    }
    board: dict[str, Any] = {
        "panels": [],
        "templating": {
            "list": [
                variable,
                {"type": "datasource", "name": "ds", "query": "prometheus"},
            ]
        },
    }
    assert queries(board) == ["up"]
    variable["query"] = "label_values(job)"
    with pytest.raises(AssertionError, match="variable job"):
        queries(board)
