"""Leader election on a Lease (webhook/cluster/lease.py) against the fake API server: one
leader, takeover only after the lease duration of silence, release on a clean stop (also when
a renewal was still in flight), a leader that cannot renew stops, and refusals said once."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fakeapi import FakeApi, Fault, eventually
from tests.kubeconfig import write_kubeconfig
from webhook.cluster.api import Api
from webhook.cluster.credsource import load_credentials
from webhook.cluster.lease import Elector, Timing

TOKEN = "lease-token"
NS = "certs-ns"
FAST = Timing(lease_duration=2.0, renew_deadline=1.2, retry_period=0.05)


@dataclass
class Clock:
    """A monotonic clock the test moves."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Candidate:
    """An elector, its task, and what its ``lead`` saw."""

    elector: Elector
    task: asyncio.Task[None] | None = None
    terms: int = 0
    ended: int = 0
    events: list[str] = field(default_factory=list)
    #: Whether its work raises as soon as it starts; when each term started (the loop's time).
    fails: bool = False
    started: list[float] = field(default_factory=list)

    async def lead(self) -> None:
        self.terms += 1
        self.events.append("lead")
        self.started.append(asyncio.get_running_loop().time())
        try:
            if self.fails:
                raise RuntimeError("the work failed")
            await asyncio.Event().wait()
        finally:
            self.ended += 1
            self.events.append("stop")


@pytest.fixture
async def fake() -> AsyncIterator[FakeApi]:
    async with FakeApi(token=TOKEN, fixtures=False) as api:
        yield api


@pytest.fixture
async def make(fake: FakeApi, tmp_path: Path) -> AsyncIterator[Callable[..., Candidate]]:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server=fake.url, token=TOKEN, ca=fake.ca)
    started: list[tuple[Candidate, Api]] = []

    def build(
        identity: str,
        *,
        clock: Callable[[], float] | None = None,
        release: bool = True,
        fails: bool = False,
    ) -> Candidate:
        api = Api(load_credentials(str(kubeconfig)), user_agent=identity)
        extra = {"clock": clock} if clock is not None else {}
        elector = Elector(
            api=api,
            namespace=NS,
            name="stszone-certs",
            identity=identity,
            timing=FAST,
            release_on_cancel=release,
            **extra,
        )
        candidate = Candidate(elector, fails=fails)
        candidate.task = asyncio.create_task(elector.run(candidate.lead))
        started.append((candidate, api))
        return candidate

    yield build
    for candidate, api in started:
        assert candidate.task is not None
        candidate.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await candidate.task
        await api.close()


def _lease(fake: FakeApi) -> dict[str, object]:
    stored = fake.objects.tables["leases"].get((NS, "stszone-certs"))
    assert stored is not None
    spec: dict[str, object] = json.loads(stored.body)["spec"]
    return spec


async def _stop(candidate: Candidate) -> None:
    assert candidate.task is not None
    candidate.task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await candidate.task


def _gets(fake: FakeApi, agent: str) -> int:
    return sum(1 for seen in fake.seen("leases", "get") if seen.agent == agent)


def _releases(fake: FakeApi, agent: str) -> list[dict[str, Any]]:
    """The releases ``agent`` wrote (updates with an empty holder), oldest first."""
    return [
        s.body
        for s in fake.seen("leases", "update")
        if s.agent == agent and s.body["spec"]["holderIdentity"] == ""
    ]


async def test_of_two_candidates_one_leads_and_the_other_keeps_out(
    fake: FakeApi, make: Callable[..., Candidate]
) -> None:
    """Both start at once: one holds the Lease and leads; the other only reads it."""
    a, b = make("replica-a"), make("replica-b")
    await eventually(lambda: a.elector.leading or b.elector.leading)
    leader, other = (a, b) if a.elector.leading else (b, a)
    # Let the other look at the Lease many times while the leader renews it.
    looks = _gets(fake, other.elector.identity)
    await eventually(lambda: _gets(fake, other.elector.identity) >= looks + 10)
    assert (leader.terms, other.terms) == (1, 0)
    assert _lease(fake)["holderIdentity"] == leader.elector.identity
    assert _lease(fake)["leaseDurationSeconds"] == 2  # round(2.0)
    writers = {s.agent for s in fake.requests if s.resource == "leases" and s.verb == "update"}
    assert writers == {leader.elector.identity}  # the other never renewed the leader's Lease
    updates = [s for s in fake.requests if s.resource == "leases" and s.verb == "update"]
    assert all(s.body["metadata"]["resourceVersion"] for s in updates)


