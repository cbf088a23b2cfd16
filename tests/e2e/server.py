"""Run ``python -m webhook serve`` against the cluster, as the API server will reach it.

The process is started by :func:`tests.process.start_serve` (the one way tests start the real
process), logs to a file (attached to failing tests' reports), is Ready only once its caches
have synced, and is always stopped: SIGTERM first (the graceful path), SIGKILL after a bounded
wait.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.process import Webhook, start_serve

ROOT = Path(__file__).resolve().parents[2]
#: Seconds the server may take to list the cluster and become Ready.
READY_TIMEOUT = 120.0
#: Seconds the server may take to stop after SIGTERM (its drain is 20 s by default).
STOP_TIMEOUT = 40.0
#: Seconds between zone-risk refreshes: short, so a test sees a new set's gauges soon.
ZONE_RISK_INTERVAL = 2.0


def is_ip(host: str) -> bool:
    """True for an IPv4/IPv6 literal (the certificate then needs an IP SAN)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@contextmanager
def serving(
    *,
    host: str,
    bind: str,
    kubeconfig: str,
    certs: Path,
    zones: Sequence[str],
    work: Path,
) -> Iterator[Webhook]:
    """Start the webhook, wait until /readyz answers 200, yield it, then stop it.

    Its log is ``work/serve.log``.
    """
    server = start_serve(
        work,
        "--kubeconfig", kubeconfig,
        "--cert", str(certs / "tls.crt"),
        "--key", str(certs / "tls.key"),
        "--zones", ",".join(zones),
        "--log-level", "debug",
        "--zone-risk-interval", str(ZONE_RISK_INTERVAL),
        environ=os.environ,
        cwd=ROOT,
        bind=bind,
        host=host,
        ca=certs / "ca.crt",
        ready="/readyz",
        wait=READY_TIMEOUT,
    )  # fmt: skip
    try:
        yield server
    finally:
        server.stop(grace=STOP_TIMEOUT)
