"""``stszone serve``: assemble the view, certificates and app, then serve until SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from webhook.cluster.live import start_live
from webhook.cluster.view import offline_store, wants_live, zone_source
from webhook.config import Settings
from webhook.errors import ConfigError
from webhook.server import logs
from webhook.server.app import install_metrics, make_app
from webhook.server.metrics import store_caches
from webhook.server.runtime import Runtime
from webhook.server.serve import serve
from webhook.server.tls import CertReloader

log = logging.getLogger("stszone")


def _certificate(settings: Settings) -> tuple[str, str]:
    if settings.cert is not None and settings.key is not None:
        return str(settings.cert), str(settings.key)
    from webhook.install.certfiles import ensure_dev_certs

    dev = ensure_dev_certs(settings.certs_dir)
    verb = "created" if dev.created else "reusing"
    log.info(
        "%s development certificates in %s (CA %s; serving cert for localhost, 127.0.0.1)",
        verb,
        settings.certs_dir,
        dev.ca,
    )
    return str(dev.cert), str(dev.key)


async def _main(settings: Settings) -> None:
    cert, key = _certificate(settings)
    reloader = CertReloader(cert, key, interval=settings.cert_reload_interval)
    # Live: the listener opens at once and /readyz fails until every cache is listed.
    live = await start_live(settings) if wants_live(settings) else None
    store = live.store if live is not None else offline_store(settings)
    runtime = Runtime(store=store, defaults=settings.defaults(), settings=settings)
    runtime.jobs.append(reloader.run)
    if live is not None:
        runtime.attach(live.run, check=live.ready)  # logs the zone source once synced
    else:
        log.info("offline view; zone source: %s", zone_source(settings, runtime.store))
    install_metrics(
        runtime,
        caches=live.statuses if live is not None else store_caches(store, loaded_at=time.time()),
        certificate=lambda: reloader.not_after,
    )
    runtime.observers.append(logs.log_decision)
    await serve(make_app(runtime), ssl_context=reloader.context, settings=settings)


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop ``stszone serve --loop`` names; ConfigError when it cannot be had."""
    if name == "asyncio":
        return asyncio.new_event_loop
    try:
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
