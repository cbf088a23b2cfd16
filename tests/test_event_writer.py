"""The Event writer against the fake API server (which validates Events as a real one does):
which notices make which Events, series patches, none for dry runs, retries, the outbox's
bound and the figures ``/metrics`` shows."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry, generate_latest

from tests.fakeapi import FakeApi, Fault, eventually
from tests.fakeobjects import Route, current
from tests.kubeconfig import write_kubeconfig
from webhook.cli.recorder import attach_recorder, instance
from webhook.cluster.api import Api
from webhook.cluster.backoff import Backoff
from webhook.cluster.correlator import Correlator
from webhook.cluster.credsource import load_credentials
from webhook.cluster.events import ApiSink, EventWriter
from webhook.config import Settings
from webhook.model import notices
from webhook.model.outbox import Outbox
from webhook.model.store import Store
from webhook.server.eventmetrics import EventCollector
from webhook.server.runtime import Runtime

T0 = 1_800_000_000.0
TOKEN = "events-token"
DB = notices.statefulset("shop", "db", uid="63c2ba1b-f5ae-4329-907c-ceabb96215c7")
REFUSED = notices.scale_down_refused(
    DB,
    note="scale-down of db from 6 to 3 would drop zone zone-c (ordinal 3 is its only pod); "
    'set stszone.io/allow-zone-loss: "true" on the StatefulSet to force it',
)
PLACED = notices.placed_with_data(
    DB,
    pod=notices.pod("shop", "db-3"),
    note="db-3 follows volume pv-db-3 (claim data-db-3) to zone-c; the rule says zone-a",
)
JSON = dict[str, Any]


class Setup:
    """A writer whose sink is the fake API server, driven round by round."""

    def __init__(self, fake: FakeApi, api: Api, *, capacity: int = 1000, **writer: Any) -> None:
        self.fake = fake
        self.outbox = Outbox(capacity=capacity)
        self.writer = EventWriter(
            self.outbox,
            sink=ApiSink(api),
            correlator=Correlator(instance="stszone-0"),
            backoff=Backoff(initial=1.0, cap=8.0, rand=lambda: 0.0),
            **writer,
        )

    def events(self) -> list[JSON]:
        """The Events the fake holds, oldest name first."""
        table = self.fake.objects.tables["events"]
        found = [current(self.fake.objects, Route("events", *key)) for key in sorted(table)]
        return [e for e in found if e is not None]

    def writes(self) -> list[str]:
        return [s.verb for s in self.fake.requests if s.resource == "events"]


@contextlib.asynccontextmanager
async def setup(tmp_path: Path, **kwargs: Any) -> AsyncIterator[Setup]:
    async with FakeApi(token=TOKEN, fixtures=False) as fake:
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", server=fake.url, token=TOKEN, ca=fake.ca
        )
        async with Api(load_credentials(str(kubeconfig))) as api:
            yield Setup(fake, api, **kwargs)


async def test_notices_become_events_on_the_workload(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        s.outbox.post([PLACED, REFUSED], dry_run=False)
        await s.writer.round(now=T0)
        placed, refused = sorted(s.events(), key=lambda e: e["reason"])
        assert (
            placed["regarding"]
            == refused["regarding"]
            == {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "namespace": "shop",
                "name": "db",
                "uid": "63c2ba1b-f5ae-4329-907c-ceabb96215c7",
            }
        )
        assert placed["metadata"]["namespace"] == "shop"
        assert (placed["type"], placed["reason"], placed["action"]) == (
            "Normal",
            "PlacedWithData",
            "Place",
        )
        assert placed["related"] == {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": "shop",
            "name": "db-3",
        }
        assert placed["note"] == PLACED.note
        assert (refused["type"], refused["reason"], refused["note"]) == (
            "Warning",
            "ScaleDownRefused",
            REFUSED.note,
        )
        assert "related" not in refused
        assert {e["reportingController"] for e in s.events()} == {"stszone.io/webhook"}
        assert {e["reportingInstance"] for e in s.events()} == {"stszone-0"}
        assert s.writer.stats().created == 2


async def test_repeats_patch_one_series(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        s.outbox.post([REFUSED], dry_run=False)
        await s.writer.round(now=T0)
        s.outbox.post([REFUSED], dry_run=False)
        await s.writer.round(now=T0 + 1)
        (event,) = s.events()
        assert event["series"] == {"count": 2, "lastObservedTime": "2027-01-15T08:00:01.000000Z"}
        for i in range(5):
            s.outbox.post([REFUSED], dry_run=False)
            await s.writer.round(now=T0 + 2 + i)
        assert s.writes() == ["create", "patch"]  # repeats only count, between the timed writes
        await s.writer.round(now=T0 + 6 + 360, tick=True)
        (event,) = s.events()
        assert event["series"] == {"count": 7, "lastObservedTime": "2027-01-15T08:00:06.000000Z"}
        assert event["note"] == REFUSED.note
        stats = s.writer.stats()
        assert (stats.created, stats.patched, stats.series) == (1, 2, 6)


async def test_a_dry_run_makes_no_event(tmp_path: Path) -> None:
    """The writer running as a job: notices of a dry run posted before a real one never
    reach the API server; the real one does."""
    async with setup(tmp_path) as s:
        task = asyncio.create_task(s.writer.run())
        try:
            s.outbox.post([PLACED, REFUSED], dry_run=True)
            s.outbox.post([REFUSED], dry_run=False)
            await eventually(lambda: s.writer.stats().created == 1)
            await s.writer.round(now=T0)  # anything left would be written now
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert [e["reason"] for e in s.events()] == ["ScaleDownRefused"]
        assert s.writes() == ["create"]
        assert s.outbox.dry_runs == 1


async def test_a_series_whose_event_expired_is_created_again_with_its_count(
    tmp_path: Path,
) -> None:
    async with setup(tmp_path) as s:
        for i in range(3):
            s.outbox.post([REFUSED], dry_run=False)
            await s.writer.round(now=T0 + i)
        (event,) = s.events()
        s.fake.delete("events", event["metadata"]["name"], namespace="shop")  # its TTL passed
        await s.writer.round(now=T0 + 2 + 360, tick=True)
        (again,) = s.events()
        assert again["metadata"]["name"] == event["metadata"]["name"]
        assert again["series"]["count"] == 3
        assert s.writes() == ["create", "patch", "patch", "create"]


async def test_a_refused_write_counts_as_failed_and_is_not_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with setup(tmp_path) as s:
        s.fake.inject("events", "create", Fault.status(403), Fault.status(403))
        s.outbox.post([REFUSED, PLACED], dry_run=False)
        with caplog.at_level(logging.WARNING, logger="stszone.events"):
            await s.writer.round(now=T0)
            await s.writer.round(now=T0 + 100)
        assert s.writes() == ["create", "create"]
        assert s.writer.stats().failed == 2 and s.events() == []
        (line,) = [r.getMessage() for r in caplog.records]  # once a minute at most
        assert "ScaleDownRefused on StatefulSet shop/db" in line and "403" in line


async def test_server_errors_are_retried_while_new_notices_keep_flowing(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        s.fake.inject("events", "create", Fault.status(500), Fault.status(503))
        s.outbox.post([REFUSED], dry_run=False)
        await s.writer.round(now=T0)  # 500: again in 0.5 s (half the first bound, no jitter)
        s.outbox.post([PLACED], dry_run=False)
        await s.writer.round(now=T0 + 0.1)  # not due yet; PLACED meets the 503
        assert s.events() == []
        await s.writer.round(now=T0 + 0.6)  # REFUSED again: written
        await s.writer.round(now=T0 + 1.6)  # PLACED again (its delay doubled): written
        assert sorted(e["reason"] for e in s.events()) == ["PlacedWithData", "ScaleDownRefused"]
        assert s.writer.stats().failed == 0


async def test_credentials_that_cannot_be_loaded_for_a_while_do_not_stop_the_writer(
    tmp_path: Path,
) -> None:
    """A rotated token (401) makes the next write reload the kubeconfig; a kubeconfig caught
    being rewritten (or an exec plugin failing once) is a failure that may pass: the write is
    tried again, and the job that writes goes on (ending it would fail /readyz for good)."""
    async with setup(tmp_path) as s:
        kubeconfig = tmp_path / "kubeconfig"
        good = kubeconfig.read_text()
        s.fake.inject("events", "create", Fault.status(401))
        s.outbox.post([REFUSED], dry_run=False)
        await s.writer.round(now=T0)  # 401: refused, and the credentials are dropped
        kubeconfig.write_text("apiVersion: v1\nkind: Config\n")  # half written
        s.outbox.post([PLACED], dry_run=False)
        await s.writer.round(now=T0 + 1)
        assert s.events() == []
        kubeconfig.write_text(good)
        await s.writer.round(now=T0 + 60)
        assert [e["reason"] for e in s.events()] == ["PlacedWithData"]
        assert s.writer.stats().failed == 1  # the 401 alone


async def test_a_write_failing_every_time_is_given_up(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        s.fake.inject("events", "create", *[Fault.status(500)] * 6)
        s.outbox.post([REFUSED], dry_run=False)
        for second in range(0, 100, 10):
            await s.writer.round(now=T0 + second)
        assert s.writes() == ["create"] * 5
        assert s.writer.stats().failed == 1


async def test_the_outbox_bound_and_the_metrics(tmp_path: Path) -> None:
    async with setup(tmp_path, capacity=3) as s:
        s.outbox.post([REFUSED] * 5, dry_run=False)
        registry = CollectorRegistry()
        registry.register(EventCollector(s.writer.stats))
        before = generate_latest(registry).decode()
        assert "stszone_events_queued 3.0" in before
        assert "stszone_events_dropped_total 2.0" in before
        await s.writer.round(now=T0)
        text = generate_latest(registry).decode()
        for line in (
            'stszone_events_written_total{write="create"} 1.0',
            'stszone_events_written_total{write="patch"} 1.0',
            'stszone_events_correlated_total{outcome="series"} 2.0',
            'stszone_events_correlated_total{outcome="aggregated"} 0.0',
            'stszone_events_correlated_total{outcome="filtered"} 0.0',
            "stszone_events_failed_total 0.0",
            "stszone_events_dropped_total 2.0",
            "stszone_events_queued 0.0",
        ):
            assert line in text, line
        (event,) = s.events()
        assert event["series"]["count"] == 2  # the third is counted; a timed write carries it


#: The written-Events counter after one create.
WRITTEN = 'stszone_events_written_total{write="create"} 1.0'


async def test_the_job_writes_to_the_cluster_as_this_replica(tmp_path: Path) -> None:
    async with FakeApi(token=TOKEN, fixtures=False) as fake:
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", server=fake.url, token=TOKEN, ca=fake.ca
        )
        settings = Settings()
        runtime = Runtime(store=Store(), defaults=settings.defaults(), settings=settings)
        registry = CollectorRegistry()
        attach_recorder(
            runtime,
            credentials=load_credentials(str(kubeconfig)),
            registry=registry,
            environ={"POD_NAME": "stszone-7c9-abcde"},
        )
        (job,) = runtime.jobs
        task = asyncio.create_task(job())
        try:
            runtime.outbox.post([REFUSED], dry_run=False)
            # The fake stores the Event before it answers; the writer counts it on the answer.
            await eventually(lambda: WRITTEN in generate_latest(registry).decode())
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        ((_key, stored),) = fake.objects.tables["events"].items()
        assert b'"reportingInstance": "stszone-7c9-abcde"' in stored.body
        (create,) = [r for r in fake.requests if r.resource == "events"]
        assert create.agent.endswith("(stszone-7c9-abcde) events")


async def test_offline_the_events_are_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(offline=True)
    runtime = Runtime(store=Store(), defaults=settings.defaults(), settings=settings)
    attach_recorder(runtime, credentials=None)
    (job,) = runtime.jobs
    with caplog.at_level(logging.INFO, logger="stszone.events"):
        task = asyncio.create_task(job())
        try:
            runtime.outbox.post([REFUSED], dry_run=False)
            await eventually(lambda: bool(caplog.records))
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("event (no cluster to write it to): Warning ScaleDownRefused on ")
    assert line.endswith(REFUSED.note)


def test_the_reporting_instance_is_the_replica() -> None:
    assert instance(Settings(), environ={"POD_NAME": "stszone-1"}) == "stszone-1"
    assert instance(Settings(identity="me"), environ={"POD_NAME": "stszone-1"}) == "me"
    assert instance(Settings(), environ={})  # the host name


async def test_writes_waiting_for_a_retry_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the API server failing for long, at most MAX_HELD writes wait; the rest fail."""
    monkeypatch.setattr("webhook.cluster.events.MAX_HELD", 2)
    async with setup(tmp_path) as s:
        s.fake.inject("events", "create", *[Fault.status(503)] * 4)
        many = [notices.scale_down_refused(DB, note=f"refusal {i}") for i in range(4)]
        s.outbox.post(many, dry_run=False)
        await s.writer.round(now=T0)
        assert s.writes() == ["create"] * 4
        assert s.writer.stats().failed == 2
        await s.writer.round(now=T0 + 60)  # the two held are written now
        assert len(s.events()) == 2 and s.writer.stats().created == 2


