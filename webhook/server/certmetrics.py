"""The serving certificate and ``--manage-certs`` as metrics, read at scrape time.

Exported::

    certificate_expiry_timestamp_seconds        gauge     notAfter of the serving certificate
    certificate_rotation_last_success_timestamp_seconds
                                                gauge     --manage-certs: when the leader last
                                                          found or left the Secret and both
                                                          caBundles in order
    certificate_rotation_failures_total         counter   --manage-certs: steps that failed,
                                                          the Lease's reads and writes too
    certificate_leader                          gauge     --manage-certs: 1 on the replica
                                                          holding the Lease

The expiry is read from a callable (the TLS context's); the rotation figures from the
certificate keeper's outcome, which :class:`RotationCollector` is registered with by
``stszone serve --manage-certs``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Final, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PREFIX: Final = "stszone"


class ExpiryCollector(Collector):
    """The expiry of the certificate new handshakes get; absent while none is served yet."""

    def __init__(self, certificate: Callable[[], dt.datetime | None]) -> None:
        self._certificate = certificate

    def collect(self) -> Iterator[Metric]:
        expiry = self._certificate()
        if expiry is not None:  # None: no serving certificate yet (--manage-certs, starting)
            yield GaugeMetricFamily(
                f"{PREFIX}_certificate_expiry_timestamp_seconds",
                "Expiry (notAfter, Unix time) of the certificate new TLS handshakes get.",
                value=expiry.timestamp(),
            )


class RotationLike(Protocol):
    """What the metrics read of the certificate work (``webhook.cluster.certkeeper.Outcome``)."""

    @property
    def last_success(self) -> float | None: ...
    @property
    def failures(self) -> int: ...


class RotationCollector(Collector):
    """The outcome of ``--manage-certs``, read at scrape time: register it on the registry."""

    def __init__(self, outcome: RotationLike, *, leading: Callable[[], bool]) -> None:
        self._outcome = outcome
        self._leading = leading

    def collect(self) -> Iterator[Metric]:
        outcome = self._outcome
        if outcome.last_success is not None:
            yield GaugeMetricFamily(
                f"{PREFIX}_certificate_rotation_last_success_timestamp_seconds",
                "Unix time the certificate leader last found, or left, the Secret and both "
                "caBundles in order.",
                value=outcome.last_success,
            )
        yield CounterMetricFamily(
            f"{PREFIX}_certificate_rotation_failures",
            "Certificate steps that failed: API errors other than conflicts (on the Secret, the "
            "webhook configurations or the Lease), a missing webhook configuration, a Secret "
            "stszone did not create.",
            value=outcome.failures,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_certificate_leader",
            "1 on the replica holding the certificate Lease (the one that writes), else 0.",
            value=1.0 if self._leading() else 0.0,
        )
