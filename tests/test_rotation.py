"""The certificate planner (webhook/install/rotation.py) on paper: creation, reuse, renewal, the
CA rotation's order, and the Secrets it must leave alone (tests/certsim.py checks every write)."""

from __future__ import annotations

import base64
import copy
import datetime as dt
from typing import Any

import pytest
from cryptography import x509

from tests.certsim import CORRUPTIONS, NAMES, START, Paper, config, corrupted, issuer_of, policy
from webhook.install import cabundle, tlssecret
from webhook.install.certs import new_ca, new_serving
from webhook.install.issuing import authority, serving_pair
from webhook.install.rotation import Rotation


def _serials(paper: Paper) -> tuple[int, int]:
    """(CA serial, serving serial) of the Secret now."""
    assert paper.secret is not None
    contents = tlssecret.read(paper.secret)
    assert contents.ca is not None and contents.serving is not None
    return contents.ca.serial, contents.serving.serial


def _bundle_serials(config: dict[str, Any]) -> list[list[int]]:
    """Per webhook, the serials its caBundle holds."""
    return [
        [
            cert.serial_number
            for cert in x509.load_pem_x509_certificates(
                base64.b64decode(hook["clientConfig"]["caBundle"])
            )
        ]
        for hook in config["webhooks"]
    ]


def test_from_nothing_the_secret_is_created_then_both_bundles_get_its_ca() -> None:
    """No Secret, empty caBundles: a CA and a pair for every Service name, then the CA injected."""
    paper = Paper(policy())
    rotation = paper.rotation()
    first = rotation.decide(None, configs=paper.configs, now=paper.now)
    assert first.secret is not None and not first.configs
    assert "resourceVersion" not in first.secret["metadata"]  # a create
    assert first.secret["metadata"]["labels"][tlssecret.MANAGED_BY] == tlssecret.MANAGER
    assert first.secret["type"] == "kubernetes.io/tls"
    paper.apply(first)
    second = rotation.decide(paper.secret, configs=paper.configs, now=paper.now)
    assert second.secret is None and len(second.configs) == 2
    paper.apply(second)
    ca, _ = _serials(paper)
    assert all(_bundle_serials(c) == [[ca]] for c in paper.configs)
    contents = tlssecret.read(paper.secret or {})
    assert contents.serving is not None
    san = contents.serving.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert san.value.get_values_for_type(x509.DNSName) == list(NAMES)
    life = contents.serving.cert.not_valid_after_utc - paper.now
    assert dt.timedelta(seconds=179) < life <= dt.timedelta(seconds=180)
    ca_life = contents.ca.cert.not_valid_after_utc - paper.now  # type: ignore[union-attr]
    assert dt.timedelta(seconds=539) < ca_life <= dt.timedelta(seconds=540)
    third = rotation.decide(paper.secret, configs=paper.configs, now=paper.now)
    assert third.secret is None and not third.configs and not third.problem
    assert 100 < third.wait < 120  # the renewal, two thirds into the pair's life


def test_a_namespace_of_the_longest_valid_name_gets_a_ca() -> None:
    """A namespace name may have 63 characters; a certificate's common name at most 64, which
    cryptography enforces: the CA's name, which only says whose it is, is cut to fit."""
    longest = "n" * 63
    ca = authority(policy(), namespace=longest, now=START)
    (name,) = ca.cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    assert len(name.value) == 64 and f"stszone-ca {longest}".startswith(str(name.value))


def test_a_valid_secret_is_reused_by_a_new_leader() -> None:
    """A later leader (a fresh Rotation) finds everything in order and writes nothing."""
    paper = Paper(policy())
    paper.run(paper.rotation(), until=START + dt.timedelta(seconds=5))
    before = len(paper.writes)
    decision = paper.rotation().decide(paper.secret, configs=paper.configs, now=paper.now)
    assert decision.secret is None and not decision.configs and not decision.problem
    assert len(paper.writes) == before == 3  # created, then the two configurations


