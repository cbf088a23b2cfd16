"""``stszone serve``'s Event recorder: the runtime's outbox, the job that writes it, its metrics.

The handlers post the notices of each decision to ``runtime.outbox`` (never for a dry run); the
job attached here drains it through a :class:`~webhook.cluster.correlator.Correlator` and writes
``events.k8s.io/v1`` Events with its own API session (``reportingInstance``: this replica). With
no cluster (``--offline``, ``--cluster FILE``) the Events are log lines instead.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from prometheus_client import CollectorRegistry

from webhook import __version__
from webhook.cli.managedcerts import POD_NAME_ENV
from webhook.cluster.api import Api
from webhook.cluster.correlator import Correlator
from webhook.cluster.credentials import Credentials
from webhook.cluster.events import ApiSink, EventWriter, LogSink, Sink
from webhook.config import Settings
from webhook.server.eventmetrics import EventCollector
from webhook.server.runtime import Runtime


def instance(settings: Settings, *, environ: Mapping[str, str] = os.environ) -> str:
    """``reportingInstance``: ``settings.identity`` when set, else the pod's name ($POD_NAME),
    else the host name."""
    return settings.identity or environ.get(POD_NAME_ENV) or socket.gethostname()


def attach_recorder(
    runtime: Runtime,
    *,
    credentials: Credentials | None,
    registry: CollectorRegistry | None = None,
    environ: Mapping[str, str] = os.environ,
) -> EventWriter:
    """Attach the job writing ``runtime.outbox`` as Events (to the cluster of ``credentials``,
    or to the log when None) and register its figures on ``registry``; the writer."""
    reporter = instance(runtime.settings, environ=environ)
    api: Api | None = None
    sink: Sink = LogSink()
    if credentials is not None:
        api = Api(credentials, user_agent=f"stszone/{__version__} ({reporter}) events")
        sink = ApiSink(api)
    writer = EventWriter(runtime.outbox, sink=sink, correlator=Correlator(instance=reporter))

    async def record_events() -> None:
        try:
            await writer.run()
        finally:
            if api is not None:
                await api.close()

    runtime.attach(record_events)
    if registry is not None:
        registry.register(EventCollector(writer.stats))
    return writer
