"""The tables of the cluster view and the indexes kept in step with them: the writers. Pure.

:class:`IndexedTables` is what the reflectors and the saved-cluster loader write through
(``put``, ``delete``, ``replace``, or ``staging`` and ``swap`` for a list arriving in pages).
Each write keeps the table's indexes, the node labels, the volume affinities' reach and the
revisions in step, so the queries of :class:`webhook.model.store.Store` read one set's records
with a lookup, never a scan.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from webhook.model import pinning
from webhook.model.index import Index, Staging
from webhook.model.labels import NodeLabels
from webhook.model.namespaces import NamespaceInfo
from webhook.model.nodepools import KafkaNodePoolInfo, PoolPodInfo
from webhook.model.reach import Reaches
from webhook.model.records import (
    ClaimInfo,
    Info,
    Key,
    NodeInfo,
    PodInfo,
    StatefulSetInfo,
    VolumeInfo,
)
from webhook.model.revisions import Revisions
from webhook.model.setpods import SetPods, claim_stem
from webhook.model.tables import Table


class IndexedTables:
    """The view's tables and their indexes, and the writers that keep them in step. All on the
    event loop thread (no locks); ``replace`` and ``swap`` change a whole table at once."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeInfo] = {}
        self.volumes: dict[str, VolumeInfo] = {}
        self.claims: dict[tuple[str, str], ClaimInfo] = {}
        self.statefulsets: dict[tuple[str, str], StatefulSetInfo] = {}
        self.pods: dict[tuple[str, str], PodInfo] = {}
        self.namespaces: dict[str, NamespaceInfo] = {}
        #: Strimzi KafkaNodePools and their pods (:mod:`webhook.model.nodepools`).
        self.nodepools: dict[tuple[str, str], KafkaNodePoolInfo] = {}
        self.poolpods: dict[tuple[str, str], PoolPodInfo] = {}
        #: OpenKruise Advanced StatefulSets (``apps.kruise.io``), apart from ``apps/v1`` ones.
        self.kruisesets: dict[tuple[str, str], StatefulSetInfo] = {}
        #: Kinds that have been filled (a file load, or a watch's first list).
        self.loaded: set[Table] = set()
        #: The nodes by label (key -> value -> names), kept as the nodes change.
        self._labels = NodeLabels()
        #: Where each distinct volume affinity reaches, kept as the volumes and nodes change.
        self._reaches = Reaches()
        #: What each set's audit reads last changed at (:meth:`Store.revision_of
        #: <webhook.model.store.Store.revision_of>`).
        self._revisions = Revisions()
        # Indexes, kept in step by put/delete/replace: a request reads one set's records only.
        #: PVs by their claimRef (namespace, claim): a pre-bound PV pins its claim early.
        self._volumes_by_claim: Index[VolumeInfo, None] = Index(lambda v: v.claim)
        #: Claims and pre-bound PVs by (namespace, claim name without its "-<ordinal>"), i.e.
        #: by "<template>-<set>": the claims of one set are one lookup per template.
        self._volumes_by_stem: Index[VolumeInfo, None] = Index(
            lambda v: claim_stem(v.claim[0], v.claim[1]) if v.claim else None
        )
        #: Volumes by affinity (those that pin something): what ``_reaches`` keeps.
        self._volumes_by_pinning: Index[VolumeInfo, None] = Index(
            lambda v: None if v.pinning.anywhere else v.pinning
        )
        self._claims_by_stem: Index[ClaimInfo, None] = Index(
            lambda c: claim_stem(c.namespace, c.name)
        )
        self._sets_by_namespace: Index[StatefulSetInfo, None] = Index(lambda s: s.namespace)
        self._pods_by_owner: Index[PodInfo, SetPods] = Index(
            lambda p: p.set_key, summarise=SetPods.of
        )
        self._pods_by_pool: Index[PoolPodInfo, None] = Index(lambda p: p.group)
        self._kruise_by_namespace: Index[StatefulSetInfo, None] = Index(lambda s: s.namespace)
        self._indexes: dict[Table, tuple[Index[Any, Any], ...]] = {
            "poolpods": (self._pods_by_pool,),
            "volumes": (self._volumes_by_claim, self._volumes_by_stem, self._volumes_by_pinning),
            "claims": (self._claims_by_stem,),
            "statefulsets": (self._sets_by_namespace,),
            "pods": (self._pods_by_owner,),
            "kruisesets": (self._kruise_by_namespace,),
        }

    # writers
    def table(self, name: Table) -> dict[Any, Any]:
        """The dict holding the records of table ``name``."""
        table: dict[Any, Any] = getattr(self, name)
        return table

    def put(self, name: Table, info: Info) -> None:
        """Insert or replace one record."""
        table, key = self.table(name), info.key
        old = table.get(key)
        if old == info:
            # Most MODIFIED events change nothing a record keeps (pod status, node heartbeats):
            # leave the indexes as they are.
            return
        for index in self._indexes.get(name, ()):
            gone = index.remove(old, summarise=False) if old is not None else None
            group = index.add(info, key=key)
            if gone != group:
                index.resummarise(gone)
        table[key] = info
        if isinstance(info, NodeInfo) and (old is None or old.labels != info.labels):
            if old is not None:
                self._labels.remove(old)
            self._labels.add(info)
            self._reaches.refresh(self)
        elif isinstance(info, VolumeInfo):
            self._reaches.add(info.pinning, view=self)
            if old is not None and not self._volumes_by_pinning.get(old.pinning):
                self._reaches.remove(old.pinning)
        if old is None:
            self._changed(name, info)
        else:
            self._changed(name, old, info)

    def delete(self, name: Table, key: Key) -> None:
        """Remove one record (missing is fine: a DELETED may follow a re-list)."""
        old = self.table(name).pop(key, None)
        if old is not None:
            for index in self._indexes.get(name, ()):
                index.remove(old)
            if isinstance(old, NodeInfo):
                self._labels.remove(old)
                self._reaches.refresh(self)
            elif isinstance(old, VolumeInfo) and not self._volumes_by_pinning.get(old.pinning):
                self._reaches.remove(old.pinning)
            self._changed(name, old)

    def _changed(self, name: Table, *infos: Info) -> None:
        """One change touching ``infos``: the record put, the one it replaced, or the one gone."""
        self._revisions.changed(infos, view=self)

    def replace(self, name: Table, infos: Iterable[Info]) -> None:
        """Swap the whole table ``name`` (a fresh list) and mark it loaded."""
        staged = self.staging(name)
        staged.add(infos)
        self.swap(staged)

    def staging(self, name: Table) -> Staging:
        """An empty table ``name`` with empty indexes, to fill piece by piece, then :meth:`swap`.

        A list of 100k objects arrives in pages: each is folded into the staging table as it
        comes, so swapping the full list in is one assignment, never a pass over 100k records
        that would stop the event loop.
        """
        return Staging(name, tuple(index.empty() for index in self._indexes.get(name, ())))

    def swap(self, staged: Staging) -> None:
        """Make a filled :class:`Staging` the table it stands for, at once, and mark it loaded."""
        name = staged.name
        for index, filled in zip(self._indexes.get(name, ()), staged.indexes, strict=True):
            index.adopt(filled)
        setattr(self, name, staged.table)
        self.loaded.add(name)
        if name == "nodes":
            self._labels = NodeLabels(self.nodes.values())
            self._reaches.refresh(self)
        elif name == "volumes":
            held = self._volumes_by_pinning.groups()
            self._reaches = Reaches(p for p in held if isinstance(p, pinning.Pinning))
            self._reaches.refresh(self)
        self._revisions.relisted()

    # What the writers' bookkeeping reads of the view: the revisions ask whether a namespace
    # holds sets; the volumes' reach reads the nodes (webhook.model.pinning.Nodes).
    def has_sets(self, namespace: str) -> bool:
        """Whether the view holds a StatefulSet or an Advanced StatefulSet in ``namespace``."""
        return bool(
            self._sets_by_namespace.get(namespace) or self._kruise_by_namespace.get(namespace)
        )

    def label_values(self, key: str) -> frozenset[str]:
        """Distinct values of node label ``key``."""
        return frozenset(self._labels.values(key))

    def nodes_with_label(self, key: str, value: str) -> tuple[str, ...]:
        """Names of nodes whose label ``key`` equals ``value`` (sorted)."""
        return self._labels.nodes(key, value)