def test_the_serving_pair_is_renewed_two_thirds_in_from_the_same_ca() -> None:
    """At 2/3 of its life the pair is re-issued, by the same CA; the caBundle is not touched."""
    paper = Paper(policy())
    rotation = paper.rotation()
    paper.run(rotation, until=START + dt.timedelta(seconds=1))
    ca, serving = _serials(paper)
    contents = tlssecret.read(paper.secret or {})
    assert contents.serving is not None
    due = contents.serving.renew_at()
    paper.run(rotation, until=due - dt.timedelta(seconds=1))
    assert _serials(paper) == (ca, serving)
    paper.run(rotation, until=due + dt.timedelta(seconds=2))
    assert _serials(paper)[0] == ca and _serials(paper)[1] != serving
    assert [kind for _, kind, _ in paper.writes] == [
        "secret",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "secret",
    ]


def test_every_write_keeps_what_others_put_on_the_secret() -> None:
    """Labels, annotations, ownerReferences and finalizers someone else put on our Secret (a
    replicator, a backup tool) are in each of its writes, which replace the whole object; only
    stszone's label is set."""
    paper = Paper(policy())
    rotation = paper.rotation()
    paper.run(rotation, until=START + dt.timedelta(seconds=1))
    assert paper.secret is not None
    theirs: dict[str, Any] = {
        "annotations": {"replicator.example.io/replicate-to": "team-a"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Namespace", "name": "n", "uid": "1"}],
        "finalizers": ["backup.example.io/keep"],
    }
    paper.secret["metadata"].update(copy.deepcopy(theirs))
    paper.secret["metadata"]["labels"]["backup.example.io/include"] = "true"
    before = len(paper.writes_of("secret"))
    paper.run(rotation, until=START + dt.timedelta(minutes=7))  # renewals, a CA rotation
    written = paper.writes_of("secret")[before:]
    assert len(written) >= 5
    for secret in written:
        metadata = secret["metadata"]
        assert {key: metadata.get(key) for key in theirs} == theirs
        assert metadata["labels"] == {
            "backup.example.io/include": "true",
            tlssecret.MANAGED_BY: tlssecret.MANAGER,
        }


def test_the_ca_rotates_in_order_and_the_old_one_leaves_last() -> None:
    """Stage (bundle old+new), inject both, switch after settling, retire the old, inject."""
    paper = Paper(policy())
    rotation = paper.rotation()
    paper.run(rotation, until=START + dt.timedelta(seconds=1))
    old_ca, _ = _serials(paper)
    paper.run(rotation, until=START + dt.timedelta(minutes=7))
    new_ca_serial, _ = _serials(paper)
    assert new_ca_serial != old_ca
    steps = []
    for _, kind, obj in paper.writes:
        if kind == "secret":
            contents = tlssecret.read(obj)
            bundle = [c.serial_number for c in contents.bundle]
            issuer = issuer_of(obj)
            steps.append(("secret", issuer.serial_number if issuer else None, bundle))
        else:
            steps.append((kind, None, _bundle_serials(obj)[0]))
    # Every write of the rotation, from the staging of the new CA on, in order.
    start = next(i for i, s in enumerate(steps) if s[0] == "secret" and len(s[2]) == 2)
    assert steps[start : start + 7] == [
        ("secret", old_ca, [old_ca, new_ca_serial]),  # staged: trusted first
        ("MutatingWebhookConfiguration", None, [old_ca, new_ca_serial]),
        ("ValidatingWebhookConfiguration", None, [old_ca, new_ca_serial]),
        ("secret", new_ca_serial, [old_ca, new_ca_serial]),  # switched, old still trusted
        ("secret", new_ca_serial, [new_ca_serial]),  # retired from the Secret first
        ("MutatingWebhookConfiguration", None, [new_ca_serial]),
        ("ValidatingWebhookConfiguration", None, [new_ca_serial]),
    ]
    times = {i: at for i, (at, _, _) in enumerate(paper.writes)}
    assert times[start + 3] - times[start + 2] >= paper.plan.settle  # switch after settling
    assert times[start + 4] - times[start + 3] >= paper.plan.settle  # retire after settling


def test_a_long_run_keeps_both_rules_at_every_write() -> None:
    """An hour of 3-minute pairs: about 30 renewals, 10 CA rotations, every write checked."""
    paper = Paper(policy())
    paper.run(paper.rotation(), until=START + dt.timedelta(hours=1), tick=3.0)
    secrets = paper.writes_of("secret")
    cas = {tlssecret.read(s).ca.serial for s in secrets}  # type: ignore[union-attr]
    pairs = {tlssecret.read(s).serving.serial for s in secrets}  # type: ignore[union-attr]
    assert len(cas) >= 6 and len(pairs) >= 25
    contents = tlssecret.read(paper.secret or {})
    assert contents.serving is not None
    assert contents.serving.cert.not_valid_after_utc > paper.now


def test_a_restarted_leader_waits_out_the_settling_time_again() -> None:
    """A new leader switches to a staged CA only once it has itself seen it trusted for
    ``settle``: what the old leader saw is not known to it."""
    paper = Paper(policy())
    first = paper.rotation()
    injected = lambda p: len(p.writes_of("ValidatingWebhookConfiguration")) == 2  # noqa: E731
    paper.run(first, until=START + dt.timedelta(minutes=7), stop=injected)
    assert len(tlssecret.read(paper.secret or {}).bundle) == 2  # staged and injected
    paper.now += paper.plan.settle - dt.timedelta(seconds=1)  # the first term would switch soon
    second = paper.rotation()
    seen = paper.now
    decision = second.decide(paper.secret, configs=paper.configs, now=paper.now)
    assert decision.secret is None and 0 < decision.wait <= 18.0
    paper.now += dt.timedelta(seconds=17)
    assert second.decide(paper.secret, configs=paper.configs, now=paper.now).secret is None
    paper.run(
        second,
        until=paper.now + dt.timedelta(seconds=5),
        stop=lambda p: issuer_of(p.secret or {}) != issuer_of(paper.writes_of("secret")[-2]),
    )
    switched_at = paper.writes[-1][0]
    assert switched_at - seen >= paper.plan.settle


def test_a_secret_someone_else_made_is_left_alone() -> None:
    """Not labelled as stszone's: no write to it or to the configurations, one clear problem."""
    ca_pem, ca_key = new_ca()
    cert, key = new_serving(ca_cert_pem=ca_pem, ca_key_pem=ca_key, dns_names=NAMES)
    foreign = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "stszone-tls", "namespace": "certs-ns", "resourceVersion": "9"},
        "data": {
            "tls.crt": base64.b64encode(cert).decode(),
            "tls.key": base64.b64encode(key).decode(),
        },
    }
    paper = Paper(policy())
    decision = paper.rotation().decide(foreign, configs=paper.configs, now=paper.now)
    assert decision.secret is None and not decision.configs
    assert "was not created by stszone" in decision.problem
    assert "delete it" in decision.problem and "--manage-certs" in decision.problem


