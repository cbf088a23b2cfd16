"""The watch of the one Secret every ``--manage-certs`` replica serves from, against the fake API.

The clock and the backoff's sleep are injected: a test decides what each wait does and how far
time moves, so no seconds are counted. What is checked is what readiness and the API server
see: how long the watch counts as failing, and how often it is retried.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from tests.fakeapi import FakeApi, Fault, eventually
from tests.retries import assert_doubling, in_background, parked
from webhook.cluster.api import Api
from webhook.cluster.credsource import load_credentials
from webhook.cluster.secretwatch import SecretWatch, WatchTiming

SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "stszone-tls", "namespace": "certs-ns"},
    "type": "kubernetes.io/tls",
    "data": {},
}
TIMING = WatchTiming()


@contextlib.asynccontextmanager
async def watching(
    kubeconfig: Path,
    *,
    sleep: Callable[[float], Awaitable[None]],
    clock: Callable[[], float],
) -> AsyncIterator[SecretWatch]:
    """The Secret's watch running with the injected sleep and clock; cancelled after the block."""
    async with Api(load_credentials(str(kubeconfig))) as client:
        watch = SecretWatch(
            api=client,
            namespace="certs-ns",
            name="stszone-tls",
            on_change=lambda _: None,
            clock=clock,
            sleep=sleep,
        )
        async with in_background(watch.run()):
            yield watch


@pytest.mark.parametrize(
    "fault", [Fault.drop(), Fault.error_event(500)], ids=["watch-200-reset", "watch-200-ERROR-500"]
)
async def test_a_watch_failing_before_any_event_counts_as_failing(
    api: FakeApi, kubeconfig: Path, fault: Fault
) -> None:
    """A watch the API server answers and that then fails before delivering anything, on every
    attempt, proves nothing: the time failing counts on across the attempts (so readiness fails
    past --max-unsynced), from the first failure (each retry waits one second of the clock)."""
    api.put("secrets", SECRET)
    api.inject("secrets", "watch", *[fault] * 1000)
    now = [0.0]
    failing: list[float] = []

    async def sleep(delay: float) -> None:
        failing.append(watch.unsynced_for())
        now[0] += 1.0
        if len(failing) == 6:
            await parked()
        await asyncio.sleep(0)

    async with watching(kubeconfig, sleep=sleep, clock=lambda: now[0]) as watch:
        await eventually(lambda: len(failing) == 6)
        assert watch.synced and watch.current is not None
    assert failing == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


@pytest.mark.parametrize(
    ("fault", "verb"),
    [(Fault.lines(b""), "watch"), (Fault.expired(), "list")],
    ids=["watch-ends-at-once", "watch-410-every-time"],
)
async def test_a_watch_that_never_proves_itself_is_retried_at_a_slowing_pace(
    api: FakeApi, kubeconfig: Path, fault: Fault, verb: str
) -> None:
    """A watch answered and ended at once with nothing in it (a proxy cutting it), or expiring
    (410) right after every list: each retry follows one backoff wait, and the waits grow to
    the cap as after any failure (neither a list nor an answer resets them)."""
    api.put("secrets", SECRET)
    api.inject("secrets", "watch", *[fault] * 1000)
    now = [0.0]
    waits: list[tuple[float, int]] = []  # (delay asked for, requests of `verb` seen by then)

    async def sleep(delay: float) -> None:
        waits.append((delay, len(api.seen("secrets", "list" if verb == "list" else "watch"))))
        now[0] += delay
        if len(waits) == 8:
            await parked()
        await asyncio.sleep(0)

    async with watching(kubeconfig, sleep=sleep, clock=lambda: now[0]):
        await eventually(lambda: len(waits) == 8 or len(api.seen("secrets", "watch")) > 50)
    assert [seen for _, seen in waits] == list(range(1, 9))  # no retry without its wait
    assert_doubling(
        [delay for delay, _ in waits], initial=TIMING.backoff_initial, cap=TIMING.backoff_cap
    )


async def test_a_quiet_watch_proves_itself_by_staying_open(api: FakeApi, kubeconfig: Path) -> None:
    """A quiet Secret's watch delivers nothing: it proves itself by staying open for
    ``healthy_after``, not by being answered. The clock moves only in steps of 0.25 s, so the
    step that finds the watch working tells when it came to."""
    api.put("secrets", SECRET)
    api.inject("secrets", "watch", Fault.drop())  # failing from this failure, at time 0
    now = [0.0]

    async def sleep(delay: float) -> None:
        now[0] += 1.0  # the quiet watch opens at time 1

    def tick() -> bool:
        now[0] += 0.25
        return watch.unsynced_for() == 0.0

    async with watching(kubeconfig, sleep=sleep, clock=lambda: now[0]) as watch:
        await eventually(lambda: len(api.seen("secrets", "watch")) == 2)
        await eventually(tick)
        assert now[0] >= 1.0 + TIMING.healthy_after, now[0]
