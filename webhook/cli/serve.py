"""``stszone serve``: assemble the view, certificates and app, then serve until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from webhook.cli import managedcerts
from webhook.cli.options import (
    DEFAULTS,
    add_own_namespace_flag,
    add_view_flags,
    command_parser,
    port,
    seconds,
    settings_from,
)
from webhook.cli.recorder import attach_recorder
from webhook.cluster.live import start_live
from webhook.cluster.view import choose_view, offline_store, zone_source
from webhook.config import Settings, split_label_rule
from webhook.errors import ConfigError
from webhook.install.certfiles import ensure_dev_certs
from webhook.model.names import is_dns_label, is_label_value, is_qualified_name
from webhook.server import logs
from webhook.server.app import install_metrics
from webhook.server.cachemetrics import store_caches
from webhook.server.listeners import bind_error, is_bind_error
from webhook.server.runtime import Runtime
from webhook.server.serve import serve
from webhook.server.tls import CertReloader, TlsContext

log = logging.getLogger("stszone")

HELP = "run the HTTPS admission webhook"
EXAMPLES = """\
examples:
  stszone serve --offline --zones a,b,c            offline, dev certificates under certs/
  stszone serve --cluster cluster.yaml             offline view from a saved cluster
  stszone serve --kubeconfig ~/.kube/config        live view (list+watch) of a cluster
  stszone serve --cert /tls/tls.crt --key /tls/tls.key --port 8443   in a pod
  stszone serve --manage-certs --port 8443         in a pod: its own CA and pair, rotated
  stszone serve --offline --zones a,b,c --zone-risk-interval 60   gauges refreshed each minute
