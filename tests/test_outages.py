"""The API server down, answering 5xx or 429, or forbidding a resource (403) while every cache
of the live view retries: each cause is said once when it starts, with what to do, and once
when every cache is in sync again; no cache says it at each retry (each retry is a DEBUG line,
and ``last_error`` and ``/readyz`` name it). Counted in log lines, against the fake API server;
the count every 10 minutes while a cause lasts, on an injected clock."""

from __future__ import annotations

import logging
import re
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import pytest

from tests.fakeapi import FakeApi, Fault, eventually
from tests.kubeconfig import write_kubeconfig
from tests.retries import in_background
from webhook.cluster.api import JSON_MEDIA, Api, ApiError, CredentialsError, ProxyRefused
from webhook.cluster.credsource import load_credentials
from webhook.cluster.live import LiveView
from webhook.cluster.outages import Outages
from webhook.cluster.reflector import Tuning
from webhook.cluster.resources import Resource, optional_resources
from webhook.cluster.served import ServedReflector
from webhook.config import Settings
from webhook.model.store import Store

TOKEN = "outages-token"
#: The fake's name of each core collection the live view watches.
COLLECTIONS = (
    "nodes",
    "persistentvolumes",
    "persistentvolumeclaims",
    "statefulsets",
    "pods",
    "namespaces",
)
#: Watches end after a second (timeoutSeconds) and prove themselves after a tenth: a fault
#: set on the fake reaches every cache at its next watch, and a cache back is soon in sync.
TUNING = Tuning(watch_timeout=(1.0, 1.0), backoff_initial=0.01, backoff_cap=0.02, healthy_after=0.1)
RETRIES = 5