@pytest.mark.parametrize("broken", ["truncated", *CORRUPTIONS])
def test_a_broken_pair_in_our_secret_is_reissued_from_its_ca(broken: str) -> None:
    """Our Secret with a tls.crt truncated or with one corrupted byte: the pair reads as
    unusable, the CA beside it still reads, and a new pair comes from that CA."""
    paper = Paper(policy())
    rotation = paper.rotation()
    paper.run(rotation, until=START + dt.timedelta(seconds=1))
    ca, _ = _serials(paper)
    assert paper.secret is not None
    data = paper.secret["data"]
    if broken == "truncated":
        data["tls.crt"] = data["tls.crt"][:40]
    else:
        pem = corrupted(base64.b64decode(data["tls.crt"]), broken)
        data["tls.crt"] = base64.b64encode(pem).decode()
    contents = tlssecret.read(paper.secret)
    assert contents.serving is None and contents.ca is not None
    assert [p for p in contents.problems if "tls.crt" in p], contents.problems
    waiting = rotation.decide(paper.secret, configs=paper.configs, now=paper.now)
    assert waiting.secret is None  # the CA has not been seen trusted for ``settle`` yet
    paper.now += dt.timedelta(seconds=waiting.wait)
    decision = rotation.decide(paper.secret, configs=paper.configs, now=paper.now)
    assert decision.secret is not None
    paper.apply(decision)
    assert _serials(paper)[0] == ca
    assert "no usable serving pair" in decision.done


