"""``--manage-certs`` replicas against the fake API server: creation, reuse, renewal, two
replicas racing, a leader killed in the middle of a CA rotation, and the bad states (a Secret
someone else made, a missing configuration, RBAC refusing the patch). Clients check what the
API server would: the served certificate against a configuration's caBundle, for the Service
name (tests/certcluster.py)."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.certcluster import (
    KINDS,
    NS,
    Replica,
    bundle_pem,
    cluster,
    configuration,
    handshake,
    stored,
    writes_by,
)
from tests.certsim import corrupted, replay
from tests.fakeapi import FakeApi, Fault, eventually
from webhook.cli import build_parser, managedcerts, settings_from
from webhook.config import Settings
from webhook.install import tlssecret
from webhook.install.certs import new_ca, new_serving


def _secret(fake: FakeApi) -> dict[str, Any]:
    secret = stored(fake, "secrets", "stszone-tls", NS)
    assert secret is not None
    return secret


def _serving_serial(fake: FakeApi) -> int:
    contents = tlssecret.read(_secret(fake))
    assert contents.serving is not None
    return contents.serving.serial


async def test_from_nothing_the_leader_creates_the_secret_and_injects_the_ca(
    tmp_path: Path,
) -> None:
    """No Secret, empty caBundles: not ready at first, then ready, serving the Secret's pair,
    which a client trusting only the configuration's caBundle accepts for the Service name."""
    async with cluster(tmp_path) as (fake, start):
        replica = await start("replica-a")
        ready, why = replica.managed.ready()
        assert not ready and "no serving certificate yet" in why
        await eventually(lambda: replica.managed.ready()[0])
        secret = _secret(fake)
        assert secret["metadata"]["labels"][tlssecret.MANAGED_BY] == "stszone"
        await eventually(lambda: bool(bundle_pem(fake, "ValidatingWebhookConfiguration")))
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            assert await handshake(replica.port, bundle_pem(fake, kind)) == _serving_serial(fake)
        # The turn after the last write finds everything in order.
        await eventually(lambda: replica.managed.keeper.outcome.last_success is not None)


async def test_an_existing_valid_secret_is_served_as_it_is(tmp_path: Path) -> None:
    """A Secret stszone made before, and caBundles holding its CA: nothing is written."""
    policy = managedcerts.policy(Settings(namespace=NS, cert_validity=120.0))
    ca_pem, ca_key = new_ca(lifetime=policy.ca_validity)
    cert, key = new_serving(
        ca_cert_pem=ca_pem, ca_key_pem=ca_key, dns_names=policy.dns_names, lifetime=policy.validity
    )
    contents = _contents(ca_pem, ca_key, cert, key)
    assert contents.serving is not None
    async with cluster(tmp_path, configs=()) as (fake, start):
        fake.put("secrets", tlssecret.build(contents, name="stszone-tls", namespace=NS))
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            fake.put(kind.lower() + "s", _with_bundle(configuration(kind), ca_pem))
        replica = await start("replica-a")
        await eventually(lambda: replica.managed.ready()[0])
        await eventually(lambda: replica.managed.keeper.outcome.last_success is not None)
        assert replica.managed.tls.serial == contents.serving.serial
        assert writes_by(fake) == {}
        assert await handshake(replica.port, ca_pem) == contents.serving.serial


async def test_a_renewed_pair_reaches_both_replicas_without_a_restart(tmp_path: Path) -> None:
    """A 6-second pair is renewed by the leader two thirds in; both listeners (never closed)
    hand the new serial to new handshakes."""
    async with cluster(tmp_path) as (fake, start):
        a = await start("replica-a", cert_validity=6.0)
        b = await start("replica-b", cert_validity=6.0)
        await eventually(lambda: a.managed.ready()[0] and b.managed.ready()[0])
        first = _serving_serial(fake)
        await eventually(lambda: _serving_serial(fake) != first)
        second = _serving_serial(fake)
        await eventually(lambda: a.managed.tls.serial == b.managed.tls.serial == second)
        bundle = bundle_pem(fake, "MutatingWebhookConfiguration")
        assert await handshake(a.port, bundle) == await handshake(b.port, bundle) == second
        contents = tlssecret.read(_secret(fake))
        assert contents.serving is not None and contents.ca is not None
        assert contents.serving.cert.not_valid_before_utc > contents.ca.cert.not_valid_before_utc