"""


def _condition_type(text: str) -> str:
    # Condition types are qualified names ("StorageReady", "example.io/DiskHealthy").
    if not is_qualified_name(text.strip()):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a node condition type; e.g. --storage-unhealthy-condition "
            "StorageUnhealthy"
        )
    return text.strip()


def _namespace_name(text: str) -> str:
    if not is_dns_label(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a namespace name; e.g. monitoring")
    return text


def _label_rule(text: str) -> str:
    key, value = split_label_rule(text)
    if not is_qualified_name(key) or (
        value is not None and value != "" and not is_label_value(value)
    ):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not KEY or KEY=VALUE of a node label; e.g. --storage-unhealthy-label "
            "storage.example.io/unhealthy=true"
        )
    return text


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """The ``serve`` sub-parser."""
    parser = command_parser(
        commands,
        "serve",
        help=HELP,
        description=(
            "Run the admission webhook (mutate, validate, extender, healthz, readyz, "
            "metrics) over HTTPS."
        ),
        epilog=EXAMPLES,
        run=run,
    )
    parser.add_argument(
        "--host", help="address to listen on (default: every address, IPv4 and IPv6)"
    )
    parser.add_argument(
        "--port",
        type=functools.partial(port, any_free=True),
        help=f"port, 0 for one the kernel picks, named in the log (default: {DEFAULTS.port})",
    )
    parser.add_argument(
        "--reuse-port",
        action="store_true",
        default=None,
        help="bind with SO_REUSEPORT so that several stszone processes share --host:--port; the "
        "kernel spreads new connections over them, and one stopping on SIGTERM drops out; "
        "each opens its listener only once Ready, so probes of that port fail until then",
    )
    parser.add_argument("--cert", type=Path, help="serving certificate (PEM); with --key")
    parser.add_argument("--key", type=Path, help="serving key (PEM); with --cert")
    parser.add_argument(
        "--certs-dir",
        type=Path,
        help="where development certificates are created when --cert/--key are not given "
        f"(default: {DEFAULTS.certs_dir}/)",
    )
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        help=f"one line per record, as text or JSON (default: {DEFAULTS.log_format})",
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help=f"least severe level logged; debug logs each decision (default: {DEFAULTS.log_level})",
    )
    parser.add_argument(
        "--metrics-port",
        # No 0 here: nothing would say which port the kernel gave /metrics.
        type=port,
        help="serve /metrics on this port too (default: same port)",
    )
    parser.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        help=f"event loop: uvloop (libuv, faster TLS and transports) or asyncio's own "
        f"(default: {DEFAULTS.loop})",
    )
    parser.add_argument(
        "--kafka-node-pools",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="place and guard Strimzi KafkaNodePools (watched only where their CRD is served; "
        "default: on)",
    )
    parser.add_argument(
        "--max-unsynced",
        type=float,
        metavar="SECONDS",
        help="readiness fails when a cache cannot re-sync for this long "
        f"(default: {DEFAULTS.max_unsynced:g})",
    )
    parser.add_argument(
        "--shutdown-grace",
        type=float,
        metavar="SECONDS",
        help="time to finish in-flight requests after SIGTERM "
        f"(default: {DEFAULTS.shutdown_grace:g})",
    )
    parser.add_argument(
        "--zone-risk-interval",
        type=functools.partial(seconds, finite=True),
        metavar="SECONDS",
        help="time between refreshes of the zone-risk gauges, a background job "
        f"(default: {DEFAULTS.zone_risk_interval:g})",
    )
    parser.add_argument(
        "--storage-unhealthy-condition",
        metavar="TYPE",
        type=_condition_type,
        help="node condition type whose status True marks its storage unhealthy (extender "
        "filter); the live view keeps it from the Nodes it lists, whatever nodeCacheCapable",
    )
    parser.add_argument(
        "--storage-unhealthy-label",
        metavar="KEY[=VALUE]",
        type=_label_rule,
        help="node label that marks its storage unhealthy (extender filter); KEY alone matches "
        "any value; works with nodeCacheCapable true and false",
    )
    add_view_flags(parser)
    add_own_namespace_flag(parser, "--namespace")
    parser.add_argument(
        "--exclude-namespace",
        dest="exclude_namespaces",
        action="append",
        type=_namespace_name,
        metavar="NAMESPACE",
        help="a namespace the webhook configurations never send (repeat for more), left alone "
        "like kube-system: not placed, guarded, filtered by the extender or counted in the "
        "zone-risk gauges",
    )
    managedcerts.add_flags(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """``stszone serve``."""
    return run_serve(settings_from(args))


def _certificate(settings: Settings) -> tuple[str, str, bool]:
    """(cert, key, whether --cert and --key named them)."""
    if settings.cert is not None and settings.key is not None:
        return str(settings.cert), str(settings.key), True
    dev = ensure_dev_certs(settings.certs_dir)
    verb = "created" if dev.created else "reusing"
    log.info(
        "%s development certificates in %s (CA %s; serving cert for localhost, 127.0.0.1)",
        verb,
        settings.certs_dir,
        dev.ca,
    )
    return str(dev.cert), str(dev.key), False


async def _main(settings: Settings) -> None:
    managedcerts.check(settings)
    managed = await managedcerts.start(settings) if settings.manage_certs else None
    tls: TlsContext
    if managed is not None:
        tls = managed.tls
    else:
        cert, key, flags = _certificate(settings)
        tls = reloader = CertReloader(
            cert, key, interval=settings.cert_reload_interval, flags=flags
        )
    choice = choose_view(settings)
    log.info("%s", choice.describe())
    # Live: the listener opens at once and /readyz fails until every cache is listed.
    live = await start_live(settings) if choice.live else None
    store = live.store if live is not None else offline_store(settings)
    runtime = Runtime(store=store, defaults=settings.defaults(), settings=settings)
    if managed is not None:
        managed.attach(runtime)  # the Secret's watch, its readiness, the Lease campaign
    else:
        runtime.attach(reloader.run)
    if live is not None:
        runtime.attach(live.run, check=live.ready)  # logs the zone source once synced
    else:
        log.info("zone source: %s", zone_source(settings, runtime.store))
    metrics = install_metrics(
        runtime,
        caches=live.statuses if live is not None else store_caches(store, loaded_at=time.time()),
        certificate=tls.expiry,
    )
    if managed is not None:
        metrics.registry.register(managed.collector)
    # Notices posted to runtime.outbox become Events (log lines without a cluster).
    credentials = live.credentials if live is not None else None
    attach_recorder(runtime, credentials=credentials, registry=metrics.registry)
    if logs.decisions_logged():  # --log-level debug; the level is set once, at start-up
        runtime.observers.append(logs.log_decision)
    # The one freeze: what start-up built (modules, classes, the runtime; an offline view) lives as
    # long as the process, so it goes into the permanent generation before any list begins and
    # no full collection walks it again. Unfrozen, each of the full collections a big first
    # list sets off (about 30 while 300k objects are listed) walks all of it, a stop of the
    # loop of about 30 ms. The view's records are not tracked at all (records.py): once the
    # lists are in, the collector holds some 1,300 objects more than it froze here.
    gc.collect()
    gc.freeze()
    try:
        await serve(runtime, ssl_context=tls.context, settings=settings)
    except OSError as err:
        if not is_bind_error(err):
            raise
        # The listener's bind: the one OSError of serve() that is the user's to fix.
        raise bind_error(
            err, host=settings.host, port=settings.port, flag="--port", what="the webhook"
        ) from None


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop ``stszone serve --loop`` names; ConfigError when it cannot be had."""
    if name == "asyncio":
        return asyncio.new_event_loop
    try:
        # Imported here, not at the top: uvloop is not installed where it has no wheel (Windows).
        import uvloop
    except ImportError:
        raise ConfigError(
            "--loop uvloop: uvloop is not installed (it is a dependency on Linux and macOS); "
            "pip install uvloop, or run with --loop asyncio"
        ) from None
    return uvloop.new_event_loop


def run_serve(settings: Settings) -> int:
    """Run the webhook until SIGTERM/SIGINT; exit status 0 after a graceful stop."""
    logs.setup(fmt=settings.log_format, level=settings.log_level)
    factory = loop_factory(settings.loop)
    log.info("event loop: %s", settings.loop)
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(_main(settings))
    return 0
