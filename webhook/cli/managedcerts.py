"""``stszone serve --manage-certs``: its flags, and the pieces it plugs into the server.

Every replica watches the Secret and serves its pair (:class:`~webhook.cluster.secretwatch.
SecretWatch` into :class:`~webhook.server.tls.TlsContext`); every replica campaigns for the
Lease (:class:`~webhook.cluster.lease.Elector`), and the one holding it runs the planner of
:mod:`webhook.install.rotation` through :class:`~webhook.cluster.certkeeper.Keeper`. Until the
Secret holds a usable pair the listener serves a throw-away placeholder and ``/readyz`` says why
it is not ready; the kubelet's probes (which verify nothing) still get answers, so a replica
waiting for its first certificate is not restarted.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import os
import re
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from webhook import __version__
from webhook.cli.options import DEFAULTS
from webhook.cluster.api import Api
from webhook.cluster.certkeeper import Decide, Keeper
from webhook.cluster.credsource import load_credentials
from webhook.cluster.lease import Elector, Timing
from webhook.cluster.secretwatch import SecretWatch
from webhook.config import Settings
from webhook.errors import ConfigError
from webhook.install import tlssecret
from webhook.install.certs import LAST, new_ca, service_dns_names
from webhook.install.issuing import CA_LIFETIMES, Policy
from webhook.install.rotation import Rotation
from webhook.server.certmetrics import RotationCollector
from webhook.server.runtime import Check, Runtime
from webhook.server.tls import TlsContext

log = logging.getLogger("stszone.certs")

_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
#: Shortest --cert-validity (tests use it). The settling time is a tenth of it, and must
#: outlast a watch event's way to every API server and replica on a busy machine: 3 s.
MIN_VALIDITY: Final = 30.0
#: Longest wait for a change to reach every API server and replica (see rotation.py).
MAX_SETTLE: Final = 30.0
POD_NAME_ENV: Final = "POD_NAME"


def validity(text: str, *, now: dt.datetime | None = None) -> float:
    """An argparse type: ``30s``, ``12h``, ``90d``, ``365d`` -> seconds (at least
    ``MIN_VALIDITY``, and short enough that a CA made ``now`` ends by the year 9999)."""
    match = _DURATION.match(text)
    seconds = float(match[1]) * _UNITS[match[2]] if match else 0.0
    if seconds < MIN_VALIDITY:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a validity of at least {MIN_VALIDITY:g} seconds: a number and a "
            "unit, s, m, h or d (e.g. 30s for tests, 90d, 365d)"
        )
    # The CA lives CA_LIFETIMES times the pair: a date past 9999 cannot be written in a
    # certificate (nor held by a datetime), so the leader could never make one.
    most = (LAST - (now or dt.datetime.now(dt.UTC))).total_seconds() / CA_LIFETIMES
    if seconds > most:
        raise argparse.ArgumentTypeError(
            f"{text!r} is too long: the CA lives {CA_LIFETIMES} times as long and would end "
            f"after the year 9999; give at most {int(most // 86400)}d"
        )
    return seconds


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The ``--manage-certs`` flags of ``stszone serve``."""
    group = parser.add_argument_group("self-managed certificates")
    group.add_argument(
        "--manage-certs",
        action="store_true",
        default=None,
        help="keep the serving pair and its CA in a Secret, and the CA in the caBundle of both "
        "webhook configurations: created, renewed at 2/3 of its life and rotated by the replica "
        "holding the Lease, served by every replica (needs a cluster; not with --cert/--key)",
    )
    group.add_argument(
        "--certs-secret",
        metavar="NAME",
        help=f"the Secret in stszone's namespace (default: {DEFAULTS.certs_secret})",
    )
    group.add_argument(
        "--cert-validity",
        type=validity,
        metavar="DURATION",
        help="lifetime of a serving pair, at least 30s, e.g. 90d (30s for tests); the CA lives "
        "three times as long (default: 365d)",
    )
    group.add_argument(
        "--service",
        metavar="NAME",
        help=f"the Service the API server calls; the pair names its DNS names "
        f"(default: {DEFAULTS.service})",
    )
    group.add_argument(
        "--webhook-config-name",
        metavar="NAME",
        help="the name of both webhook configurations whose caBundle is kept "
        f"(default: {DEFAULTS.webhook_config_name})",
    )
    group.add_argument(
        "--certs-lease",
        metavar="NAME",
        help="the Lease in stszone's namespace electing the one replica that writes "
        f"(default: {DEFAULTS.certs_lease})",
    )


def check(settings: Settings) -> None:
    """Refuse flags that cannot go with ``--manage-certs``."""
    if not settings.manage_certs:
        return
    if settings.cert is not None:
        raise ConfigError(
            "--manage-certs makes its own certificates; drop --cert/--key, or drop "
            "--manage-certs to serve those files"
        )
    if settings.offline or settings.cluster_file is not None:
        raise ConfigError(
            "--manage-certs keeps its certificates in the cluster; drop --offline/--cluster, "
            "or drop --manage-certs"
        )


def identity(settings: Settings, *, environ: Mapping[str, str] = os.environ) -> str:
    """The Lease holder: ``settings.identity`` when set, else the pod's name ($POD_NAME), else
    hostname and pid."""
    return settings.identity or environ.get(POD_NAME_ENV) or f"{socket.gethostname()}_{os.getpid()}"


