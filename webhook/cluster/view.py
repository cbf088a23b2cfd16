"""Choosing the cluster view: offline (``--zones`` / ``--cluster FILE``) or live (list+watch)."""

from __future__ import annotations

import os

from webhook.cluster.clusterfile import load_store
from webhook.config import Settings
from webhook.model.store import Store

#: Set by the kubelet in every pod whose service account token is mounted.
_IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"


def wants_live(settings: Settings) -> bool:
    """Live when a cluster is reachable (in a pod, --kubeconfig, $KUBECONFIG) and no --cluster."""
    if settings.offline or settings.cluster_file is not None:
        return False
    return bool(
        settings.kubeconfig or os.environ.get("KUBECONFIG") or os.environ.get(_IN_CLUSTER_ENV)
    )


def offline_store(settings: Settings) -> Store:
    """The offline view: the cluster file if given, else an empty store with ``--zones``."""
    if settings.cluster_file is not None:
        return load_store(settings.cluster_file, zones=settings.zones)
    return Store(zones=settings.zones)


def zone_source(settings: Settings, store: Store) -> str:
    """One line for the start-up log saying where new StatefulSets' zones come from."""
    if settings.zones:
        return f"--zones {','.join(settings.zones)} (discovery ignored)"
    found = store.discovered_zones()
    if found:
        return f"zones discovered on nodes: {','.join(found)}"
    return "none yet: no --zones and no node carries topology.kubernetes.io/zone"