async def test_a_leader_gone_silent_is_replaced_only_after_the_lease_duration(
    fake: FakeApi, make: Callable[..., Candidate]
) -> None:
    """A crashed leader (no release) is taken over once the candidate has seen the record
    unchanged for the lease duration on its own clock, and not before."""
    a = make("replica-a", release=False)
    await eventually(lambda: a.elector.leading)
    clock = Clock()
    b = make("replica-b", clock=clock)
    await eventually(lambda: _gets(fake, "replica-b") >= 2)
    await _stop(a)  # a crash: nothing more from replica-a, the Lease still names it
    # A renewal cancelled in flight may still land: let b see the record's last state first.
    looks = _gets(fake, "replica-b")
    await eventually(lambda: _gets(fake, "replica-b") >= looks + 3)
    assert _lease(fake)["holderIdentity"] == "replica-a"
    looks = _gets(fake, "replica-b")
    clock.now += FAST.lease_duration - 0.01  # not quite a lease duration since the last change
    await eventually(lambda: _gets(fake, "replica-b") >= looks + 5)
    assert b.terms == 0 and _lease(fake)["holderIdentity"] == "replica-a"
    clock.now += 0.02
    await eventually(lambda: b.elector.leading)
    spec = _lease(fake)
    assert spec["holderIdentity"] == "replica-b"
    assert spec["leaseTransitions"] == 1


async def test_a_leader_stopped_on_purpose_hands_the_lease_over_at_once(
    fake: FakeApi, make: Callable[..., Candidate]
) -> None:
    """SIGTERM: the leader's work stops, the Lease is released (empty holder), and a candidate
    whose clock has not moved at all takes it."""
    a = make("replica-a")
    await eventually(lambda: a.elector.leading)
    b = make("replica-b", clock=Clock())
    await eventually(lambda: _gets(fake, "replica-b") >= 2)
    await _stop(a)
    assert a.events == ["lead", "stop"]
    await eventually(lambda: b.elector.leading)
    assert _lease(fake)["holderIdentity"] == "replica-b"
    # Two writes when a renewal still in flight made the first meet 409 Conflict (the next test).
    releases = _releases(fake, "replica-a")
    assert 1 <= len(releases) <= 2 and releases[-1]["spec"]["leaseDurationSeconds"] == 1


async def _stop_right_after_a_renewal(
    fake: FakeApi, leader: Candidate, *, then: Callable[[], None] = lambda: None
) -> str:
    """Stop ``leader`` once one of its renewals is stored and before its answer is sent (then
    run ``then``); the renewal's resourceVersion."""
    landed: list[str] = []
    task = leader.task
    assert task is not None

    def stop(resource: str, verb: str, obj: dict[str, Any]) -> None:
        mine = obj["spec"]["holderIdentity"] == leader.elector.identity
        if resource == "leases" and verb == "update" and mine:
            fake.on_write.remove(stop)
            landed.append(obj["metadata"]["resourceVersion"])
            task.cancel()
            then()

    fake.on_write.append(stop)
    await eventually(lambda: bool(landed))
    with contextlib.suppress(asyncio.CancelledError):
        await task  # cancelled once, as on SIGTERM: a second cancel would cut the release
    assert leader.events == ["lead", "stop"]
    return landed[0]


async def test_a_leader_stopped_while_its_renewal_is_in_flight_still_hands_the_lease_over(
    fake: FakeApi, make: Callable[..., Candidate]
) -> None:
    """The stop comes after a renewal reached the API server and before its answer came back:
    the release, written against the Lease as last read, meets 409 Conflict. It reads the Lease
    again and releases that, so a candidate whose clock has not moved still takes it."""
    a = make("replica-a")
    await eventually(lambda: a.elector.leading)
    b = make("replica-b", clock=Clock())
    await eventually(lambda: _gets(fake, "replica-b") >= 2)
    landed = await _stop_right_after_a_renewal(fake, a)
    stale, fresh = (r["metadata"]["resourceVersion"] for r in _releases(fake, "replica-a"))
    assert stale != landed and fresh == landed
    await eventually(lambda: b.elector.leading)
    assert _lease(fake)["holderIdentity"] == "replica-b"


async def test_a_release_that_finds_another_holder_leaves_the_lease_alone(
    fake: FakeApi, make: Callable[..., Candidate]
) -> None:
    """The same stop, but by the time the release reads the Lease again another replica holds
    it: the release writes nothing more."""
    a = make("replica-a")
    await eventually(lambda: a.elector.leading)

    def taken() -> None:
        lease = json.loads(fake.objects.tables["leases"][(NS, "stszone-certs")].body)
        lease["spec"]["holderIdentity"] = "replica-c"
        fake.put("leases", lease)

    await _stop_right_after_a_renewal(fake, a, then=taken)
    assert len(_releases(fake, "replica-a")) == 1  # the one that met 409 Conflict
    assert _lease(fake)["holderIdentity"] == "replica-c"