async def test_an_answer_that_is_not_json_fails_the_write_not_the_job(tmp_path: Path) -> None:
    """A proxy in front of the API server answering 201 with a page, not a JSON object: the
    write counts as failed and the job goes on writing (a job that ended would fail /readyz
    for good)."""

    async def page(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=201, text="<html>signed in</html>", content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", page)
    async with TestServer(app, host="127.0.0.1") as server:
        url = f"http://127.0.0.1:{server.port}"
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server=url, token=TOKEN)
        settings = Settings()
        runtime = Runtime(store=Store(), defaults=settings.defaults(), settings=settings)
        registry = CollectorRegistry()
        attach_recorder(runtime, credentials=load_credentials(str(kubeconfig)), registry=registry)
        (job,) = runtime.jobs
        task = asyncio.create_task(job())
        try:
            runtime.outbox.post([REFUSED], dry_run=False)
            await eventually(
                lambda: task.done() or "stszone_events_failed_total 1.0" in _metrics(registry)
            )
            assert not task.done(), task.exception()
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _metrics(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()


@pytest.mark.parametrize("state", ["Terminating", "Gone"])
async def test_an_event_of_a_namespace_being_deleted_is_dropped_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, state: str
) -> None:
    # A namespace deleted after a decision: the create (or, minutes later, the series' final
    # count, whose Event went with the namespace) has nowhere to go. Kubernetes' own
    # controllers skip such writes; it is no failure of stszone's to warn about.
    async with setup(tmp_path) as s:
        s.outbox.post([REFUSED], dry_run=False)
        await s.writer.round(now=T0)
        s.outbox.post([REFUSED], dry_run=False)
        s.fake.namespaces_closed["shop"] = state
        (event,) = s.events()
        s.fake.delete("events", event["metadata"]["name"], namespace="shop")
        s.outbox.post([PLACED], dry_run=False)
        with caplog.at_level(logging.WARNING, logger="stszone.events"):
            await s.writer.round(now=T0 + 1)
            await s.writer.round(now=T0 + 1 + 360, tick=True)
        assert s.writes() == ["create", "patch", "create", "create"]
        assert s.writer.stats().failed == 0
        assert [r.getMessage() for r in caplog.records] == []
