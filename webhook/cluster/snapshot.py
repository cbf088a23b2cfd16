"""The view ``stszone rebalance`` plans from: one list of the live cluster, or a saved file.

The webhook's records are lean on purpose (see :mod:`webhook.model.state`), too lean to move
pods safely, so this lists full objects once -- nodes included, for their cordons, taints and
Ready condition -- and builds both the :class:`~webhook.model.store.Store` the rules read and
the :class:`~webhook.model.state.LiveState` from the same objects. There is no watch: it is a
one-shot command, and every step re-reads what it acts on (:mod:`webhook.cluster.rebalance`).
With ``namespace`` the namespaced collections are listed in that namespace only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from webhook.cluster.api import Api, ApiError
from webhook.cluster.clusterfile import flatten, read_documents, store_from_objects
from webhook.cluster.credentials import Credentials
from webhook.cluster.credsource import load_credentials
from webhook.cluster.resources import CLUSTER_SCOPED, Resource, resources
from webhook.config import Settings
from webhook.errors import BadObject, ConfigError
from webhook.model.state import LiveState, live_state
from webhook.model.store import Store
from webhook.model.tables import table_of

#: Items per list page: the API server's default chunk size for kubectl.
PAGE = 500


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The planning view: the rules' Store and the health the planner adds to it."""

    store: Store
    state: LiveState


def from_objects(
    docs: Iterable[Any],
    *,
    zones: tuple[str, ...] | None = None,
    source: str = "cluster file",
    namespaces_listed: bool = False,
) -> Snapshot:
    """The snapshot of raw API objects or lists of them; the state reads those the store
    does, so another group's look-alike (an ``example.io/v1`` Pod) decides neither."""
    items = list(flatten(list(docs)))
    store = store_from_objects(
        items, zones=zones, source=source, namespaces_listed=namespaces_listed
    )
    try:
        state = live_state(item for item in items if table_of(item) is not None)
    except BadObject as err:
        raise ConfigError(f"{source}: {err.message}") from None
    return Snapshot(store, state)


def from_file(path: Path, *, zones: tuple[str, ...] | None = None) -> Snapshot:
    """The snapshot of a saved ``kubectl get ... -o yaml`` list."""
    return from_objects(read_documents(path), zones=zones, source=str(path))


def _path(path: str, *, namespaced: bool, namespace: str | None) -> str:
    # /api/v1/pods -> /api/v1/namespaces/NS/pods: the same collection, one namespace of it.
    if namespace is None or not namespaced:
        return path
    head, _, plural = path.rpartition("/")
    return f"{head}/namespaces/{namespace}/{plural}"


async def list_collection(
    api: Api, path: str, *, label_selector: str = "", page: int = PAGE, optional: bool = False
) -> list[Mapping[str, Any]]:
    """Every item of one collection, page by page, each given its ``kind``; an ``optional``
    one the API server does not serve (its CRD is not installed) has none.

    A continue token outlives no etcd compaction (410 Expired): the collection is then listed
    again whole, in one answer, as client-go's pager does (``FullListIfExpired``)."""
    params = {"limit": str(page)}
    if label_selector:
        params["labelSelector"] = label_selector
    items: list[Mapping[str, Any]] = []
    while True:
        try:
            got = await api.get(path, params=params)
        except ApiError as err:
            if optional and err.status == 404:
                return []
            if err.status == 410 and "continue" in params:
                del params["continue"], params["limit"]
                items.clear()
                continue
            raise
        body = json.loads(got)
        items.extend(flatten(body))
        token = body.get("metadata", {}).get("continue") if isinstance(body, dict) else None
        if not token:
            return items
        params["continue"] = str(token)


async def list_cluster(
    settings: Settings, *, api: Api, namespace: str | None = None
) -> list[Mapping[str, Any]]:
    """Nodes, volumes, claims, StatefulSets, their pods and opted-in namespaces, as objects."""
    lists = [
        _list_resource(api, r, namespaced=r.table not in CLUSTER_SCOPED, namespace=namespace)
        for r in resources(settings)
    ]
    return [item for found in await asyncio.gather(*lists) for item in found]


async def _list_resource(
    api: Api, resource: Resource, *, namespaced: bool, namespace: str | None
) -> list[Mapping[str, Any]]:
    """Every item of one collection, at the first of its versions the API server serves."""
    for path in resource.paths:
        try:
            return await list_collection(
                api,
                _path(path, namespaced=namespaced, namespace=namespace),
                label_selector=resource.label_selector,
            )
        except ApiError as err:
            if not (resource.optional and err.status == 404):
                raise
    return []


async def live_snapshot(
    settings: Settings, *, namespace: str | None = None, credentials: Credentials | None = None
) -> Snapshot:
    """One list of the cluster; :class:`ConfigError` when it cannot be reached or read."""
    if credentials is None:
        credentials = await asyncio.to_thread(
            load_credentials, settings.kubeconfig, context=settings.context
        )
    async with Api(credentials, quiet=True) as api:
        try:
            items = await list_cluster(settings, api=api, namespace=namespace)
        except (ApiError, aiohttp.ClientError, OSError, ValueError) as err:
            raise ConfigError(f"cannot list the cluster via {credentials.source}: {err}") from err
    snapshot = from_objects(
        items, zones=settings.zones, source=credentials.source, namespaces_listed=True
    )
    snapshot.store.kruise_start_ordinal = settings.kruise_start_ordinal
    return snapshot
