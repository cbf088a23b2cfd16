"""Choosing the cluster view: offline (``--zones`` / ``--cluster FILE``) or live (list+watch)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from webhook.cluster.clusterfile import load_store
from webhook.cluster.credsource import IN_CLUSTER_ENV, SERVICE_ACCOUNT, uses_service_account
from webhook.cluster.kubeconfig import KUBECONFIG_ENV
from webhook.config import Settings
from webhook.model.store import Store


class ViewChoice(NamedTuple):
    """Which view a command uses, why, and how to ask for the other one (one log line)."""

    live: bool
    why: str
    other: str

    def describe(self) -> str:
        kind = "live (list+watch of the cluster)" if self.live else "offline (no cluster contacted)"
        return f"cluster view: {kind}, because {self.why}; {self.other}"


def choose_view(
    settings: Settings,
    *,
    environ: Mapping[str, str] = os.environ,
    service_account: Path = SERVICE_ACCOUNT,
) -> ViewChoice:
    """Live when a cluster is named (--kubeconfig, --context, a pod's service account,
    $KUBECONFIG) and
    neither --offline nor --cluster says otherwise; the credentials are tried in that order too
    (:func:`~webhook.cluster.credsource.load_credentials`)."""
    go_offline = "to serve offline instead, add --offline (or --cluster FILE)"
    go_live = (
        "to go live instead, drop it and give --kubeconfig PATH (or set $KUBECONFIG, or run in "
        "a pod)"
    )
    if settings.cluster_file is not None:
        return ViewChoice(False, f"--cluster {settings.cluster_file} was given", go_live)
    if settings.offline:
        return ViewChoice(False, "--offline was given", go_live)
    if settings.kubeconfig:
        return ViewChoice(True, f"--kubeconfig {settings.kubeconfig} was given", go_offline)
    if settings.context:
        return ViewChoice(True, f"--context {settings.context} was given", go_offline)
    if uses_service_account(environ, service_account):
        why = f"${IN_CLUSTER_ENV} is set (in a pod: its service account)"
        return ViewChoice(True, why, go_offline)
    if environ.get(KUBECONFIG_ENV):
        return ViewChoice(True, f"${KUBECONFIG_ENV} is {environ[KUBECONFIG_ENV]}", go_offline)
    return ViewChoice(
        False,
        "no --kubeconfig, no $KUBECONFIG and not in a pod",
        "to go live instead, give --kubeconfig PATH",
    )


def offline_store(settings: Settings) -> Store:
    """The offline view: the cluster file if given, else an empty store with ``--zones``."""
    if settings.cluster_file is not None:
        store = load_store(settings.cluster_file, zones=settings.zones)
    else:
        store = Store(zones=settings.zones)
    store.kruise_start_ordinal = settings.kruise_start_ordinal
    return store


def zone_source(settings: Settings, store: Store) -> str:
    """One line for the start-up log saying where new StatefulSets' zones come from."""
    if settings.zones:
        return f"--zones {','.join(settings.zones)} (discovery ignored)"
    found = store.discovered_zones()
    if found:
        return f"zones discovered on nodes: {','.join(found)}"
    return "none yet: no --zones and no node carries topology.kubernetes.io/zone"