def _said(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [
        (r.levelname, r.getMessage())
        for r in caplog.records
        if r.levelno >= logging.INFO and r.name.startswith("stszone")
    ]


async def _down(fake: FakeApi) -> None:
    await fake.stop()


async def _up(fake: FakeApi) -> None:
    await fake.start()


def _answering(code: int) -> Callable[[FakeApi], Awaitable[None]]:
    async def answer(fake: FakeApi) -> None:
        for collection in COLLECTIONS:
            fake.failing[collection] = Fault.status(code)

    return answer


async def _answering_again(fake: FakeApi) -> None:
    fake.failing.clear()


SERVER = r"the API server \(kubeconfig {kubeconfig}\)"


@pytest.mark.parametrize(
    ("fail", "first", "error", "over"),
    [
        pytest.param(
            _down,
            rf"the connection to {SERVER} fails: \w+: .+; the caches serve what they hold and "
            r"retry, and /readyz fails once one has been out of sync for --max-unsynced; if it "
            r"lasts, check that the API server is up and its address right "
            r"\(`kubectl cluster-info`\)",
            "Cannot connect to host 127.0.0.1",
            rf"the caches reach {SERVER} again",
            id="down",
        ),
        pytest.param(
            _answering(503),
            rf"{SERVER} answers lists and watches with HTTP 503 ServiceUnavailable: injected "
            r"failure 503; the caches serve what they hold and retry: `kubectl get --raw "
            r"'/readyz\?verbose'` tells whether the API server is well",
            "HTTP 503 ServiceUnavailable",
            rf"{SERVER} answers lists and watches again",
            id="503",
        ),
        pytest.param(
            _answering(429),
            rf"{SERVER} answers lists and watches with HTTP 429 TooManyRequests: injected "
            r"failure 429; the caches serve what they hold and retry: the API server's priority "
            r"and fairness rejects stszone's requests: see its load and `kubectl get "
            r"flowschemas,prioritylevelconfigurations`",
            "HTTP 429 TooManyRequests",
            rf"{SERVER} answers lists and watches again",
            id="429",
        ),
    ],
)
async def test_a_failing_api_server_is_said_once_for_every_cache_and_once_when_it_is_back(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    fail: Callable[[FakeApi], Awaitable[None]],
    first: str,
    error: str,
    over: str,
) -> None:
    """The API server stops (or answers 503, or 429) until every cache of the live view has
    retried five times, then is well again: one warning says the cause and what to do, one
    line says when every cache is back, with how many lists and watches failed; each cache's
    last error and /readyz name the failure meanwhile."""
    async with FakeApi(token=TOKEN) as fake:
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", server=fake.url, token=TOKEN, ca=fake.ca
        )
        settings = Settings(kafka_node_pools=False, kruise=False, max_unsynced=0.01)
        view = LiveView(settings, credentials=load_credentials(str(kubeconfig)), tuning=TUNING)
        caplog.set_level(logging.DEBUG)
        async with in_background(view.run()):
            await eventually(lambda: "live view synced" in caplog.text)
            caplog.clear()
            before = [s.restarts for s in view.statuses()]
            await fail(fake)
            await eventually(
                lambda: all(
                    s.restarts >= n + RETRIES for s, n in zip(view.statuses(), before, strict=True)
                )
            )
            errors = [s.last_error for s in view.statuses()]
            ready, detail = view.ready()
            back = time.time()
            await (_up if fail is _down else _answering_again)(fake)
            await eventually(lambda: all((s.last_sync or 0) > back for s in view.statuses()))
    failed = sum(s.restarts for s in view.statuses()) - sum(before)
    assert all(error in e for e in errors), errors
    assert not ready and all(f"{t} cache unable to re-sync" in detail for t in ("nodes", "pods"))
    assert detail.count(error) == len(errors), detail
    said = _said(caplog)
    assert len(said) == 2, f"{len(said)} lines for {failed} failed lists and watches: {said}"
    retries = [
        r
        for r in caplog.records
        if r.name == "stszone.watch" and r.levelno == logging.DEBUG and "failed: " in r.getMessage()
    ]
    assert len(retries) == failed, "each retry is a DEBUG line of its cache"
    pattern = re.escape(str(kubeconfig))
    starts, *ends = said
    assert starts[0] == "WARNING" and re.fullmatch(first.format(kubeconfig=pattern), starts[1]), (
        said
    )
    (end,) = ends
    found = re.fullmatch(
        over.format(kubeconfig=pattern) + r" \((\d+) requests failed in \d+s\)", end[1]
    )
    assert found is not None and end[0] == "INFO", said
    assert int(found[1]) == failed >= RETRIES * len(COLLECTIONS), (found[1], failed)


async def test_a_forbidden_resource_is_said_once_with_the_permission_to_grant(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """RBAC stops allowing nodes and StatefulSets until each of their caches has retried five
    times: one error for each names the permission to grant, the other caches say nothing,
    and one line for each says when it is allowed again."""
    async with FakeApi(token=TOKEN) as fake:
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", server=fake.url, token=TOKEN, ca=fake.ca
        )
        settings = Settings(kafka_node_pools=False, kruise=False)
        view = LiveView(settings, credentials=load_credentials(str(kubeconfig)), tuning=TUNING)
        caplog.set_level(logging.INFO)
        async with in_background(view.run()):
            await eventually(lambda: "live view synced" in caplog.text)
            caplog.clear()
            caches = {s.table: s.restarts for s in view.statuses()}
            fake.failing.update(nodes=Fault.status(403), statefulsets=Fault.status(403))
            await eventually(
                lambda: all(
                    s.restarts >= caches[s.table] + RETRIES
                    for s in view.statuses()
                    if s.table in ("nodes", "statefulsets")
                )
            )
            errors = {s.table: s.last_error for s in view.statuses()}
            back = time.time()
            fake.failing.clear()
            await eventually(lambda: all((s.last_sync or 0) > back for s in view.statuses()))
    assert errors["nodes"].startswith("HTTP 403 Forbidden: nodes is forbidden: "), errors
    assert errors["statefulsets"].startswith("HTTP 403 Forbidden: statefulsets is forbidden")
    server = f"the API server (kubeconfig {kubeconfig})"
    user = 'User "system:serviceaccount:stszone-system:stszone"'
    grant = "(the ClusterRole of deploy/base/rbac.yaml, or the Helm chart's rbac.yaml, grants them)"
    said = _said(caplog)
    assert len(said) == 4, f"{len(said)} lines: {said}"
    assert sorted(said[:2]) == [
        (
            "ERROR",
            f"{server} forbids the nodes list/watch: HTTP 403 Forbidden: nodes is forbidden: "
            f'{user} cannot watch resource "nodes" in API group "" at the cluster scope; its '
            f"cache serves what it holds until allowed: grant get, list and watch on nodes {grant}",
        ),
        (
            "ERROR",
            f"{server} forbids the statefulsets list/watch: HTTP 403 Forbidden: statefulsets is "
            f'forbidden: {user} cannot watch resource "statefulsets" in API group "apps" at the '
            "cluster scope; its cache serves what it holds until allowed: grant get, list and "
            f"watch on statefulsets.apps {grant}",
        ),
    ], said
    ends = sorted(said[2:])
    assert [level for level, _ in ends] == ["INFO", "INFO"], said
    for line, table in zip(ends, ("nodes", "statefulsets"), strict=True):
        assert re.fullmatch(
            rf"{re.escape(server)} allows the {table} list/watch again "
            r"\(\d+ requests failed in \d+s\)",
            line[1],
        ), said


