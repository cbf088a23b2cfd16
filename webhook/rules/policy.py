"""A StatefulSet's policy: what placement reads of one set, resolved from every source.

The set's ``stszone.io/*`` annotations (parsed by the view), else its pod's own, else the
server's zone source give the zones, mode and keys; the set record gives its start ordinal,
claim templates and, for an Advanced StatefulSet, its live ordinals. Resolution refuses, for
retry, while a live view is still loading or the set has not reached it yet: placing by
defaults then would pin a pod for good with a possibly wrong zone list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from itertools import islice
from typing import Final, NamedTuple

from webhook.errors import Denied
from webhook.model import setkinds
from webhook.model.annotations import Declared, read_annotations, stszone_annotations
from webhook.model.kruise import Live
from webhook.model.records import StatefulSetInfo
from webhook.model.store import Store
from webhook.model.tables import Table
from webhook.rules.ordinals import WALK_LIMIT, walked
from webhook.rules.zonelist import zone_list


class Policy(NamedTuple):
    """Everything placement needs to know about one StatefulSet, resolved from all sources.

    Policies and placements are built on every pod request: named tuples, immutable and
    built twice as fast as frozen dataclasses.
    """

    statefulset: str
    declared: Declared
    zones: tuple[str, ...]
    start: int
    templates: tuple[str, ...]
    #: True when the StatefulSet itself was found in the view.
    known: bool
    #: Why the set's annotations were unusable, when the caller tolerated it (defaults used).
    malformed: tuple[str, ...] = ()
    #: The owner's group: "" for ``apps/v1``, ``apps.kruise.io`` for an Advanced StatefulSet.
    group: str = ""
    #: An Advanced StatefulSet's live ordinals: its members are placed by rank, not ordinal.
    live: Live | None = None

    @property
    def kind(self) -> str:
        """How messages name the workload's kind."""
        return workload_kind(self.group)


def workload_kind(group: str) -> str:
    """``StatefulSet``, or ``Advanced StatefulSet`` for ``apps.kruise.io``."""
    return setkinds.KINDS[group].text


def kruise_live(info: StatefulSetInfo, *, store: Store, replicas: int | None = None) -> Live:
    """The live ordinals of an Advanced StatefulSet record (``replicas``: another count)."""
    return Live(
        replicas=info.replicas if replicas is None else replicas,
        start=info.start if store.kruise_start_ordinal else 0,
        reserved=info.reserved,
    )


def walked_members(sts: StatefulSetInfo, *, store: Store) -> Sequence[int]:
    """The members a check visits one by one (:mod:`webhook.rules.ordinals`): the first
    ordinals of a StatefulSet, or the first live ordinals of an Advanced StatefulSet."""
    if not setkinds.KINDS[sts.group].live_ordinals:
        return walked(sts.start, sts.replicas)
    return list(islice(kruise_live(sts, store=store), WALK_LIMIT))


#: Who sends a KafkaNodePool's broker pods and claims again after a refusal meant for retry.
POOL_CREATES_RETRIED_BY: Final = "the Strimzi operator retries its creates by itself"
#: Who sends a ``/scale`` again after such a refusal: an HPA (KEDA's too) on its next sync. An
#: UPDATE of the workload names nobody: the HPA writes only ``/scale``, so a person or tool sent it.
SCALES_RETRIED_BY: Final = "an HPA retries its scale by itself"


def require_synced(
    store: Store,
    *,
    what: str,
    retried_by: str,
    also: tuple[Table, ...] = (),
) -> None:
    """Refuse, for retry, while a live view has not listed every resource yet (``retried_by``:
    who retries the refused request, as the refusal tells it; "" when no controller does: a
    workload's creation is sent by a person or a tool, which retries as it does any refusal).

    An object missing from a view still loading proves nothing: placing by the rule without
    the volumes would pin a pod where its data can never be, and a guard without the pods
    would count no zone. Offline views (``--zones``, ``--cluster FILE``) are complete.
    """
    missing = store.unsynced(*also)
    if missing:
        retried = f" ({retried_by})" if retried_by else ""
        raise Denied(
            f"stszone's view of the cluster is still loading ({', '.join(missing)} not listed "
            f"yet), so it cannot judge {what}; retry in a moment{retried}",
            reason="ViewNotSynced",
        )


def resolve_policy(
    namespace: str,
    statefulset: str,
    *,
    store: Store,
    pod_annotations: Mapping[str, str] | None = None,
    pod_claims: tuple[str, ...] = (),
    tolerate_malformed: bool = False,
    group: str = "",
    retried_by: str | None = None,
) -> Policy:
    """Resolve the policy of a StatefulSet from its annotations, else the pod's, else the server.

    Zones come from the StatefulSet's ``stszone.io/zones``, else the pod's own annotation of
    that name (pods inherit the template's annotations, which helps when the set is not in
    the cache yet), else the server's zone source. Raises :class:`Denied` while a live view
    is still loading, and when the annotations are malformed -- unless ``tolerate_malformed``
    (a Scale, which cannot change them): then the defaults stand in and ``malformed`` says why.
    ``retried_by``: who sends the refused request again (default: the set's controller, which
    sends its pods' and claims' creates; :data:`SCALES_RETRIED_BY` for a ``/scale``).
    """
    kind = workload_kind(group)
    if retried_by is None:
        retried_by = setkinds.KINDS[group].creates_retried_by
    require_synced(
        store,
        what=f"{kind} {namespace}/{statefulset}",
        also=(setkinds.KINDS[group].table,),
        retried_by=retried_by,
    )
    sts = store.statefulset(namespace, statefulset, group)
    if sts is None and store.lagging():
        # Placing by defaults would pin the pod for good with a possibly wrong zone list,
        # mode or ordinals.start; the set's controller retries a refused create, the HPA a
        # refused scale.
        raise Denied(
            f"{kind} {namespace}/{statefulset} has not reached stszone's view yet (its "
            f"watch event is usually milliseconds behind its creation); retry in a moment "
            f"({retried_by})",
            reason="StatefulSetNotYetSeen",
        )
    own = stszone_annotations(pod_annotations or {})
    if sts is not None and own.keys() <= sts.annotations.keys():
        # The set's keys win over the pod's: its annotations alone decide, parsed by the view.
        declared, malformed = sts.declared, sts.problems
    else:
        declared, malformed = read_annotations({**own, **(sts.annotations if sts else {})})
    if malformed and not tolerate_malformed:
        raise Denied(
            f"{kind} {namespace}/{statefulset} has malformed stszone annotations: "
            + "; ".join(malformed),
            reason="Invalid",
        )
    zones = zone_list(declared, store=store)
    templates = (
        sts.templates if sts is not None else _templates_from_claims(statefulset, pod_claims)
    )
    live = None
    if setkinds.KINDS[group].live_ordinals:
        live = kruise_live(sts, store=store) if sts is not None else Live(replicas=0)
    return Policy(
        statefulset=statefulset,
        declared=declared,
        zones=zones,
        start=live.start if live is not None else sts.start if sts is not None else 0,
        templates=templates,
        known=sts is not None,
        malformed=malformed,
        group=group,
        live=live,
    )


def _templates_from_claims(statefulset: str, claims: tuple[str, ...]) -> tuple[str, ...]:
    # Without the StatefulSet, a pod volume's claim "<template>-<sts>-<n>" still names the template.
    suffix = re.compile(rf"^(.+)-{re.escape(statefulset)}-[0-9]+$")
    return tuple(m.group(1) for c in claims if (m := suffix.match(c)))