async def test_a_leader_that_cannot_renew_stops_leading(
    fake: FakeApi, make: Callable[..., Candidate]
) -> None:
    """The API refuses its renewals: within the renew deadline its work is cancelled, before
    anyone else could take over; it campaigns again and leads again once the API answers."""
    a = make("replica-a")
    await eventually(lambda: a.elector.leading)
    fake.inject("leases", "get", *[Fault.status(500)] * 40)
    await eventually(lambda: a.ended == 1)
    assert not a.elector.leading
    fake.clear("leases", "get")
    await eventually(lambda: a.terms == 2)
    assert a.events[:3] == ["lead", "stop", "lead"]


async def test_credentials_that_cannot_be_reloaded_for_a_while_do_not_end_the_campaign(
    fake: FakeApi, make: Callable[..., Candidate], tmp_path: Path
) -> None:
    """The API server stops taking the old token (401: the credentials are reloaded) while the
    kubeconfig is being rewritten with the new one: the reload fails for a moment, the leader
    stops leading when its renew deadline passes, and leads again once the file reads; the
    campaign never ends (a job that ended would fail /readyz for good)."""
    a = make("replica-a")
    await eventually(lambda: a.elector.leading)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("")  # truncated, about to be written again
    fake.token = "lease-token-2"
    assert a.task is not None
    await eventually(lambda: a.task is not None and (a.task.done() or a.ended == 1))
    assert not a.task.done(), a.task.exception()
    write_kubeconfig(kubeconfig, server=fake.url, token="lease-token-2", ca=fake.ca)
    await eventually(lambda: a.task is not None and (a.task.done() or a.terms == 2))
    assert not a.task.done(), a.task.exception()


async def test_work_that_fails_at_once_is_run_again_only_a_retry_period_later(
    fake: FakeApi, make: Callable[..., Candidate]
) -> None:
    """The leader's work raises as soon as it starts: each new term starts a retry period after
    the last (re-run at once, it would spin: Lease updates and reads in a tight loop), and the
    Lease stays with the same holder meanwhile."""
    a = make("replica-a", fails=True)
    await eventually(lambda: a.terms >= 4)
    gaps = [later - earlier for earlier, later in itertools.pairwise(a.started)]
    assert all(gap >= FAST.retry_period for gap in gaps), gaps
    assert _lease(fake)["holderIdentity"] == "replica-a"
    assert _lease(fake)["leaseTransitions"] == 0


async def test_refusals_of_the_lease_are_said_once_each_with_what_to_do(
    fake: FakeApi, make: Callable[..., Candidate], caplog: pytest.LogCaptureFixture
) -> None:
    """403 five times, then 500: an error naming the Role to fix, then a warning, once each."""
    fake.inject("leases", "create", *[Fault.status(403)] * 5, *[Fault.status(500)] * 1000)
    caplog.set_level(logging.WARNING, logger="stszone.lease")
    a = make("replica-a")
    await eventually(lambda: len(fake.seen("leases", "create")) >= 10)
    assert a.terms == 0 and not a.elector.leading
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "stszone.lease"]
    (error, refused), (warning, failed) = said
    lease = f"cannot read or write Lease {NS}/stszone-certs: HTTP "
    assert (error, refused[: len(lease) + 3]) == ("ERROR", f"{lease}403"), said
    assert refused.endswith(
        "get/update on Lease stszone-certs in namespace certs-ns (Role stszone-certs: "
        "deploy/base/certs-rbac.yaml, or the Helm chart's certs-rbac.yaml)"
    )
    assert (warning, failed[: len(lease) + 3]) == ("WARNING", f"{lease}500"), said
    assert failed.endswith("; retrying every 0.05s")