async def test_two_replicas_racing_one_writes_and_both_serve_what_it_wrote(
    tmp_path: Path,
) -> None:
    """Started together: every certificate write comes from the Lease holder; the other
    replica serves the pair it wrote."""
    async with cluster(tmp_path) as (fake, start):
        a = await start("replica-a")
        b = await start("replica-b")
        await eventually(lambda: a.managed.ready()[0] and b.managed.ready()[0])
        await eventually(lambda: bool(bundle_pem(fake, "ValidatingWebhookConfiguration")))
        leader = a if a.managed.elector.leading else b
        writers = writes_by(fake)
        assert set(writers) == {
            "secrets",
            "mutatingwebhookconfigurations",
            "validatingwebhookconfigurations",
        }
        assert all(agents == {_agent(leader)} for agents in writers.values())
        assert len(fake.seen("secrets", "create")) == 1
        serial = _serving_serial(fake)
        bundle = bundle_pem(fake, "ValidatingWebhookConfiguration")
        assert await handshake(a.port, bundle) == await handshake(b.port, bundle) == serial


async def test_a_leader_killed_in_the_middle_of_a_ca_rotation_is_finished_by_the_other(
    tmp_path: Path,
) -> None:
    """3-second pairs, 9-second CAs: the leader is killed right after it staged the next CA
    (before any caBundle holds it). The other replica takes the Lease and completes the
    rotation in order; every write, by either, keeps both rules (tests/certsim.py)."""
    recorded: list[tuple[dt.datetime, str, dict[str, Any]]] = []
    replicas: list[Replica] = []
    killed: list[Replica] = []
    stopping: list[asyncio.Task[None]] = []

    def watch(resource: str, verb: str, obj: dict[str, Any]) -> None:
        if resource == "leases":
            return
        what = "secret" if resource == "secrets" else obj["kind"]
        recorded.append((dt.datetime.now(dt.UTC), what, obj))
        if what == "secret" and tlssecret.read(obj).next_ca is not None and not killed:
            # Killed now, before its write is even answered: it sends nothing more.
            killed.extend(r for r in replicas if r.managed.elector.leading)
            killed[0].managed.elector.release_on_cancel = False
            for task in killed[0].tasks:
                task.cancel()
            stopping.append(asyncio.get_running_loop().create_task(killed[0].stop()))

    async with cluster(tmp_path) as (fake, start):
        fake.on_write.append(watch)
        replicas.append(await start("replica-a", cert_validity=3.0))
        replicas.append(await start("replica-b", cert_validity=3.0))
        await eventually(lambda: bool(stopping) and stopping[0].done())
        (survivor,) = [r for r in replicas if r is not killed[0]]
        first = tlssecret.read(recorded[0][2]).ca
        assert first is not None

        def rotated() -> bool:
            contents = tlssecret.read(_secret(fake))
            held = bundle_pem(fake, "ValidatingWebhookConfiguration")
            return (
                contents.ca is not None
                and contents.ca.serial != first.serial
                and len(contents.bundle) == 1
                and held == tlssecret.pem_bundle(contents.bundle)
            )

        await eventually(rotated)
        replay(managedcerts.policy(Settings(namespace=NS, cert_validity=3.0)), recorded)
        writes = [
            seen
            for seen in fake.requests
            if seen.verb in ("create", "update", "patch") and seen.resource != "leases"
        ]
        staged = next(
            i
            for i, seen in enumerate(writes)
            if seen.resource == "secrets" and "next-ca.crt" in seen.body.get("data", {})
        )
        assert {seen.agent for seen in writes[: staged + 1]} == {_agent(killed[0])}
        assert {seen.agent for seen in writes[staged + 1 :]} == {_agent(survivor)}
        kinds = [seen.resource for seen in writes[staged + 1 :]]
        assert kinds[:3] == [  # the staged CA is trusted first, then the switch
            "mutatingwebhookconfigurations",
            "validatingwebhookconfigurations",
            "secrets",
        ]
        await eventually(lambda: survivor.managed.tls.serial == _serving_serial(fake))
        bundle = bundle_pem(fake, "MutatingWebhookConfiguration")
        assert await handshake(survivor.port, bundle) == _serving_serial(fake)


