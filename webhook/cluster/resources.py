"""What the live view mirrors: one API collection per store table, asked for as little as possible.

* nodes -- full objects: besides the zone and node-ordinal labels, the guard reads whether a
  node is Ready (``status.conditions``, the not-ready and unreachable taints in ``spec``), and
  the extender the condition ``--storage-unhealthy-condition`` names. A full Node (images,
  addresses) is ten times larger than its metadata, but the list decoder steps over all but
  those fields (:mod:`webhook.cluster.pages`), and a record keeps the labels and one flag.
* persistentvolumes, persistentvolumeclaims, statefulsets -- full objects: the fields we keep
  (``spec.nodeAffinity``, ``spec.volumeName``, the pod template) are not metadata.
* pods -- only StatefulSet pods, by the server-side selector ``statefulset.kubernetes.io/pod-name``
  (the StatefulSet controller sets it on every pod it creates), never every pod of the cluster.
* kafkanodepools (``kafka.strimzi.io/v1``, else ``v1beta2``: Strimzi 1.0 serves only ``v1``,
  Strimzi before 0.49 only ``v1beta2``) and the pods of node pools (label
  ``strimzi.io/pool-name``): only with ``--kafka-node-pools`` (the default).
* Advanced StatefulSets (``apps.kruise.io``): only with ``--kruise`` (the default).
* A CRD's collection is optional: while API discovery does not list it, its table stays empty
  and counts as listed; discovery is asked again now and then, so a CRD installed after start
  is picked up without a restart (:mod:`webhook.cluster.served`).
* namespaces -- only opted-in ones (``stszone.io/enabled=true``): a namespace missing from the table
  is not opted in, and the API server sends DELETED when a namespace loses the label, so the
  table stays exact while holding a handful of names instead of every namespace of the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from webhook.cluster.api import JSON_MEDIA
from webhook.config import Settings
from webhook.model import kruise
from webhook.model.annotations import ENABLED
from webhook.model.nodepools import GROUP, POOL_LABEL, VERSIONS
from webhook.model.records import Key
from webhook.model.tables import Table

#: Metadata-only representation, with plain JSON as the fallback for servers that cannot
#: convert (client-go's metadata informer asks the same way); list and watch name different types.
METADATA_LIST: Final = f"{JSON_MEDIA};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,{JSON_MEDIA}"
METADATA_WATCH: Final = f"{JSON_MEDIA};as=PartialObjectMetadata;g=meta.k8s.io;v=v1,{JSON_MEDIA}"
STATEFULSET_POD_LABEL: Final = "statefulset.kubernetes.io/pod-name"
CLUSTER_SCOPED: Final = frozenset({"nodes", "volumes", "namespaces"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Resource:
    """One API collection mirrored into the store table ``table``."""

    table: Table
    path: str
    label_selector: str = ""
    metadata_only: bool = False
    #: Served only where a CRD is installed: watched only while API discovery lists it.
    optional: bool = False
    #: The same collection at other versions of its API, in order, read where the version of
    #: ``path`` is not served (a CRD of an older release serves only those).
    older: tuple[str, ...] = ()

    @property
    def paths(self) -> tuple[str, ...]:
        """Where the collection may be served, the preferred version first."""
        return (self.path, *self.older)

    def accept(self, *, watch: bool) -> str:
        """The Accept header of a list (``watch=False``) or a watch of this collection."""
        if not self.metadata_only:
            return JSON_MEDIA
        return METADATA_WATCH if watch else METADATA_LIST


def resources(settings: Settings) -> tuple[Resource, ...]:
    """The collections the live view watches, in the order they are listed."""
    return (
        *_BUILT_IN,
        *optional_resources(settings),
    )


_BUILT_IN: Final = (
    Resource(table="nodes", path="/api/v1/nodes"),
    Resource(table="volumes", path="/api/v1/persistentvolumes"),
    Resource(table="claims", path="/api/v1/persistentvolumeclaims"),
    Resource(table="statefulsets", path="/apis/apps/v1/statefulsets"),
    Resource(table="pods", path="/api/v1/pods", label_selector=STATEFULSET_POD_LABEL),
    Resource(table="namespaces", path="/api/v1/namespaces", label_selector=f"{ENABLED}=true"),
)


#: Strimzi node pools and their brokers' pods; the pods are core, but only worth a watch
#: with the kind on.
_STRIMZI: Final = (
    Resource(
        table="nodepools",
        path=f"/apis/{GROUP}/{VERSIONS[0]}/kafkanodepools",
        optional=True,
        older=tuple(f"/apis/{GROUP}/{version}/kafkanodepools" for version in VERSIONS[1:]),
    ),
    Resource(table="poolpods", path="/api/v1/pods", label_selector=POOL_LABEL),
)
_KRUISE: Final = (
    Resource(
        table="kruisesets",
        path=f"/apis/{kruise.GROUP}/{kruise.WATCHED_VERSION}/statefulsets",
        optional=True,
    ),
)


def _kinds(settings: Settings) -> tuple[tuple[bool, tuple[Resource, ...]], ...]:
    """Each ordinal-workload kind beyond apps/v1: whether it is on, and its collections."""
    return ((settings.kafka_node_pools, _STRIMZI), (settings.kruise, _KRUISE))


def optional_resources(settings: Settings) -> tuple[Resource, ...]:
    """The collections of the kinds turned on (a CRD's watched only where it is served)."""
    return tuple(r for on, found in _kinds(settings) if on for r in found)


def turned_off(settings: Settings) -> tuple[Table, ...]:
    """Tables of kinds turned off: empty, and listed from the start."""
    return tuple(r.table for on, found in _kinds(settings) if not on for r in found)


def object_key(obj: dict[str, Any], *, table: Table) -> Key | None:
    """The store key (``name`` or ``(namespace, name)``) of a raw object, if it has one."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(meta, dict) or not isinstance(name, str) or not name:
        return None
    if table in CLUSTER_SCOPED:
        return name
    namespace = meta.get("namespace")
    return (namespace, name) if isinstance(namespace, str) else None


def describe(obj: Any) -> str:
    """``namespace/name (uid ...)`` of a raw object, for logs; robust to any shape."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return "(object without metadata)"
    uid, name, namespace = meta.get("uid"), meta.get("name"), meta.get("namespace")
    where = f"{namespace}/{name}" if namespace else str(name)
    return f"{where} (uid {uid})" if uid else where