async def test_credentials_that_do_not_load_are_said_once_not_again_by_the_lease(
    fake: FakeApi,
    make: Callable[..., Candidate],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The leader's credentials are refused (a 401 makes it read its kubeconfig again, which is
    empty, so they stop loading): stszone.credentials says why, once, for every client. The
    Lease's lines add which Lease waits and the retry period, and that the release at the stop
    failed, naming where the credentials come from, not the refusal again."""
    a = make("replica-a")
    await eventually(lambda: a.elector.leading)
    caplog.set_level(logging.INFO)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("")
    fake.token = "lease-token-2"
    await eventually(lambda: a.ended == 1)
    await _stop(a)
    credentials = [r.getMessage() for r in caplog.records if r.name == "stszone.credentials"]
    (refusal,) = [line for line in credentials if "fail until it loads" in line]
    reason = refusal.removesuffix("; requests to the API server fail until it loads")
    assert reason != refusal and reason.startswith("cannot load credentials from kubeconfig ")
    said = [r.getMessage() for r in caplog.records if r.name == "stszone.lease"]
    assert not [line for line in said if reason in line or "Unauthorized" in line], said
    waits = f"the credentials from kubeconfig {kubeconfig} do not load"
    refused = f"the API server refuses the credentials from kubeconfig {kubeconfig}"
    # Whether the leader stops leading before or after the reload is first refused depends on
    # how the retries fall within the renew deadline; each line is said once either way.
    assert sorted(said[:-1]) == sorted(
        [
            f"cannot read or write Lease {NS}/stszone-certs: {refused}; retrying every 0.05s",
            f"cannot read or write Lease {NS}/stszone-certs: {waits}; retrying every 0.05s",
            f"stopped leading: Lease {NS}/stszone-certs not renewed for 1.2s",
        ]
    ), said
    assert said[-1] == f"could not release Lease {NS}/stszone-certs: {waits}", said


def _held(fake: FakeApi, holder: str, **spec: object) -> None:
    """Store a Lease ``holder`` wrote (another client or another chart version)."""
    spec = {"holderIdentity": holder, "renewTime": "2026-01-01T00:00:00.000000Z", **spec}
    fake.put("leases", {"metadata": {"name": "stszone-certs", "namespace": NS}, "spec": spec})


@pytest.mark.parametrize(("written", "waited"), [(30, 30.0), (1, 1.0)])
async def test_a_candidate_waits_out_the_lease_duration_the_holder_wrote(
    fake: FakeApi, make: Callable[..., Candidate], written: int, waited: float
) -> None:
    """The holder's leaseDurationSeconds (longer or shorter than this replica's 2 s) is how long
    a candidate waits after the record last changed (here its renewTime, as each renewal changes
    it), as client-go's isLeaseValid: replicas with different durations agree on when the Lease
    expires."""
    _held(fake, "other-client", leaseDurationSeconds=written, leaseTransitions=3)
    clock = Clock()
    b = make("replica-b", clock=clock)
    await eventually(lambda: _gets(fake, "replica-b") >= 2)
    clock.now += waited - 0.1
    renewed = "2026-01-01T00:00:01.000000Z"
    _held(fake, "other-client", leaseDurationSeconds=written, leaseTransitions=3, renewTime=renewed)
    looks = _gets(fake, "replica-b")
    await eventually(lambda: _gets(fake, "replica-b") >= looks + 2)
    clock.now += waited - 0.1
    looks = _gets(fake, "replica-b")
    await eventually(lambda: _gets(fake, "replica-b") >= looks + 5)
    assert b.terms == 0 and _lease(fake)["holderIdentity"] == "other-client"
    clock.now += 0.2
    await eventually(lambda: b.elector.leading)
    spec = _lease(fake)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("replica-b", 4)
    assert spec["leaseDurationSeconds"] == 2


async def test_a_lease_without_a_duration_is_expired(
    fake: FakeApi, make: Callable[..., Candidate]
) -> None:
    """A holder that wrote no leaseDurationSeconds holds nothing (client-go reads it as 0):
    a candidate whose clock has not moved takes the Lease."""
    _held(fake, "other-client")
    b = make("replica-b", clock=Clock())
    await eventually(lambda: b.elector.leading)
    assert _lease(fake)["holderIdentity"] == "replica-b"


async def test_a_renewal_seen_through_a_slow_read_counts_from_when_the_read_came_back(
    fake: FakeApi, make: Callable[..., Candidate], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder renews while a candidate's read is held up on its way (1.5 s, under a 2 s
    duration): the candidate counts the duration from when it saw the renewal, as client-go
    (observedTime is taken after the Get), not from when it sent the read, so it does not take
    the Lease while the holder, renewed 2 s before, may still lead."""
    _held(fake, "other-client", leaseDurationSeconds=2)
    b = make("replica-b")
    api, asked = b.elector.api, asyncio.Event()
    call = api.call

    async def slow_first_read(method: str, path: str, **kwargs: Any) -> Any:
        if not asked.is_set():
            asked.set()
            await asyncio.sleep(1.5)
        return await call(method, path, **kwargs)

    monkeypatch.setattr(api, "call", slow_first_read)
    await asked.wait()
    loop = asyncio.get_running_loop()
    sent = loop.time()
    await asyncio.sleep(0.5)
    _held(fake, "other-client", leaseDurationSeconds=2, renewTime="2026-01-01T00:00:01.000000Z")
    await asyncio.sleep(sent + 0.5 + FAST.lease_duration - 0.1 - loop.time())
    assert b.terms == 0 and _lease(fake)["holderIdentity"] == "other-client"
    await eventually(lambda: b.elector.leading)
    # Counted from the read's return (1.5 s after it was sent): 3.5 s, give or take a retry.
    assert loop.time() >= sent + 1.5 + FAST.lease_duration - 0.5