@pytest.mark.parametrize("also", ["ca-bundle.crt does not parse", "the CA is due for a successor"])
def test_a_broken_pair_is_reissued_before_any_other_write_of_the_secret(also: str) -> None:
    """A kubernetes.io/tls Secret must hold tls.crt and tls.key (422 otherwise), so with the pair
    broken, the bundle's repair or the staging of the next CA waits for the pair's re-issue,
    which carries the repaired bundle (tests/certsim.py checks each write holds a pair)."""
    paper = Paper(policy())
    rotation = paper.rotation()
    paper.run(rotation, until=START + dt.timedelta(seconds=1))
    ca, _ = _serials(paper)
    if also == "the CA is due for a successor":
        due = tlssecret.read(paper.secret or {}).ca.renew_at()  # type: ignore[union-attr]
        paper.run(rotation, until=due - dt.timedelta(seconds=3))
        paper.now = due + dt.timedelta(seconds=1)
    assert paper.secret is not None
    data = paper.secret["data"]
    data["tls.crt"] = data["tls.crt"][:40]
    if also == "ca-bundle.crt does not parse":
        data["ca-bundle.crt"] = base64.b64encode(b"garbage").decode()

    def repaired(paper: Paper) -> bool:
        return tlssecret.read(paper.secret or {}).serving is not None

    paper.run(rotation, until=paper.now + dt.timedelta(seconds=30), stop=repaired)
    assert repaired(paper) and _serials(paper)[0] == ca
    contents = tlssecret.read(paper.secret)
    assert [c.serial_number for c in contents.bundle] == [ca] and not contents.problems
    paper.run(rotation, until=paper.now + dt.timedelta(seconds=5))
    staged = also == "the CA is due for a successor"
    assert len(tlssecret.read(paper.secret).bundle) == (2 if staged else 1)


def test_a_secret_written_by_a_clock_an_hour_ahead_is_replaced() -> None:
    """Its CA and pair are not valid for another hour (API servers refuse them): a leader with
    the right clock makes a new CA, trusted first, and the Secret's pair from it."""
    paper = Paper(policy(validity=3 * 86400))
    paper.now = START + dt.timedelta(hours=1)
    paper.run(paper.rotation(), until=paper.now + dt.timedelta(seconds=1))
    paper.now = START
    paper.run(paper.rotation(), until=START + dt.timedelta(minutes=1))
    contents = tlssecret.read(paper.secret or {})
    assert contents.ca is not None and contents.serving is not None
    assert contents.ca.cert.not_valid_before_utc <= START
    assert contents.serving.cert.not_valid_before_utc <= START


def test_a_pair_from_a_clock_ahead_by_more_than_the_backdating_is_reissued_once() -> None:
    """notBefore is backdated (five minutes for long lifetimes), so a leader behind the pair's
    writer by 4 minutes keeps it. Behind by 7, it re-issues it, and the new pair starts in the
    past for the writer too: leading in turn, neither re-issues the other's pair again."""
    plan = policy(validity=3 * 86400)
    ca = authority(plan, namespace="certs-ns", now=START - dt.timedelta(hours=1))
    for ahead, reissues in ((4, 0), (7, 1)):
        skew = dt.timedelta(minutes=ahead)
        pair = serving_pair(plan, ca, now=START + skew)
        contents = tlssecret.Contents(ca=ca, serving=pair, bundle=(ca.cert,))
        paper = Paper(plan, trusted_since={ca.fingerprint: START - dt.timedelta(hours=1)})
        paper.secret = tlssecret.build(contents, name="stszone-tls", namespace="certs-ns")
        paper.configs = [config(c["kind"], ca.cert_pem) for c in paper.configs]
        for minute, clock in enumerate((dt.timedelta(0), skew) * 2):  # the two take turns
            paper.now = START + dt.timedelta(minutes=minute) + clock
            paper.run(paper.rotation(), until=paper.now + dt.timedelta(minutes=1))
        assert len(paper.writes_of("secret")) == reissues, ahead
        assert _serials(paper)[0] == ca.serial