class Answers(Api):
    """The :class:`Api`, counting the answers it gets (a 404 is one)."""

    answered = 0

    async def get(
        self,
        path: str,
        *,
        params: Mapping[str, str],
        accept: str = JSON_MEDIA,
        read_timeout: float = 60,
    ) -> bytes:
        try:
            body = await super().get(path, params=params, accept=accept, read_timeout=read_timeout)
        except ApiError:
            self.answered += 1
            raise
        self.answered += 1
        return body


async def test_the_discovery_of_a_crd_says_an_api_server_down_once_not_at_each_poll(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The cache of Advanced StatefulSets asks API discovery at every poll (here every hundredth
    of a second) whether they are served. The API server down for five polls is one warning,
    and one line when discovery is answered again (404 here: not served); each failed poll is
    a DEBUG line."""
    async with FakeApi(token=TOKEN) as fake:
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", server=fake.url, token=TOKEN, ca=fake.ca
        )
        (kruise,) = optional_resources(Settings(kafka_node_pools=False))
        api = Answers(load_credentials(str(kubeconfig)))
        async with api:
            served = ServedReflector(kruise, api=api, store=Store(live=True), poll=0.01)
            caplog.set_level(logging.DEBUG)
            await fake.stop()

            def polls() -> int:
                return sum("discovery of" in r.getMessage() for r in caplog.records)

            async with in_background(served.run()):
                await eventually(lambda: polls() >= RETRIES)
                await fake.start()
                await eventually(lambda: api.answered >= 2)  # a poll after the one answered
    said = _said(caplog)
    assert len(said) == 2, said
    first, back = said
    assert first[0] == "WARNING" and first[1].startswith(
        f"the connection to the API server (kubeconfig {kubeconfig}) fails: "
    ), said
    assert back[0] == "INFO" and back[1].startswith(
        f"the caches reach the API server (kubeconfig {kubeconfig}) again ("
    ), said


def _refused() -> OSError:
    return ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 6443)")


NODES = Resource(table="nodes", path="/api/v1/nodes")
PODS = Resource(table="pods", path="/api/v1/pods")


def test_a_cause_that_lasts_is_counted_every_ten_minutes_until_every_cache_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Seven caches fail to connect three times a minute each for 25 minutes; then six are
    back, and the seventh a minute later: the cause at the first failure, a count at 10 and
    20 minutes with the last error, the end once the last cache is back, with all 525."""
    now = [0.0]
    outages = Outages("kubeconfig K", clock=lambda: now[0])
    members = [f"cache{n} list/watch" for n in range(7)]
    caplog.set_level(logging.INFO, logger="stszone.watch")
    for minute in range(25):
        now[0] = minute * 60.0
        for _ in range(3):
            for member in members:
                outages.failed(member, _refused(), said="ConnectionRefusedError: refused")
    now[0] = 25 * 60.0
    for member in members[:-1]:
        outages.worked(member)
    said_before_the_last = len(caplog.records)
    now[0] = 26 * 60.0
    outages.worked(members[-1])
    outages.worked(members[-1])  # in sync again, and again: nothing more to say
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert said_before_the_last == 3, said
    assert said[0][0] == "WARNING"
    assert said[0][1].startswith("the connection to the API server (kubeconfig K) fails: ")
    # The first failure of minute 10 is the 211th (7 caches, 3 a minute).
    assert said[1:] == [
        (
            "WARNING",
            "the API server (kubeconfig K) is still unreachable: 211 requests failed in 600s "
            "(last: ConnectionRefusedError: refused)",
        ),
        (
            "WARNING",
            "the API server (kubeconfig K) is still unreachable: 421 requests failed in 1200s "
            "(last: ConnectionRefusedError: refused)",
        ),
        (
            "INFO",
            "the caches reach the API server (kubeconfig K) again (525 requests failed in 1560s)",
        ),
    ]


def _forbidden(resource: str) -> ApiError:
    return ApiError(403, reason="Forbidden", message=f"{resource} is forbidden")


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        pytest.param(
            [("nodes", "down"), ("pods", "down"), ("nodes", "503"), ("pods", "503")],
            ["WARNING connection", "WARNING 503", "INFO reach"],
            id="unreachable-then-503: the first is over once no cache meets it",
        ),
        pytest.param(
            [("nodes", "403"), ("pods", "403"), ("nodes", "403"), ("pods", "ok")],
            ["ERROR nodes", "ERROR pods", "INFO pods"],
            id="a 403 per resource, over for each on its own",
        ),
        pytest.param(
            [("nodes", "down"), ("nodes", "401"), ("nodes", "down")],
            ["WARNING connection", "INFO reach", "WARNING connection"],
            id="a 401 is an answer: the server was reached (the 401 is said elsewhere)",
        ),
        pytest.param(
            [("nodes", "tls"), ("pods", "tls"), ("nodes", "ok"), ("pods", "ok")],
            ["ERROR tls", "INFO tls"],
            id="a certificate that does not verify: once for every cache",
        ),
        pytest.param(
            [("nodes", "proxy"), ("pods", "proxy"), ("pods", "ok"), ("nodes", "ok")],
            ["ERROR proxy", "INFO proxy"],
            id="a proxy refusing: once for every cache",
        ),
        pytest.param(
            [("nodes", "garbage"), ("pods", "garbage"), ("nodes", "garbage"), ("nodes", "ok")],
            ["WARNING nodes", "WARNING pods", "INFO nodes"],
            id="anything else: once per cache",
        ),
    ],
)
def test_each_cause_is_said_when_it_starts_and_when_no_cache_meets_it(
    steps: list[tuple[str, str]], expected: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A table of failures and recoveries of two caches, and the lines they make: a cause is
    said when the first cache meets it and over when the last one is past it, whichever way."""
    outages = Outages("kubeconfig K")
    resources = {"nodes": NODES, "pods": PODS}
    refused = ApiError(401, message="Unauthorized")
    refused.source = "kubeconfig K"
    errors: dict[str, BaseException] = {
        "down": _refused(),
        "503": ApiError(503, reason="ServiceUnavailable", message="overloaded"),
        "401": refused,
        "garbage": ValueError("not JSON"),
        "tls": ssl.SSLCertVerificationError(1, "certificate verify failed"),
        "proxy": ProxyRefused("the proxy http://127.0.0.1:3128 refused the request: 407"),
    }
    caplog.set_level(logging.INFO, logger="stszone.watch")
    for table, what in steps:
        member = f"{table} list/watch"
        if what == "ok":
            outages.worked(member)
            continue
        err = errors.get(what) or _forbidden(table)
        outages.failed(member, err, said=str(err), resource=resources[table])
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    words = {
        "connection": "the connection to the API server",
        "503": "answers lists and watches with HTTP 503",
        "reach": "the caches reach the API server",
        "nodes": "nodes list/watch",
        "pods": "pods list/watch",
        "tls": "TLS verification",
        "proxy": "the proxy",
    }
    assert len(said) == len(expected), said
    for (level, message), want in zip(said, expected, strict=True):
        want_level, word = want.split(" ")
        assert level == want_level and words[word] in message, (said, want)


@pytest.mark.parametrize(
    ("before", "after", "claim"),
    [
        pytest.param("503", "down", "answers lists and watches again", id="503-then-down"),
        pytest.param("403", "down", "allows the nodes list/watch again", id="403-then-down"),
        pytest.param("garbage", "503", "nodes list/watch works again", id="garbage-then-503"),
        pytest.param("down", "unloaded", "reach the API server", id="down-then-no-credentials"),
        pytest.param("tls", "down", "passes TLS verification again", id="tls-then-down"),
    ],
)
def test_a_cause_given_way_to_another_is_not_said_to_be_well_again(
    before: str, after: str, claim: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A cache that meets one cause, then another that does not prove the first one over (an
    API server answering 503, then unreachable, as one does while it restarts), is not told the
    first one is well again: the line that ends the first says the caches fail otherwise, and
    counts what failed."""
    outages = Outages("kubeconfig K")
    unloaded = CredentialsError("the exec plugin failed", source="kubeconfig K")
    errors: dict[str, BaseException] = {
        "down": _refused(),
        "503": ApiError(503, reason="ServiceUnavailable", message="overloaded"),
        "403": _forbidden("nodes"),
        "garbage": ValueError("not JSON"),
        "tls": ssl.SSLCertVerificationError(1, "certificate verify failed"),
        "unloaded": unloaded,
    }
    caplog.set_level(logging.INFO, logger="stszone.watch")
    for what in (before, before, after):
        err = errors[what]
        outages.failed("nodes list/watch", err, said=str(err), resource=NODES)
    said = [r.getMessage() for r in caplog.records]
    assert not [line for line in said if claim in line], said
    ended = [line for line in said if "fail for another cause now" in line]
    assert len(ended) == 1 and "(2 requests failed in " in ended[0], said


def test_a_403_is_said_once_for_the_caches_of_one_resource(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The caches of StatefulSet pods and of Kafka brokers' pods both list and watch pods: a
    403 on pods wants one permission granted, said once, and said allowed once both caches
    are back; a 403 on nodes is another permission, said on its own."""
    outages = Outages("kubeconfig K")
    poolpods = Resource(table="poolpods", path="/api/v1/pods", label_selector="strimzi.io/kind")
    caplog.set_level(logging.INFO, logger="stszone.watch")
    for _ in range(3):
        for member, resource in (("pods list/watch", PODS), ("poolpods list/watch", poolpods)):
            err = _forbidden("pods")
            outages.failed(member, err, said=str(err), resource=resource)
    outages.failed("nodes list/watch", _forbidden("nodes"), said="nodes", resource=NODES)
    outages.worked("pods list/watch")
    outages.worked("nodes list/watch")
    outages.worked("poolpods list/watch")
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    grants = [m for level, m in said if level == "ERROR" and "grant get, list and watch on" in m]
    assert [m.rsplit(" on ", 1)[1].split(" ")[0] for m in grants] == ["pods", "nodes"], said
    allowed = [m for level, m in said if level == "INFO" and "list/watch again" in m]
    assert len(allowed) == 2 and "(6 requests failed in " in allowed[1], said
