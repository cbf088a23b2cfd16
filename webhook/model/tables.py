"""The store's tables: their names, which raw objects go to which, and their extractors. Pure.

One table per kind of record (:mod:`webhook.model.records`, :mod:`webhook.model.nodepools`);
the watches and the file loader both read a raw object into its table through here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, get_args

from webhook.model import setkinds
from webhook.model.extract import (
    claim_info,
    kruise_set_info,
    node_info,
    pod_info,
    statefulset_info,
    volume_info,
)
from webhook.model.namespaces import namespace_info
from webhook.model.nodepools import VERSIONS, nodepool_info, poolpod_info
from webhook.model.records import Info, StatefulSetInfo
from webhook.model.state import set_group

Table = Literal[
    "nodes",
    "volumes",
    "claims",
    "statefulsets",
    "pods",
    "namespaces",
    "nodepools",
    "poolpods",
    "kruisesets",
]
#: Every table, in the order the Literal names them.
TABLES: Final[tuple[Table, ...]] = get_args(Table)
#: The tables every request may read; another kind's tables are waited for only by the
#: requests about that kind, so a slow list of them never holds StatefulSets back.
CORE_TABLES: Final[tuple[Table, ...]] = TABLES[:6]
#: A Strimzi node pool's tables (:mod:`webhook.model.nodepools`).
POOL_TABLES: Final[tuple[Table, ...]] = ("nodepools", "poolpods")


#: Extractor per set table (:attr:`webhook.model.setkinds.SetKind.table`), typed as giving the
#: :class:`StatefulSetInfo` that :func:`set_info` returns; :data:`EXTRACTORS` takes its set
#: tables' from here, so a request and the view read a set alike.
SET_EXTRACTORS: Final[dict[Table, Callable[[Mapping[str, Any]], StatefulSetInfo]]] = {
    "statefulsets": statefulset_info,
    "kruisesets": kruise_set_info,
}

#: Extractor per table, for watchers and file loaders.
EXTRACTORS: Final[dict[Table, Callable[[Mapping[str, Any]], Info]]] = {
    "nodes": node_info,
    "volumes": volume_info,
    "claims": claim_info,
    "pods": pod_info,
    "namespaces": namespace_info,
    "nodepools": nodepool_info,
    "poolpods": poolpod_info,
    **SET_EXTRACTORS,
}


def set_info(obj: Mapping[str, Any], group: str) -> StatefulSetInfo:
    """The record of a raw set of ``group``, read as its kind's table reads it."""
    return SET_EXTRACTORS[setkinds.KINDS[group].table](obj)


#: API ``kind`` -> the store table its objects go to.
TABLE_OF_KIND: Final[dict[str, Table]] = {
    "Node": "nodes",
    "PartialObjectMetadata": "nodes",
    "PersistentVolume": "volumes",
    "PersistentVolumeClaim": "claims",
    "Pod": "pods",
    "Namespace": "namespaces",
    "KafkaNodePool": "nodepools",
}

#: API ``kind`` -> the apiVersions a saved object of it is read at; every other kind's is core
#: ``v1``, the one version of Node, PersistentVolume(Claim), Pod and Namespace.
API_VERSIONS: Final[dict[str, tuple[str, ...]]] = {
    "PartialObjectMetadata": ("meta.k8s.io/v1", "meta.k8s.io/v1beta1"),
    "KafkaNodePool": tuple(f"kafka.strimzi.io/{version}" for version in VERSIONS),
}


def table_of(obj: Mapping[str, Any]) -> Table | None:
    """The store table a raw object goes to, by kind and group: an object of another group
    (``example.io/v1`` Pods, ``apps.example.io/v1`` StatefulSets) goes to none, as the live
    view, which lists each kind at its own group, never holds it. An object with no
    ``apiVersion`` (a hand-written file) is read by its kind alone."""
    kind = str(obj.get("kind", ""))
    if kind == setkinds.KIND:
        group = set_group(obj)
        return None if group is None else setkinds.KINDS[group].table
    api_version = obj.get("apiVersion")
    if api_version is not None and api_version not in API_VERSIONS.get(kind, ("v1",)):
        return None
    return TABLE_OF_KIND.get(kind)