def test_a_new_ca_is_trusted_before_it_serves_when_replicas_serve_another() -> None:
    """The Secret deleted while the configurations trust its CA: the new CA joins them first,
    and the new Secret is written only once that has settled (replicas keep the old pair)."""
    paper = Paper(policy())
    rotation = paper.rotation()
    paper.run(rotation, until=START + dt.timedelta(seconds=1))
    old_ca, _ = _serials(paper)
    paper.secret = None
    paper.run(paper.rotation(), until=paper.now + dt.timedelta(seconds=60))
    kinds = [kind for _, kind, _ in paper.writes[3:]]
    assert kinds[:3] == [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "secret",
    ]
    new_ca_serial, _ = _serials(paper)
    created = paper.writes_of("secret")[1]
    assert [c.serial_number for c in tlssecret.read(created).bundle] == [old_ca, new_ca_serial]
    # And the old CA is retired once the new pair has been served for the settling time.
    assert all(_bundle_serials(c) == [[new_ca_serial]] for c in paper.configs)


@pytest.mark.parametrize("drift", ["no caBundle", "a caBundle that does not parse"])
def test_configurations_that_drifted_get_the_bundle_back(drift: str) -> None:
    """Someone re-applies a configuration without caBundle, or with one that does not parse
    (it trusts nothing): it gets the Secret's CAs again."""
    paper = Paper(policy())
    rotation = paper.rotation()
    paper.run(rotation, until=START + dt.timedelta(seconds=1))
    bundle = b""
    if drift != "no caBundle":
        ca_pem = base64.b64decode((paper.secret or {})["data"]["ca.crt"])
        bundle = corrupted(ca_pem, "X.509 version 66")
    paper.configs[0] = config("MutatingWebhookConfiguration", bundle)
    decision = rotation.decide(paper.secret, configs=paper.configs, now=paper.now)
    assert [c["kind"] for c in decision.configs] == ["MutatingWebhookConfiguration"]
    ca, _ = _serials(paper)
    assert cabundle.holds_exactly(
        decision.configs[0], bundle=tlssecret.read(paper.secret or {}).bundle
    )
    assert _bundle_serials(decision.configs[0]) == [[ca]]


def test_a_missing_configuration_does_not_stop_the_secret() -> None:
    """With one configuration (the other missing), the Secret is still created and kept."""
    paper = Paper(policy())
    paper.configs = paper.configs[1:]
    paper.run(paper.rotation(), until=START + dt.timedelta(seconds=5))
    assert paper.secret is not None
    assert [kind for _, kind, _ in paper.writes] == ["secret", "ValidatingWebhookConfiguration"]


def test_planning_is_repeatable_for_the_same_objects() -> None:
    """A conflict (the write did not land) is followed by the same step, not a second CA."""
    paper = Paper(policy())
    rotation = Rotation(paper.plan, name="stszone-tls", namespace="certs-ns")
    first = rotation.decide(None, configs=paper.configs, now=paper.now)
    again = rotation.decide(None, configs=paper.configs, now=paper.now)
    assert first.secret is not None and again.secret is not None
    assert first.secret["data"]["ca.crt"] == again.secret["data"]["ca.crt"]


def test_a_foreign_secret_without_a_usable_pair_is_left_to_the_replicas_to_explain() -> None:
    """Not ours and unreadable: no write and no plan problem (each replica's readiness and its
    one log line say what is wrong and what to do)."""
    foreign = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "stszone-tls", "namespace": "certs-ns", "resourceVersion": "9"},
        "data": {"tls.crt": "bm90IGEgY2VydA=="},
    }
    paper = Paper(policy())
    decision = paper.rotation().decide(foreign, configs=paper.configs, now=paper.now)
    assert decision.secret is None and not decision.configs and not decision.problem
