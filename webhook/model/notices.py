"""Notices: what one Event will say about a decision, in the domain's words. Pure.

Admission warnings reach only the client that sent the request, and the controllers that create
nearly every pod stszone places (the StatefulSet controller, an operator) drop them. A rule that
decides something a person should be able to find later (a pod placed away from its rule zone, a
refused scale-down, ...) also returns a :class:`Notice`; the server posts it to the
:class:`~webhook.model.outbox.Outbox` and a background job writes it as an ``events.k8s.io/v1``
Event on the owning workload, where ``kubectl describe`` and event exporters show it.

A notice is the Event's content without its bookkeeping (name, time, series, reporter): what it
is about (``regarding``: the StatefulSet, later a KafkaNodePool or an Advanced StatefulSet), the
object it involves (``related``: a pod or a claim), a CamelCase ``reason`` per kind of decision
(the catalogue below), ``type`` Warning where an operator should act and Normal otherwise, the
``action`` stszone took, and the ``note``: the warning or denial text ``kubectl`` users already
get, cut to the 1 KiB the API server accepts.
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple

from webhook.model import nodepools
from webhook.model.setkinds import KIND, KINDS

NoticeType = Literal["Normal", "Warning"]

#: ``events.k8s.io/v1`` refuses a note over 1 KiB (bytes, as Go's ``len`` counts them).
NOTE_MAX: Final = 1024
#: What marks a note cut short.
CUT: Final = " [...]"


class ObjectRef(NamedTuple):
    """An object an Event refers to (``regarding`` / ``related``): a ``core/v1``
    ObjectReference without ``fieldPath`` and ``resourceVersion``, which stszone never names.
    ``uid`` is "" when unknown (a pod being created has none yet)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""


def statefulset(namespace: str, name: str, *, uid: str = "") -> ObjectRef:
    """An ``apps/v1`` StatefulSet (the ``uid`` of a pod's controller is in its ownerReferences)."""
    return ObjectRef(KINDS[""].api_version, KIND, namespace, name, uid)


def kafkanodepool(namespace: str, name: str, *, uid: str = "", api_version: str = "") -> ObjectRef:
    """A Strimzi KafkaNodePool at ``api_version``, the version the pool was read at: no one
    version is served by every Strimzi (1.0 serves ``v1`` only, before 0.49 ``v1beta2`` only).
    "" (unknown) names ``v1``, the version of every current release."""
    version = api_version or f"{nodepools.GROUP}/{nodepools.VERSIONS[0]}"
    return ObjectRef(version, "KafkaNodePool", namespace, name, uid)


def workload(namespace: str, name: str, *, group: str = "", uid: str = "") -> ObjectRef:
    """A StatefulSet of ``group``: "" for ``apps/v1``, ``apps.kruise.io`` (its ``v1beta1``)."""
    return ObjectRef(KINDS[group].api_version, KIND, namespace, name, uid)


def pod(namespace: str, name: str, *, uid: str = "") -> ObjectRef:
    """A pod."""
    return ObjectRef("v1", "Pod", namespace, name, uid)


def claim(namespace: str, name: str, *, uid: str = "") -> ObjectRef:
    """A PersistentVolumeClaim."""
    return ObjectRef("v1", "PersistentVolumeClaim", namespace, name, uid)


class Notice(NamedTuple):
    """What one Event says; build it with the constructors below, which fix ``reason``,
    ``type`` and ``action`` for each kind of decision."""

    regarding: ObjectRef
    reason: str
    type: NoticeType
    action: str
    note: str
    related: ObjectRef | None = None


# --- the catalogue: one reason per kind of decision -------------------------------------------

#: Actions: stszone chose a pod's zone; refused a change; admitted a change that does something
#: a person should know of.
PLACE: Final = "Place"
REFUSE: Final = "Refuse"
ADMIT: Final = "Admit"

#: A pod placed in its volume's zone rather than its rule zone (data gravity).
PLACED_WITH_DATA: Final = "PlacedWithData"
#: A pod that can run nowhere: its volume can attach to no node of a known zone; left unpinned.
NOWHERE_TO_RUN: Final = "NowhereToRun"
#: A scale-down (UPDATE or ``/scale``, or a move of ``ordinals.start``) refused by the guard.
SCALE_DOWN_REFUSED: Final = "ScaleDownRefused"
#: A scale-down that drops (or may drop) a zone, let through by ``stszone.io/allow-zone-loss``.
ZONE_LOSS_ALLOWED: Final = "ZoneLossAllowed"
#: An allowed scale-down after which a zone is held only by pods on nodes that are not Ready.
ZONE_ON_NOT_READY_NODE: Final = "ZoneOnNotReadyNode"
#: An allowed scale-down whose claims the controller deletes (``whenScaled: Delete``).
CLAIMS_DELETED: Final = "ClaimsDeleted"
#: A change of ``stszone.io/zones`` or ``ordinals.start`` that moves members when re-created.
MEMBERS_MOVED: Final = "MembersMoved"