@pytest.mark.parametrize(
    "broken", ["a flipped bit in its public key", "truncated, and ca-bundle.crt does not parse"]
)
async def test_a_broken_pair_in_our_secret_is_reissued_from_its_ca_and_served(
    tmp_path: Path, broken: str
) -> None:
    """Our Secret, its tls.crt broken, the configurations trusting its CA: the leader re-issues
    the pair from that CA (once the CA has been seen trusted for the settling time, 0.6 s),
    and the replica serves it. The fake, as the API server, refuses a write of the Secret
    without tls.crt and tls.key (such as a repair of the bundle alone) with 422."""
    policy = managedcerts.policy(Settings(namespace=NS, cert_validity=6.0))
    ca_pem, ca_key = new_ca(lifetime=policy.ca_validity)
    cert, key = new_serving(
        ca_cert_pem=ca_pem, ca_key_pem=ca_key, dns_names=policy.dns_names, lifetime=policy.validity
    )
    secret = tlssecret.build(_contents(ca_pem, ca_key, cert, key), name="stszone-tls", namespace=NS)
    data = secret["data"]
    if broken.startswith("truncated"):
        data["tls.crt"] = data["tls.crt"][:40]
        data["ca-bundle.crt"] = base64.b64encode(b"garbage").decode()
    else:
        data["tls.crt"] = base64.b64encode(corrupted(cert, broken)).decode()
    async with cluster(tmp_path, configs=()) as (fake, start):
        fake.put("secrets", secret)
        for kind in KINDS:
            fake.put(kind.lower() + "s", _with_bundle(configuration(kind), ca_pem))
        replica = await start("replica-a", cert_validity=6.0)
        await eventually(lambda: replica.managed.ready()[0])
        contents = tlssecret.read(_secret(fake))
        assert contents.ca is not None and contents.ca.cert_pem == ca_pem
        assert await handshake(replica.port, ca_pem) == _serving_serial(fake)


async def test_a_foreign_secret_that_does_not_parse_is_left_alone_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Someone else's Secret with a broken pair: not ready, one error line saying what to do,
    and stszone writes neither the Secret nor the configurations."""
    caplog.set_level(logging.INFO)
    async with cluster(tmp_path) as (fake, start):
        fake.put(
            "secrets",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "stszone-tls", "namespace": NS},
                "data": {"tls.crt": "bm90IGEgY2VydA==", "tls.key": "bm90IGEga2V5"},
            },
        )
        replica = await start("replica-a", cert_validity=6.0)  # a look every 0.6 s
        await eventually(lambda: replica.managed.elector.leading)
        looks = len(fake.seen("secrets", "get"))
        await eventually(lambda: len(fake.seen("secrets", "get")) >= looks + 3)
        ready, why = replica.managed.ready()
        assert not ready and "no usable serving pair" in why
        assert writes_by(fake) == {}
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1, errors
        assert "stszone did not create it" in errors[0] and "delete it" in errors[0]


async def test_a_missing_configuration_is_said_once_and_the_rest_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No MutatingWebhookConfiguration: one error line saying how to install it; the Secret
    is made, served, and the ValidatingWebhookConfiguration gets the CA."""
    caplog.set_level(logging.INFO)
    async with cluster(tmp_path, configs=("ValidatingWebhookConfiguration",)) as (fake, start):
        replica = await start("replica-a", cert_validity=6.0)
        await eventually(lambda: replica.managed.ready()[0])
        await eventually(lambda: bool(bundle_pem(fake, "ValidatingWebhookConfiguration")))

        def missing() -> int:
            return len([s for s in fake.requests if s.resource == "mutatingwebhookconfigurations"])

        seen = missing()
        await eventually(lambda: missing() >= seen + 3)  # asked again and again
        lines = [r.getMessage() for r in caplog.records if "not found" in r.getMessage()]
        assert len(lines) == 1, lines
        assert "MutatingWebhookConfiguration stszone" in lines[0]
        assert "kubectl apply" in lines[0]
        assert replica.managed.keeper.outcome.last_success is None  # not in order without it


