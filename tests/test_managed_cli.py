"""``stszone serve --manage-certs``'s flags: what they parse to, what they refuse, what the
replica calls itself, and the settling time a validity gets (webhook/cli/managedcerts.py)."""

from __future__ import annotations

import argparse
import datetime as dt

import pytest

from webhook.cli import build_parser, managedcerts, settings_from
from webhook.config import YEAR, Settings
from webhook.errors import ConfigError
from webhook.install.rotation import Rotation


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("3m", 180.0),
        ("90d", 90 * 86400.0),
        ("365d", YEAR),
        ("12h", 43200.0),
        ("60s", 60.0),
        ("30s", 30.0),
        (" 1.5m ", 90.0),
    ],
)
def test_validity_takes_a_number_and_a_unit(text: str, seconds: float) -> None:
    assert managedcerts.validity(text) == seconds


@pytest.mark.parametrize(
    "text", ["29s", "29.9s", "0.4m", "3", "3y", "m", "-3m", "0m", "3 minutes", ""]
)
def test_validity_refuses_what_is_not_30_seconds_or_more(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="at least 30 seconds"):
        managedcerts.validity(text)


def test_flags_reach_the_settings() -> None:
    """Every flag lands in Settings; the defaults are Settings' own."""
    args = build_parser().parse_args(
        [
            "serve",
            "--manage-certs",
            "--certs-secret", "tls-x",
            "--cert-validity", "3m",
            "--service", "hooks",
            "--webhook-config-name", "hooks-e2e",
            "--certs-lease", "hooks-certs",
        ]
    )  # fmt: skip
    settings = settings_from(args, environ={})
    assert settings.manage_certs is True
    assert (settings.certs_secret, settings.cert_validity) == ("tls-x", 180.0)
    assert (settings.service, settings.webhook_config_name) == ("hooks", "hooks-e2e")
    assert settings.certs_lease == "hooks-certs"
    plain = settings_from(build_parser().parse_args(["serve"]), environ={})
    assert plain == Settings()
    assert (plain.manage_certs, plain.certs_secret, plain.cert_validity, plain.certs_lease) == (
        False,
        "stszone-tls",
        YEAR,
        "stszone-certs",
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"cert": "/tls/tls.crt", "key": "/tls/tls.key"}, "drop --cert/--key"),
        ({"offline": True}, "drop --offline/--cluster"),
        ({"cluster_file": "cluster.yaml"}, "drop --offline/--cluster"),
    ],
)
def test_flags_that_cannot_go_with_manage_certs(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        managedcerts.check(Settings(manage_certs=True, **changes))  # type: ignore[arg-type]
    managedcerts.check(Settings(**changes))  # type: ignore[arg-type]


def test_the_lease_holder_is_the_pod_then_the_host_and_process() -> None:
    """settings.identity, else $POD_NAME (the Deployment sets it), else hostname_pid."""
    assert (
        managedcerts.identity(Settings(identity="x"), environ={"POD_NAME": "stszone-7d-abc"}) == "x"
    )
    assert (
        managedcerts.identity(Settings(), environ={"POD_NAME": "stszone-7d-abc"})
        == "stszone-7d-abc"
    )
    host, _, pid = managedcerts.identity(Settings(), environ={}).rpartition("_")
    assert host and pid.isdigit()


@pytest.mark.parametrize(
    ("validity", "settle"),
    [(YEAR, 30.0), (180.0, 18.0), (60.0, 6.0), (30.0, 3.0), (600.0, 30.0)],
)
def test_the_settling_time_is_a_tenth_of_the_life_at_most_30s(
    validity: float, settle: float
) -> None:
    """A third of the pair's life always leaves room for two settling waits."""
    policy = managedcerts.policy(Settings(cert_validity=validity, namespace="ns"))
    assert policy.settle == dt.timedelta(seconds=settle)
    assert policy.ca_validity == dt.timedelta(seconds=3 * validity)
    assert policy.dns_names == (
        "stszone",
        "stszone.ns",
        "stszone.ns.svc",
        "stszone.ns.svc.cluster.local",
    )


def test_validity_refuses_a_life_whose_ca_would_end_after_the_year_9999() -> None:
    """The CA lives three times the pair: a leader asked for more than a date can hold would
    fail at every attempt to make it, and no replica would ever be ready."""
    for text in ("1000000d", "99999999999d", "9" * 400 + "d"):
        with pytest.raises(argparse.ArgumentTypeError, match="after the year 9999"):
            managedcerts.validity(text)
    now = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
    with pytest.raises(argparse.ArgumentTypeError, match="give at most 9"):
        managedcerts.validity("980000d", now=now)
    longest = managedcerts.validity("900000d", now=now)
    plan = Rotation(managedcerts.policy(Settings(cert_validity=longest)), name="t", namespace="n")
    step = plan.decide(None, configs=[], now=now)
    assert step.secret is not None and "9418-" in step.done