class Kind(NamedTuple):
    """One entry of the catalogue: its Event type and action, and what it means."""

    type: NoticeType
    action: str
    meaning: str


#: Reason -> its type, action and meaning (docs/events.md prints the same table).
CATALOGUE: Final[dict[str, Kind]] = {
    PLACED_WITH_DATA: Kind("Normal", PLACE, "a pod follows its volume away from its rule zone"),
    NOWHERE_TO_RUN: Kind(
        "Warning", PLACE, "a pod's volume can attach to no node: it stays Pending"
    ),
    SCALE_DOWN_REFUSED: Kind("Warning", REFUSE, "a scale-down that would drop a zone, refused"),
    ZONE_LOSS_ALLOWED: Kind("Warning", ADMIT, "a scale-down dropping a zone, forced"),
    ZONE_ON_NOT_READY_NODE: Kind(
        "Warning", ADMIT, "a scale-down leaves a zone to pods on nodes that are not Ready"
    ),
    CLAIMS_DELETED: Kind("Normal", ADMIT, "a scale-down deletes claims (whenScaled: Delete)"),
    MEMBERS_MOVED: Kind("Normal", ADMIT, "a new zone list or start moves members when re-created"),
}


def cap_note(text: str) -> str:
    """``text`` cut to :data:`NOTE_MAX` bytes of UTF-8 (never inside a character), marked."""
    raw = text.encode()
    if len(raw) <= NOTE_MAX:
        return text
    return raw[: NOTE_MAX - len(CUT)].decode(errors="ignore") + CUT


def notice(
    reason: str, regarding: ObjectRef, *, note: str, related: ObjectRef | None = None
) -> Notice:
    """The notice of catalogue entry ``reason`` (KeyError for a reason not in it)."""
    kind = CATALOGUE[reason]
    return Notice(regarding, reason, kind.type, kind.action, cap_note(note), related)


def placed_with_data(workload: ObjectRef, *, pod: ObjectRef, note: str) -> Notice:
    """``pod`` follows its volume to a zone other than its rule zone."""
    return notice(PLACED_WITH_DATA, workload, note=note, related=pod)


def nowhere_to_run(workload: ObjectRef, *, pod: ObjectRef, note: str) -> Notice:
    """``pod``'s volume can attach to no node of a known zone: it stays Pending, unpinned."""
    return notice(NOWHERE_TO_RUN, workload, note=note, related=pod)


def scale_down_refused(workload: ObjectRef, *, note: str) -> Notice:
    """The guard refused a scale-down (or a move of ``ordinals.start``); ``note``: the denial."""
    return notice(SCALE_DOWN_REFUSED, workload, note=note)


def zone_loss_allowed(workload: ObjectRef, *, note: str) -> Notice:
    """A scale-down that drops a zone, allowed by ``stszone.io/allow-zone-loss``."""
    return notice(ZONE_LOSS_ALLOWED, workload, note=note)


def zone_on_not_ready_node(
    workload: ObjectRef, *, note: str, pod: ObjectRef | None = None
) -> Notice:
    """An allowed scale-down leaves a zone only to pods on nodes that are not Ready; ``pod``:
    the one such pod, when there is exactly one."""
    return notice(ZONE_ON_NOT_READY_NODE, workload, note=note, related=pod)


def claims_deleted(workload: ObjectRef, *, note: str, claim: ObjectRef | None = None) -> Notice:
    """An allowed scale-down deletes claims with their pods; ``claim``: the one claim, when
    there is exactly one."""
    return notice(CLAIMS_DELETED, workload, note=note, related=claim)


def members_moved(workload: ObjectRef, *, note: str) -> Notice:
    """A new ``stszone.io/zones`` or ``ordinals.start``, or a switch into or out of node-ordinal
    mode, moves members when they are re-created."""
    return notice(MEMBERS_MOVED, workload, note=note)