async def test_rbac_refusing_the_patch_is_said_once_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """403 on every patch of the validating configuration: one line naming the ClusterRole to
    fix, the failures counted; the mutating configuration is still given its CA."""
    caplog.set_level(logging.INFO)
    async with cluster(tmp_path) as (fake, start):
        fake.inject("validatingwebhookconfigurations", "patch", *[Fault.status(403)] * 1000)
        replica = await start("replica-a", cert_validity=60.0)
        await eventually(lambda: len(fake.seen("validatingwebhookconfigurations", "patch")) >= 4)
        # The fake records a patch as it arrives; the keeper counts the failure on the answer.
        await eventually(lambda: replica.managed.keeper.outcome.failures >= 4)
        assert bundle_pem(fake, "MutatingWebhookConfiguration")
        assert not bundle_pem(fake, "ValidatingWebhookConfiguration")
        lines = [r.getMessage() for r in caplog.records if "RBAC" in r.getMessage()]
        assert len(lines) == 1, lines
        assert "ValidatingWebhookConfiguration stszone" in lines[0]
        assert "ClusterRole stszone-certs" in lines[0]
        assert replica.managed.keeper.outcome.failures >= 4


async def test_the_flags_name_the_secret_the_lease_and_the_configurations(tmp_path: Path) -> None:
    """As a Helm release named otherwise runs it (charts/stszone passes the names of its own
    objects): the Secret and the Lease written, the configurations given the CA and the pair's
    names are the flags' ones; nothing is written under a default name."""
    name = "platform-stszone"
    args = build_parser().parse_args(
        [
            "serve",
            "--manage-certs",
            "--service", name,
            "--webhook-config-name", name,
            "--certs-secret", f"{name}-tls",
            "--certs-lease", f"{name}-certs",
        ]
    )  # fmt: skip
    given = settings_from(args, environ={})
    async with cluster(tmp_path, configs=()) as (fake, start):
        for kind in KINDS:
            config = configuration(kind)
            config["metadata"]["name"] = name
            fake.put(kind.lower() + "s", config)
        replica = await start(
            "replica-a",
            service=given.service,
            webhook_config_name=given.webhook_config_name,
            certs_secret=given.certs_secret,
            certs_lease=given.certs_lease,
        )
        await eventually(lambda: replica.managed.ready()[0])
        lease = stored(fake, "leases", f"{name}-certs", NS)
        assert lease is not None and lease["spec"]["holderIdentity"] == "replica-a"
        assert stored(fake, "leases", "stszone-certs", NS) is None
        assert stored(fake, "secrets", "stszone-tls", NS) is None
        assert stored(fake, "secrets", f"{name}-tls", NS) is not None

        def bundle(kind: str) -> bytes:
            config = stored(fake, kind.lower() + "s", name) or {}
            return base64.b64decode(config["webhooks"][0]["clientConfig"].get("caBundle", ""))

        await eventually(lambda: all(bundle(kind) for kind in KINDS))
        for kind in KINDS:
            served = await handshake(replica.port, bundle(kind), host=f"{name}.{NS}.svc")
            assert served == replica.managed.tls.serial


def _agent(replica: Replica) -> str:
    return f"stszone/0.1.0 ({replica.identity})"


def _contents(ca_pem: bytes, ca_key: bytes, cert: bytes, key: bytes) -> tlssecret.Contents:
    ca = tlssecret.Keyed(ca_pem, ca_key, x509.load_pem_x509_certificate(ca_pem))
    serving = tlssecret.Keyed(cert, key, x509.load_pem_x509_certificate(cert))
    return tlssecret.Contents(ca=ca, serving=serving, bundle=(ca.cert,))


def _with_bundle(config: dict[str, Any], ca_pem: bytes) -> dict[str, Any]:
    for hook in config["webhooks"]:
        hook["clientConfig"]["caBundle"] = base64.b64encode(ca_pem).decode()
    return config


async def test_rbac_refusing_the_lease_counts_as_a_rotation_failure(tmp_path: Path) -> None:
    """403 on the Lease: no replica can lead, so nobody renews the certificate. Each replica
    counts it in stszone_certificate_rotation_failures_total, which the docs give as the figure
    that says the certificate work keeps failing; leader stays 0."""
    async with cluster(tmp_path) as (fake, start):
        fake.inject("leases", "get", *[Fault.status(403)] * 1000)
        replica = await start("replica-a")
        await eventually(lambda: len(fake.seen("leases", "get")) >= 3)
        registry = CollectorRegistry()
        registry.register(replica.managed.collector)
        samples = {
            s.name: s.value
            for family in text_string_to_metric_families(generate_latest(registry).decode())
            for s in family.samples
        }
        assert samples["stszone_certificate_leader"] == 0
        assert samples["stszone_certificate_rotation_failures_total"] >= 2
        assert writes_by(fake) == {}
