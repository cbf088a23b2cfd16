"""Frozen settings: :class:`Settings` for the server, :class:`Defaults` for the pure engine."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

#: Largest request body accepted: objects can be large (controller-runtime uses the same cap).
MAX_BODY: Final = 7 * 1024 * 1024
DEFAULT_NAMESPACE: Final = "stszone-system"
DEFAULT_SCHEDULER_NAME: Final = "stszone-scheduler"
#: The Service the API server calls, and the name of both webhook configurations.
SERVICE_NAME: Final = "stszone"
#: The Secret holding the serving pair (kubernetes.io/tls); cert-manager writes the same name.
SECRET_NAME: Final = "stszone-tls"
#: The Lease electing the one replica that writes certificates (``--manage-certs``).
CERTS_LEASE: Final = "stszone-certs"
YEAR: Final = 365 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Defaults:
    """Server-wide values the pure admission code needs."""

    #: Set on pods in scheduler mode when the StatefulSet names no scheduler.
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    #: Never intercepted, whatever the webhook configuration says.
    excluded_namespaces: frozenset[str] = frozenset({"kube-system", DEFAULT_NAMESPACE})
    #: Extender: a node condition of this type with status True marks its storage unhealthy.
    storage_unhealthy_condition: str | None = None
    #: Extender: a node label (key, value; None = any value) that marks its storage unhealthy.
    storage_unhealthy_label: tuple[str, str | None] | None = None
    #: OpenKruise Advanced StatefulSets are judged (``--no-kruise`` turns the kind off).
    kruise: bool = True


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything ``stszone serve`` is told on its command line."""

    #: The address to listen on; "": every address of the machine, IPv4 and IPv6.
    host: str = ""
    port: int = 8443
    #: Bind with SO_REUSEPORT, so that several processes listen on one address (the kernel
    #: spreads new connections over them; one that stops accepting on SIGTERM drops out).
    reuse_port: bool = False
    cert: Path | None = None
    key: Path | None = None
    certs_dir: Path = Path("certs")
    zones: tuple[str, ...] | None = None
    cluster_file: Path | None = None
    kubeconfig: str | None = None
    #: kubeconfig context to use (None: its current-context).
    context: str | None = None
    offline: bool = False
    #: Talk as the pod's service account even where the command would stay offline by itself
    #: (``kubectl stszone`` in a pod with no kubeconfig, as kubectl does).
    in_cluster: bool = False
    namespace: str = DEFAULT_NAMESPACE
    #: Namespaces the webhook configurations never send besides kube-system and ``namespace``
    #: (the chart's webhooks.excludeNamespaces): their sets and pods are not stszone's either.
    exclude_namespaces: tuple[str, ...] = ()
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    max_body: int = MAX_BODY
    log_format: Literal["text", "json"] = "text"
    log_level: str = "info"
    metrics_port: int | None = None
    #: The event loop: uvloop (libuv; its TLS and transports are faster) or asyncio's own.
    loop: Literal["uvloop", "asyncio"] = "uvloop"
    #: Strimzi KafkaNodePools are placed and guarded (their kinds are listed and watched).
    kafka_node_pools: bool = True
    #: /readyz fails when a cache has not re-synced for this long (seconds).
    max_unsynced: float = 120.0
    #: Seconds to finish in-flight requests after SIGTERM.
    shutdown_grace: float = 20.0
    #: Seconds /readyz reports not-ready before the listener closes on SIGTERM.
    shutdown_delay: float = 2.0
    #: After the listener closes, open connections are served until none has started a request
    #: for this many seconds: a request already on the wire is answered, not cut.
    shutdown_linger: float = 0.5
    #: Seconds between certificate file checks.
    cert_reload_interval: float = 2.0
    #: Seconds a connection may sit without a request in progress (idle, or trickling headers);
    #: above kube-apiserver's 90 s idle-connection timeout, so the client closes first.
    idle_timeout: float = 120.0
    #: Seconds a request body may take to arrive (kube-apiserver's webhook timeout is <= 30 s).
    body_timeout: float = 30.0
    storage_unhealthy_condition: str | None = None
    storage_unhealthy_label: str | None = None
    #: Seconds between refreshes of the zone-risk gauges (a background job, never per request).
    zone_risk_interval: float = 30.0
    #: Keep the serving pair and its CA in a Secret and the CA in both caBundles: created,
    #: renewed and rotated by the replica holding the Lease, served by every replica.
    manage_certs: bool = False
    #: The Secret of ``--manage-certs``, in ``namespace``.
    certs_secret: str = SECRET_NAME
    #: Seconds a serving pair made with ``--manage-certs`` is valid; renewed two thirds in.
    cert_validity: float = YEAR
    #: The Service the API server calls: the serving pair names its DNS names.
    service: str = SERVICE_NAME
    #: The name of both webhook configurations, whose caBundle ``--manage-certs`` keeps.
    webhook_config_name: str = SERVICE_NAME
    #: The Lease of ``--manage-certs``, in ``namespace``.
    certs_lease: str = CERTS_LEASE
    #: client-go's leader-election durations (seconds), with its defaults.
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    #: The Lease holder's identity (None: $POD_NAME, else hostname_pid).
    identity: str | None = None
    #: OpenKruise Advanced StatefulSets: watched (where their CRD is served) and judged.
    kruise: bool = True
    #: kruise-manager runs with its StatefulSetStartOrdinal gate: ``spec.ordinals.start`` counts.
    kruise_start_ordinal: bool = False

    def defaults(self) -> Defaults:
        """The pure engine's view of these settings."""
        return Defaults(
            scheduler_name=self.scheduler_name,
            excluded_namespaces=frozenset(
                {"kube-system", self.namespace, *self.exclude_namespaces}
            ),
            storage_unhealthy_condition=self.storage_unhealthy_condition or None,
            storage_unhealthy_label=(
                split_label_rule(self.storage_unhealthy_label)
                if self.storage_unhealthy_label
                else None
            ),
            kruise=self.kruise,
        )


def split_label_rule(text: str) -> tuple[str, str | None]:
    """``"KEY=VALUE"`` -> ``(KEY, VALUE)``; ``"KEY"`` -> ``(KEY, None)`` (any value matches)."""
    key, sep, value = text.partition("=")
    return key.strip(), value.strip() if sep else None
