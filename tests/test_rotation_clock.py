"""The CA rotation's settling time when the wall clock steps (NTP, a VM resumed): certificates
follow the wall clock, as the API servers' clocks do; ``settle`` is elapsed time."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.certcluster import KINDS, configuration, stored
from tests.certsim import START, Paper, policy
from tests.fakeapi import FakeApi
from tests.kubeconfig import write_kubeconfig
from tests.wallclock import SteppedWall
from webhook.cluster.api import Api
from webhook.cluster.certkeeper import Keeper
from webhook.cluster.credsource import load_credentials
from webhook.cluster.secretwatch import SecretWatch
from webhook.install import tlssecret
from webhook.install.rotation import Rotation

TOKEN = "clock-token"
NS = "certs-ns"
SECRET = "stszone-tls"


def _ca_serial(secret: dict[str, Any] | None) -> int:
    ca = tlssecret.read(secret or {}).ca
    assert ca is not None
    return ca.serial


async def _until_waiting(keeper: Keeper, decide: Callable[..., Any]) -> float:
    """Turns until one writes nothing; the wait it asks for."""
    for _ in range(20):
        wait = await keeper.turn(decide)
        if wait > 0:
            return wait
    raise AssertionError("the leader kept writing")


async def test_a_wall_clock_step_forward_does_not_cut_the_settling_time_short(
    tmp_path: Path,
) -> None:
    """The leader staged a new CA and both caBundles trust it; the switch to it waits for
    ``settle`` (18 s here), so that every API server trusts it before a replica serves a pair
    from it. The wall clock steps 19 s forward a moment later: the Secret still holds the old
    CA, and the leader still waits."""
    wall = SteppedWall()
    plan = policy()
    settle = plan.settle.total_seconds()
    async with FakeApi(token=TOKEN, fixtures=False) as fake:
        for kind in KINDS:
            fake.put(kind.lower() + "s", configuration(kind))
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", server=fake.url, token=TOKEN, ca=fake.ca
        )
        async with Api(load_credentials(str(kubeconfig))) as api:
            keeper = Keeper(
                api=api,
                secrets=SecretWatch(api=api, namespace=NS, name=SECRET, on_change=lambda _: None),
                config_name="stszone",
                planner=lambda: Rotation(plan, name=SECRET, namespace=NS).decide,
                leading=lambda: True,
                wall=wall,
            )
            decide = keeper.planner()
            await _until_waiting(keeper, decide)  # created, and both caBundles hold its CA
            old = _ca_serial(stored(fake, "secrets", SECRET, NS))
            wall.step(400)  # the CA is two thirds into its 540 s: a successor is staged
            assert 0 < await _until_waiting(keeper, decide) <= settle
            secret = stored(fake, "secrets", SECRET, NS)
            assert tlssecret.read(secret or {}).next_ca is not None  # staged, trusted
            wall.step(settle + 1)
            wait = await keeper.turn(decide)
            assert _ca_serial(stored(fake, "secrets", SECRET, NS)) == old  # not switched
            assert 0 < wait <= settle


def test_a_wall_clock_step_back_does_not_stretch_the_settling_time() -> None:
    """A staged CA trusted by both caBundles, then the wall clock steps 10 s back: the switch
    to it comes once ``settle`` has elapsed, not 10 s later."""
    paper = Paper(policy())
    rotation = paper.rotation()
    injected = lambda p: len(p.writes_of("ValidatingWebhookConfiguration")) == 2  # noqa: E731
    paper.run(rotation, until=START + dt.timedelta(minutes=7), stop=injected)
    staged = tlssecret.read(paper.secret or {}).next_ca
    assert staged is not None
    elapsed = 1000.0
    waiting = rotation.decide(paper.secret, configs=paper.configs, now=paper.now, elapsed=elapsed)
    assert waiting.secret is None and waiting.wait == 18.0  # trusted from now on
    paper.now -= dt.timedelta(seconds=10)
    elapsed += waiting.wait
    decision = rotation.decide(paper.secret, configs=paper.configs, now=paper.now, elapsed=elapsed)
    assert decision.secret is not None
    assert _ca_serial(decision.secret) == staged.serial  # switched