def policy(settings: Settings) -> Policy:
    """The certificates ``settings`` ask for."""
    lifetime = dt.timedelta(seconds=settings.cert_validity)
    return Policy(
        validity=lifetime,
        dns_names=tuple(service_dns_names(settings.service, settings.namespace)),
        # Short validities (tests) get a tenth of their life, so a rotation fits in a third.
        settle=min(dt.timedelta(seconds=MAX_SETTLE), lifetime / 10),
    )


class Managed:
    """The TLS context, the jobs and the readiness check of ``--manage-certs``."""

    def __init__(
        self,
        settings: Settings,
        *,
        api: Api,
        holder: str,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        where = f"Secret {settings.namespace}/{settings.certs_secret}"
        cert_pem, key_pem = new_ca(common_name="stszone placeholder", lifetime=dt.timedelta(days=1))
        self.tls = TlsContext(cert_pem, key_pem=key_pem, source=where, placeholder=True)
        self.tls.waiting = f"{where} not read yet"
        self.watch = SecretWatch(
            api=api,
            namespace=settings.namespace,
            name=settings.certs_secret,
            on_change=self._serve,
            role=settings.certs_lease,  # both installs name the Role like the Lease
        )
        self.elector = Elector(
            api=api,
            namespace=settings.namespace,
            name=settings.certs_lease,
            identity=holder,
            timing=Timing(settings.lease_duration, settings.renew_deadline, settings.retry_period),
        )
        wanted = policy(settings)

        def planner() -> Decide:
            rotation = Rotation(wanted, name=settings.certs_secret, namespace=settings.namespace)
            return rotation.decide

        self.keeper = Keeper(
            api=api,
            secrets=self.watch,
            config_name=settings.webhook_config_name,
            planner=planner,
            leading=lambda: self.elector.leading,
            resync=wanted.settle.total_seconds(),
            retry=settings.retry_period,
            wall=wall,
        )
        self.api = api
        self.collector = RotationCollector(_Rotation(self), leading=lambda: self.elector.leading)

    def _serve(self, secret: dict[str, Any] | None) -> None:
        where = self.tls.source
        if secret is None:
            if self.tls.placeholder:
                self.tls.waiting = f"{where} does not exist yet (the Lease holder creates it)"
            else:
                log.warning("%s was deleted; still serving serial %x", where, self.tls.serial)
            return
        contents = tlssecret.read(secret)
        if contents.serving is None:
            reason = "; ".join(contents.problems) or "it holds no tls.crt/tls.key"
            if tlssecret.is_managed(secret):
                what = "the Lease holder replaces it"
            else:
                what = (
                    f"stszone did not create it (no label {tlssecret.MANAGED_BY}="
                    f"{tlssecret.MANAGER}) and will not overwrite it: fix it, or delete it so "
                    "that stszone creates its own"
                )
            self.tls.reject(f"holds no usable serving pair ({reason}); {what}", source=where)
            return
        self.tls.install(contents.serving.cert_pem, key_pem=contents.serving.key_pem, source=where)

    def ready(self) -> tuple[bool, str]:
        """Ready once a real pair is served, and while the Secret's watch keeps working."""
        ok, detail = self.tls.ready()
        failing = self.watch.unsynced_for()
        if ok and failing > self.settings.max_unsynced:
            return False, (
                f"watch of {self.tls.source} failing for {failing:.0f}s (over --max-unsynced "
                f"{self.settings.max_unsynced:g}s): {self.watch.last_error}"
            )
        return ok, detail

    async def campaign(self) -> None:
        """The Lease job: lead while holding it; the API session closes with it."""
        try:
            await self.elector.run(self.keeper.lead)
        finally:
            await self.api.close()

    def attach(self, runtime: Runtime) -> None:
        """The Secret's watch (with the readiness check) and the campaign, as jobs."""
        ready: Check = self.ready
        runtime.attach(self.watch.run, check=ready)
        runtime.attach(self.campaign)


class _Rotation:
    """The certificate work's figures: the keeper's, and the Lease's failures among them (a
    Lease nobody can take is certificate work that never runs)."""

    def __init__(self, managed: Managed) -> None:
        self._managed = managed

    @property
    def last_success(self) -> float | None:
        return self._managed.keeper.outcome.last_success

    @property
    def failures(self) -> int:
        return self._managed.keeper.outcome.failures + self._managed.elector.failures


async def start(
    settings: Settings,
    *,
    load: Callable[..., Any] = load_credentials,
    wall: Callable[[], float] = time.time,
) -> Managed:
    """Credentials (off the loop: an exec plugin may run), then the pieces; ``wall`` is the
    planner's wall clock (certificates' dates; its waits run on the monotonic clock)."""
    credentials = await asyncio.to_thread(load, settings.kubeconfig, context=settings.context)
    holder = identity(settings)
    api = Api(credentials, user_agent=f"stszone/{__version__} ({holder})")
    log.info(
        "self-managed certificates: Secret %s/%s, Lease %s as %s, webhook configurations %s",
        settings.namespace,
        settings.certs_secret,
        settings.certs_lease,
        holder,
        settings.webhook_config_name,
    )
    return Managed(settings, api=api, holder=holder, wall=wall)
