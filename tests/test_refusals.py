"""Credentials the API server refuses (401) or that do not load, with every client retrying:
the cause is said once when it starts, with a count at a low rate while it lasts, and once when
requests go through again; each client names the credentials by where they come from, once,
and no cache says it at each retry. Counted in log lines, against the fake API server."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from tests.certcluster import KINDS, configuration
from tests.certsim import policy
from tests.fakeapi import FakeApi, eventually
from tests.kubeconfig import write_kubeconfig
from tests.retries import in_background
from webhook.cluster.api import Api, ApiError, CredentialsError
from webhook.cluster.certkeeper import Keeper
from webhook.cluster.correlator import Correlator
from webhook.cluster.credsource import load_credentials
from webhook.cluster.events import ApiSink, EventWriter
from webhook.cluster.live import LiveView, live_store
from webhook.cluster.reflector import Tuning
from webhook.cluster.refusals import Refusals, Streak
from webhook.cluster.secretwatch import SecretWatch, WatchTiming
from webhook.config import Settings
from webhook.errors import ConfigError
from webhook.install.rotation import Rotation
from webhook.model import notices
from webhook.model.outbox import Outbox

TOKEN = "refusals-token"
NS = "certs-ns"
SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "stszone-tls", "namespace": NS},
    "data": {},
}
DB = notices.statefulset("shop", "db", uid="63c2ba1b-f5ae-4329-907c-ceabb96215c7")
T0 = 1_800_000_000.0


def _ignore(secret: object) -> None:
    pass


def _said(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, str]]:
    return [
        (r.name, r.levelname, r.getMessage())
        for r in caplog.records
        if r.levelno >= logging.INFO and r.name.startswith("stszone")
    ]


async def test_a_refused_token_is_said_once_for_every_client_and_once_when_it_is_taken_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The API server stops taking stszone's token while every cache of the live view, the
    Secret's watch and the Event writer retry every few hundredths of a second. One error says
    the refusal and what to do; the Secret's watch and the Event writer each say, once, that
    they wait on the credentials of that kubeconfig; no cache says anything (readiness names
    the 401); and once the token is taken again, one line says so with the requests refused."""
    async with FakeApi(token=TOKEN) as fake:
        fake.put("secrets", SECRET)
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", server=fake.url, token=TOKEN, ca=fake.ca
        )
        credentials = load_credentials(str(kubeconfig))
        tuning = Tuning(watch_timeout=(0.05, 0.05), backoff_initial=0.01, backoff_cap=0.02)
        view = LiveView(
            Settings(kafka_node_pools=False, kruise=False), credentials=credentials, tuning=tuning
        )
        async with Api(credentials) as api:
            watch = SecretWatch(
                api=api,
                namespace=NS,
                name="stszone-tls",
                on_change=lambda _: None,
                timing=WatchTiming(
                    watch_timeout=(1.0, 1.0),
                    backoff_initial=0.01,
                    backoff_cap=0.02,
                    healthy_after=0.1,
                ),
            )
            caplog.set_level(logging.INFO)
            outbox = Outbox(capacity=10)
            writer = EventWriter(
                outbox, sink=ApiSink(api), correlator=Correlator(instance="stszone-0")
            )
            async with in_background(view.run()), in_background(watch.run()):
                await eventually(lambda: "live view synced" in caplog.text and watch.synced)
                caplog.clear()
                before = [s.restarts for s in view.statuses()]
                fake.token = "refusals-token-2"
                await eventually(
                    lambda: (
                        all(
                            s.restarts >= n + 5
                            for s, n in zip(view.statuses(), before, strict=True)
                        )
                        and "401" in watch.last_error
                    )
                )
                for minute, note in enumerate(("first", "second")):
                    refused = notices.scale_down_refused(DB, note=f"{note} refusal")
                    outbox.post([refused], dry_run=False)
                    await writer.round(now=T0 + minute)
                caches = [s.last_error for s in view.statuses()]
                fake.token = TOKEN
                await eventually(lambda: not watch.last_error)  # the watch works again
    assert all("HTTP 401" in error for error in caches), caches
    said = _said(caplog)
    source = f"kubeconfig {kubeconfig}"
    refusal, *taken = [line for line in said if line[0] == "stszone.credentials"]
    assert refusal == (
        "stszone.credentials",
        "ERROR",
        f"the API server refuses the credentials from {source} (HTTP 401: Unauthorized); "
        "requests to it fail until it accepts them: the cluster refused these credentials: "
        "renew them (`kubectl auth whoami` tests them)",
    )
    (again,) = taken
    found = re.fullmatch(
        rf"the API server accepts the credentials from {re.escape(source)} again "
        r"\((\d+) requests failed in \d+s\)",
        again[2],
    )
    assert found is not None and again[1] == "INFO", again
    assert int(found[1]) >= 5 * len(caches) + 1 + 2, again  # caches, the Secret, the Events
    waits = f"the API server refuses the credentials from {source}"
    assert [line for line in said if line[0] != "stszone.credentials"] == [
        ("stszone.certs", "WARNING", f"watch of Secret {NS}/stszone-tls failed: {waits}"),
        (
            "stszone.events",
            "WARNING",
            f"cannot write Event Warning ScaleDownRefused on StatefulSet shop/db: {waits}",
        ),
        ("stszone.certs", "INFO", f"watch of Secret {NS}/stszone-tls works again"),
    ], said


