"""The cluster view the pure code reads: one :class:`Store` of records. Pure.

``clusterfile.py`` fills it once from a saved ``kubectl get -o yaml`` (offline); the reflectors
keep it current by list+watch (live). The admission path only reads it: lookups, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from webhook.model import pinning
from webhook.model.annotations import DEFAULT_TOPOLOGY_KEY
from webhook.model.indexed import IndexedTables
from webhook.model.nodepools import KafkaNodePoolInfo, PoolPodInfo
from webhook.model.pinning import Reach
from webhook.model.records import ClaimInfo, PodInfo, StatefulSetInfo, VolumeInfo
from webhook.model.revisions import set_key
from webhook.model.setkinds import KINDS
from webhook.model.setpods import PodZones, SetPods, claim_ordinals
from webhook.model.tables import CORE_TABLES, TABLES, Table


class Store(IndexedTables):
    """In-memory cluster view. Writers: ``put``/``delete``/``replace``
    (:class:`~webhook.model.indexed.IndexedTables`). Readers: the queries. All on the event
    loop thread (no locks); ``replace`` swaps a whole table at once."""

    def __init__(
        self,
        *,
        zones: tuple[str, ...] | None = None,
        live: bool = False,
        kruise_start_ordinal: bool = False,
    ) -> None:
        #: ``--zones``: the zone list new StatefulSets get, overriding discovery.
        self.zones_override = zones
        #: ``--kruise-start-ordinal``: kruise-manager runs with its StatefulSetStartOrdinal gate,
        #: so an Advanced StatefulSet's ``spec.ordinals.start`` counts (else its start is 0).
        self.kruise_start_ordinal = kruise_start_ordinal
        #: Fed by watches: a StatefulSet missing from a synced table is one the watch has not
        #: delivered yet (creation races its first pod), not one that does not exist.
        self.live = live
        super().__init__()

    # queries
    def server_zones(self, topology_key: str = DEFAULT_TOPOLOGY_KEY) -> tuple[str, ...]:
        """The server's zone source: ``--zones`` in its order, else zones on nodes, sorted.

        ``--zones`` lists values of the default topology key: a set with another
        ``stszone.io/topology-key`` gets the values nodes carry under its own key instead.
        """
        if self.zones_override and topology_key == DEFAULT_TOPOLOGY_KEY:
            return self.zones_override
        return self.discovered_zones(topology_key)

    def discovered_zones(self, topology_key: str = DEFAULT_TOPOLOGY_KEY) -> tuple[str, ...]:
        """Sorted distinct values of ``topology_key`` over all nodes; "" names no zone."""
        return tuple(sorted(v for v in self._labels.values(topology_key) if v))

    def node_zone(self, node: str, topology_key: str = DEFAULT_TOPOLOGY_KEY) -> str | None:
        """The zone label of a node, or None when the node or its label is unknown; an empty
        label names no zone, as for discovery."""
        info = self.nodes.get(node)
        return (info.labels.get(topology_key) or None) if info is not None else None

    def statefulset(self, namespace: str, name: str, group: str = "") -> StatefulSetInfo | None:
        """The set of ``group`` ("": ``apps/v1``; ``apps.kruise.io``) named so, if held."""
        table: dict[tuple[str, str], StatefulSetInfo] = self.table(KINDS[group].table)
        return table.get((namespace, name))

    def nodepool(self, namespace: str, name: str) -> KafkaNodePoolInfo | None:
        return self.nodepools.get((namespace, name))

    def pool_pods(self, namespace: str, cluster: str, pool: str) -> tuple[PoolPodInfo, ...]:
        """The pods of one KafkaNodePool (indexed: no scan of the pods table)."""
        return tuple(self._pods_by_pool.get((namespace, cluster, pool)).values())

    def claims_with_stem(self, namespace: str, stem: str) -> tuple[ClaimInfo, ...]:
        """The claims named ``<stem>-<digits>`` of one namespace."""
        return tuple(self._claims_by_stem.get((namespace, stem)).values())

    def unsynced(self, *also: Table) -> tuple[Table, ...]:
        """Tables a live view has not listed yet (always none offline: a file or ``--zones``
        is complete by definition), of the core ones and ``also``. Until there are none, an
        absent object proves nothing."""
        if not self.live or len(self.loaded) == len(TABLES):  # tables are only ever added
            return ()
        return tuple(t for t in dict.fromkeys((*CORE_TABLES, *also)) if t not in self.loaded)

    def lagging(self) -> bool:
        """Whether a StatefulSet absent from this view may simply not have arrived yet."""
        return self.live and "statefulsets" in self.loaded

    def statefulsets_in(self, namespace: str) -> Iterator[StatefulSetInfo]:
        """The StatefulSets of one namespace (indexed: no scan of the whole table)."""
        return iter(tuple(self._sets_by_namespace.get(namespace).values()))

    def kruisesets_in(self, namespace: str) -> Iterator[StatefulSetInfo]:
        """The Advanced StatefulSets of one namespace (indexed)."""
        return iter(tuple(self._kruise_by_namespace.get(namespace).values()))

    def workloads_in(self, namespace: str) -> Iterator[StatefulSetInfo]:
        """Every ordinal workload of one namespace: StatefulSets, then Advanced StatefulSets."""
        yield from self.statefulsets_in(namespace)
        yield from self.kruisesets_in(namespace)

    def revision_of(self, namespace: str, statefulset: str, group: str = "") -> int:
        """The revision at which anything the audit of one StatefulSet reads last changed.

        Equal at two moments: nothing the set's figures (``stszone audit`` of that set) depend
        on has changed in between, so they need not be worked out again.
        """
        return self._revisions.of(namespace, set_key(namespace, statefulset, group))

    def known_ordinals(
        self,
        namespace: str,
        statefulset: str,
        *,
        templates: Iterable[str] = (),
        group: str = "",
    ) -> frozenset[int]:
        """Ordinals of a set that have a pod, a claim or a pre-bound volume in this view.

        Every other ordinal is placed by the rule alone, which lets the guard reason about a
        ``replicas: 2147483647`` set without visiting two billion ordinals.
        """
        found = self.set_pods(namespace, statefulset, group).ordinals
        for template in templates:
            stem = (namespace, f"{template}-{statefulset}")
            # Worked out here, not kept per set: only a Scale's guard reads them (9 MB for 100k).
            names = [c.name for c in self._claims_by_stem.get(stem).values()]
            names += [v.claim[1] for v in self._volumes_by_stem.get(stem).values() if v.claim]
            found = found | claim_ordinals(names)
        return found

    def set_pods(self, namespace: str, statefulset: str, group: str = "") -> SetPods:
        """The pods of one set by ordinal (``group``: its kind's, "" for ``apps/v1``).

        An Advanced StatefulSet's pods are those whose owner reference names its uid too (when
        both are known): pods of an earlier set of that name, deleted, are not its members.
        """
        pods = self._pods_by_owner.summary(set_key(namespace, statefulset, group))
        if not KINDS[group].owner_uid:
            return pods
        info = self.statefulset(namespace, statefulset, group)
        uid = info.uid if info is not None else ""
        if uid and any(p.owner_uid and p.owner_uid != uid for p in pods.by_name.values()):
            return SetPods.of(
                p
                for p in self._pods_by_owner.get(set_key(namespace, statefulset, group)).values()
                if not p.owner_uid or p.owner_uid == uid
            )
        return pods

    def pod_zones(
        self, namespace: str, statefulset: str, topology_key: str, group: str = ""
    ) -> PodZones:
        """Where the pods of one set are (:meth:`PodZones.placed`; :meth:`node_gone`)."""
        return PodZones.placed(
            self.set_pods(namespace, statefulset, group),
            self.nodes,
            topology_key,
            node_gone=self.node_gone,
        )

    def node_gone(self, node: str) -> bool:
        """Whether ``node`` no longer exists: the view holds the cluster's nodes (listed, and
        some) and not this one. PodGC deletes a pod still bound to it: it is going away."""
        return bool(node and self.nodes) and node not in self.nodes and "nodes" in self.loaded

    def pod(self, namespace: str, name: str) -> PodInfo | None:
        return self.pods.get((namespace, name))

    def volume(self, name: str) -> VolumeInfo | None:
        return self.volumes.get(name)

    def claim_zones(
        self, namespace: str, claim: str, topology_key: str, *, uid: str | None = None
    ) -> tuple[str, frozenset[str] | None]:
        """(volume name, :meth:`volume_zones`) of the PV bound to a claim; ``("", frozenset())``
        if none. The PV's own ``claimRef`` counts too: a pre-bound PV pins the claim before
        binding. ``uid`` (even "") names a claim being created (:meth:`prebound`): a claim of the
        same name with another uid in the view is an earlier one, deleted.
        """
        info, new = self.claims.get((namespace, claim)), uid is not None
        if new and info is not None and info.uid and info.uid != uid:
            info = None
        volume = info.volume if info is not None and info.volume else ""
        if uid is None:
            uid = info.uid if info is not None else ""
        volume = volume or self.prebound(namespace, claim, uid=uid, new=new)
        if not volume or volume not in self.volumes:
            return "", frozenset()
        return volume, self.volume_zones(volume, topology_key)

    def prebound(self, namespace: str, claim: str, *, uid: str = "", new: bool = False) -> str:
        """Name of a PersistentVolume whose ``claimRef`` names this claim, or ``""``.

        A claimRef naming another uid than ``uid`` (when both are known) belongs to an earlier
        claim of this name, deleted, its volume not yet marked Released: the PV controller will
        never bind this claim to it. So does any uid but ``uid`` for a ``new`` claim, being
        created: the API server gives it its uid after the mutating webhooks, so none names it.
        Of several, the first by name: replicas agree whatever order their watches saw them in.
        """
        held = self._volumes_by_claim.get((namespace, claim)).values()
        return min(
            (v.name for v in held if v.claim_uid in ("", uid) or not (new or uid)), default=""
        )

    def volume_reach(self, volume: str, topology_key: str) -> Reach:
        """Where a PersistentVolume can attach (:func:`webhook.model.pinning.reach`); a volume
        the view does not hold is read as pinned to nothing."""
        pv = self.volumes.get(volume)
        if pv is None:
            return pinning.EVERYWHERE
        return self._reaches.get(pv.pinning, topology_key, view=self)

    def volume_zones(self, volume: str, topology_key: str) -> frozenset[str] | None:
        """Zones a PersistentVolume can be used from: those of the nodes it can attach to
        (:mod:`webhook.model.pinning`). Empty: any zone, or a volume the view does not hold;
        None: nowhere (it admits no node of a known zone), so its zone is unknown."""
        return self.volume_reach(volume, topology_key).zones

    def volume_nodes(self, volume: str, topology_key: str) -> frozenset[str] | None:
        """The view's nodes a volume can attach to; None when nothing pins it (any node)."""
        return self.volume_reach(volume, topology_key).nodes

    def volume_nowhere(self, volume: str, topology_key: str) -> str:
        """Why :meth:`volume_zones` of a volume is None, in words."""
        pv = self.volumes.get(volume)
        if pv is None:
            return f"volume {volume} is not in stszone's view"
        return f"volume {volume} {pinning.nowhere(pv.pinning, topology_key, view=self)}"

    def zones_of(self, nodes: Iterable[str], topology_key: str) -> frozenset[str]:
        """The zones of the given nodes (unknown nodes and nodes without the label skipped)."""
        return frozenset(z for n in nodes if (z := self.node_zone(n, topology_key)) is not None)

    def namespace_enabled(self, namespace: str) -> bool | None:
        """True/False when namespaces are known, None when this view holds no namespaces."""
        if "namespaces" not in self.loaded and not self.namespaces:
            return None
        info = self.namespaces.get(namespace)
        return info.enabled if info is not None else False