@pytest.mark.parametrize("cause", ["refused", "not loading"])
async def test_a_cause_that_lasts_is_said_again_every_ten_minutes_with_a_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, cause: str
) -> None:
    """Three requests a minute for 25 minutes, all refused (or none loading its credentials),
    then one that goes through: the cause at the first, a count at 10 and 20 minutes, and the
    end with the count of all 75, whatever the number of requests."""
    async with FakeApi(token=TOKEN) as fake:
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", server=fake.url, token=TOKEN, ca=fake.ca
        )
        good = kubeconfig.read_text()
        credentials = load_credentials(str(kubeconfig))
        now = [0.0]
        credentials.refusals = Refusals(credentials.source, clock=lambda: now[0])
        caplog.set_level(logging.INFO, logger="stszone.credentials")
        if cause == "refused":
            fake.token = "another"
        else:
            kubeconfig.write_text("")
            credentials.invalidate()
        failed = 0
        async with Api(credentials) as api:
            for minute in range(25):
                now[0] = minute * 60.0
                for _ in range(3):
                    with pytest.raises((ApiError, CredentialsError)):
                        await api.call("GET", "/api/v1/namespaces/certs-ns/secrets/stszone-tls")
                    failed += 1
            fake.token = TOKEN
            kubeconfig.write_text(good)
            credentials.invalidate()
            now[0] = 25 * 60.0
            with pytest.raises(ApiError, match="404"):  # answered: no such Secret
                await api.call("GET", "/api/v1/namespaces/certs-ns/secrets/stszone-tls")
    source = credentials.source
    said = [(level, message) for _, level, message in _said(caplog)]
    assert failed == 75
    if cause == "refused":
        first = f"the API server refuses the credentials from {source} (HTTP 401: Unauthorized)"
        still = f"the API server still refuses the credentials from {source}"
        end = f"the API server accepts the credentials from {source} again"
    else:
        first = f"cannot load credentials from {source}: "
        still = f"the credentials from {source} still do not load"
        end = f"credentials from {source} load again"
    assert len(said) == 4, said
    assert said[0][0] == "ERROR" and said[0][1].startswith(first), said
    # 10 minutes after the first (at minute 0): the first request of minute 10 is the 31st.
    assert said[1:3] == [
        ("WARNING", f"{still}: 31 requests failed in 600s"),
        ("WARNING", f"{still}: 61 requests failed in 1200s"),
    ]
    assert said[3] == ("INFO", f"{end} (75 requests failed in 1500s)")


async def test_a_one_shot_command_says_a_refusal_in_its_error_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``stszone audit`` lists once and ends on the first failure, saying it: its error names
    the 401 and what to do, and the log (stderr) does not say it again."""
    async with FakeApi(token=TOKEN) as fake:
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", server=fake.url, token="not-it", ca=fake.ca
        )
        caplog.set_level(logging.INFO)
        with pytest.raises(ConfigError, match=r"HTTP 401 Unauthorized.*renew them"):
            await live_store(Settings(), credentials=load_credentials(str(kubeconfig)))
    assert _said(caplog) == []


async def test_the_certificate_writer_names_refused_credentials_by_their_source_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The leader's reads are refused (401) for three turns, then its kubeconfig is emptied (a
    reload after the 401 finds nothing) for three more, then both are good again: the
    certificate writer says each of the two once, naming the kubeconfig and not the refusal
    (stszone.credentials says that), then that it is resolved."""
    plan = policy()
    async with FakeApi(token=TOKEN, fixtures=False) as fake:
        for kind in KINDS:
            fake.put(kind.lower() + "s", configuration(kind))
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", server=fake.url, token=TOKEN, ca=fake.ca
        )
        good = kubeconfig.read_text()
        async with Api(load_credentials(str(kubeconfig))) as api:
            keeper = Keeper(
                api=api,
                secrets=SecretWatch(api=api, namespace=NS, name="stszone-tls", on_change=_ignore),
                config_name="stszone",
                planner=lambda: Rotation(plan, name="stszone-tls", namespace=NS).decide,
                leading=lambda: True,
            )
            decide = keeper.planner()
            while await keeper.turn(decide) == 0:
                pass  # the Secret created, both caBundles given its CA
            caplog.set_level(logging.INFO, logger="stszone.certs")
            fake.token = "refusals-token-2"
            for _ in range(3):
                await keeper.turn(decide)
            kubeconfig.write_text("")
            for _ in range(3):
                await keeper.turn(decide)
            kubeconfig.write_text(good)
            fake.token = TOKEN
            await keeper.turn(decide)
    source = f"kubeconfig {kubeconfig}"
    what = "MutatingWebhookConfiguration stszone"
    assert [m for n, _, m in _said(caplog) if n == "stszone.certs"] == [
        f"cannot read {what}: the API server refuses the credentials from {source}; retrying",
        f"cannot read {what}: the credentials from {source} do not load; retrying",
        f"{what}: resolved",
    ]
    assert keeper.outcome.failures == 6


def test_one_failed_request_is_counted_in_the_singular() -> None:
    """A cause that ended after one failed request says so in words a person writes."""
    streak = Streak(since=10.0, said_at=10.0)
    streak.failed = 1
    assert streak.counted(12.0) == "1 request failed in 2s"
    streak.failed = 2
    assert streak.counted(12.0) == "2 requests failed in 2s"
