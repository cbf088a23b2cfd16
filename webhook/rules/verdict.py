"""What the scale-down guard answers: a denial naming the facts, or short warnings. Pure.

A denial says what would be lost (or may be, when a zone is unknown), which ordinals hold it
and why an unknown zone is unknown, the lowest safe replica count, and how to force it.
Warnings stay short (the API server advises under 120 characters and may cut them beyond
256), so long ordinal lists are summarised with a count.
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook.model import notices
from webhook.model.annotations import ALLOW_ZONE_LOSS, ZONES
from webhook.model.notices import Notice, ObjectRef
from webhook.model.pinning import ABSENT
from webhook.rules.decision import Decision, allow, refuse
from webhook.rules.guard import ScaleDown
from webhook.rules.locate import SCHEDULED, Located
from webhook.rules.policy import workload_kind
from webhook.rules.ranges import Holders, Unknown
from webhook.rules.text import SHOWN, joined, some


def _override(malformed: Sequence[str], *, group: str = "") -> str:
    """How to force it, on the set's kind (``group``): an Advanced StatefulSet is named so,
    since ``kubectl annotate statefulset`` reaches the apps/v1 set of that name. While a set's
    annotations are malformed, an update that changes them (adding allow-zone-loss alone) is
    refused, and the guard reads none of them: they are fixed in the same update that sets
    allow-zone-loss."""
    return force_hint(f"the {workload_kind(group)}", malformed)


def force_hint(owner: str, malformed: Sequence[str]) -> str:
    """How to force a refused scale-down of ``owner`` ("the StatefulSet", "KafkaNodePool
    pool"), a set or pool alike: set allow-zone-loss, or, while its annotations are
    ``malformed``, fix them in the same update that sets it."""
    if not malformed:
        return f'set {ALLOW_ZONE_LOSS}: "true" on {owner} to force it'
    more = f" (+{len(malformed) - 1} more)" if len(malformed) > 1 else ""
    return (
        f"fix {owner}'s malformed annotations ({malformed[0]}{more}) in the same "
        f'update that sets {ALLOW_ZONE_LOSS}: "true", to force it'
    )


def _note(item: Located) -> str | None:
    """Why a holder that is not a running pod on a labelled node counts (None: it is one)."""
    if item.source in SCHEDULED:
        return None
    if item.source in ("replacement", "ending"):  # "db-3 is Terminating on node n1; its ..."
        return item.detail
    if item.node:  # scheduled, but only its volume says where
        return (
            f"ordinal {item.ordinal} runs on {item.node}, whose zone its volume {item.detail} gives"
        )
    idle = f"ordinal {item.ordinal} is not running but"
    if item.source == "volume":
        return f"{idle} its volume {item.detail} is there"
    if item.source == "claim":
        return f"{idle} its claim {item.detail}, not bound yet, gets its volume there"
    if item.source == "node-label":
        return f"{idle} node {item.detail}, pinned to it by label, is there"
    return f"{idle} the placement rule puts it there"


def _zone_phrase(zone: str, holders: Holders, *, leaving: tuple[Located, ...] = ()) -> str:
    shown = holders.ordinals
    ordinals = some(shown, holders.count, shown=len(shown))
    one = holders.count == 1
    # Only the first three are located in full (source, node, volume) for the notes.
    notes = list(dict.fromkeys(n for o in shown[:3] if (n := _note(holders.where(o))) is not None))
    if notes:  # not every holder is a running pod
        held = (
            f"ordinal {ordinals} is the only one there"
            if one
            else f"ordinals {ordinals} are the only ones there"
        )
    else:
        held = (
            f"ordinal {ordinals} is its only pod"
            if one
            else f"ordinals {ordinals} are its only pods"
        )
    if leaving:  # kept ordinals whose pods still sit there, going away: they hold it no longer
        held += " not going away"
        notes += [item.detail for item in leaving[:SHOWN]]
    return f"{zone} ({'; '.join([held, *notes])})"


def describe_loss(result: ScaleDown) -> str:
    """``zone zone-c (ordinal 3 is its only pod)``, joined with ``and`` for several zones."""
    noun = "zones" if len(result.lost) > 1 else "zone"
    phrases = [
        _zone_phrase(z, items, leaving=tuple(result.leaving.get(z, ())))
        for z, items in result.lost.items()
    ]
    return f"{noun} {joined(phrases)}"


def _unready_warning(result: ScaleDown) -> str:
    """``db: 4 -> 3 leaves zone c only to db-2 (node nc), which is not Ready: ...``."""
    parts = [
        f"{zone} only to {joined([f'{result.name}-{i.ordinal} (node {i.node})' for i in items])}"
        for zone, items in result.unready.items()
    ]
    nodes = {i.node for items in result.unready.values() for i in items}
    one, zones = len(nodes) == 1, len(parts) > 1
    which, does = ("which is", "it does") if one else ("on nodes that are", "they do")
    return (
        f"{result.name}: {result.change} leaves zone{'s' if zones else ''} {joined(parts)}, "
        f"{which} not Ready: if {does} not come back, "
        f"{'those zones have' if zones else 'the zone has'} no pod; check the "
        f"node{'' if one else 's'} before scaling further"
    )


def _brief(zones: dict[str, Holders]) -> str:
    """``zone c (ordinal 3)`` / ``zones b (ordinals 2 and 4) and c (ordinal 3)``, for warnings."""
    parts = []
    for zone, holders in zones.items():
        ordinals = some(holders.ordinals, holders.count, shown=2)
        parts.append(f"{zone} (ordinal{'s' if holders.count > 1 else ''} {ordinals})")
    return f"zone{'s' if len(parts) > 1 else ''} {joined(parts)}"


def why_unknown(unknown: Unknown) -> str:
    """``ordinal 2, whose zone is unknown (node n7 has no label topology.kubernetes.io/zone)``;
    several: the first few with their reasons, and a count."""
    if unknown.count == 1:
        (item,) = unknown.first
        return f"ordinal {item.ordinal}, whose zone is unknown ({item.detail})"
    reasons = [f"ordinal {i.ordinal}: {i.detail}" for i in unknown.first[:SHOWN]]
    ordinals = some([i.ordinal for i in unknown.first], unknown.count)
    return f"ordinals {ordinals}, whose zones are unknown ({'; '.join(reasons)})"


def _lowest(result: ScaleDown) -> str:
    start = result.starts[1]
    at = f"with ordinals.start {start}, " if result.starts[0] != start else ""
    if result.lowest is None:
        return f"{at}no replica count up to {max(result.old, result.new)} is safe"
    lowest = f"{at}the smallest replica count that keeps every zone is {result.lowest}"
    # That count holds at the new start (or reserved ordinals) only: it goes in the same update.
    if at or result.label:
        lowest += f": set spec.replicas to {result.lowest} in the same update"
    return lowest


def _denial(result: ScaleDown, *, malformed: Sequence[str] = (), group: str = "") -> str:
    """The message of a refused scale-down (``malformed``: the set's unusable annotations;
    ``group``: the set's kind, see :func:`_override`)."""
    what = f"scale-down of {result.name} from {result.old} to {result.new}"
    if result.starts[0] != result.starts[1] or result.label:
        what = f"{result.change} of {result.name}"
    parts = []
    if result.lost:
        parts.append(f"would drop {describe_loss(result)}")
        if result.unknown_kept.count:
            parts[-1] += f" unless kept {why_unknown(result.unknown_kept)}, is there"
    if result.at_risk or (not result.zones and result.unknown_removed.count):
        zones = result.at_risk
        where = f"zone{'s' if len(zones) > 1 else ''} {joined(list(zones))}" if zones else "a zone"
        parts.append(
            f"may drop {where}, which no kept pod is known to hold: it removes "
            f"{why_unknown(result.unknown_removed)}"
        )
    override = _override(malformed, group=group)
    fix = override
    if result.depends_on_unknown:
        unknown = [*result.unknown_removed.first, *result.unknown_kept.first]
        # A volume whose nodes are there but unlabelled needs a label, like an unlabelled node.
        volumes = sum(ABSENT in item.detail for item in unknown)
        if volumes == len(unknown):
            fix = f"restore the node(s) the volume(s) can attach to, or {override}"
        elif volumes:
            fix = (
                "label the node(s) with their zone and restore those the volume(s) need, or "
                f"{override}"
            )
        else:
            fix = f"label the node(s) with their zone, or {override}"
    return f"{what} {'; and '.join(parts)}; {_lowest(result)}; {fix}"


def verdict(
    result: ScaleDown,
    *,
    allow_zone_loss: bool,
    regarding: ObjectRef,
    malformed: Sequence[str] = (),
    origin: str = ZONES,
    group: str = "",
) -> Decision:
    """Deny a scale-down that drops (or may drop) a listed zone, unless the StatefulSet allows
    it (then warn); warn about pods leaving zones outside the list and about unknown zones.
    ``malformed``: why the set's annotations were unusable (the guard ran on the defaults);
    ``origin``: where its zone list comes from (:func:`webhook.rules.zonelist.zones_origin`);
    ``group``: the set's kind, which the refusal names (:func:`_override`).
    A refusal, a forced zone loss and a zone left to nodes not Ready are also notices about
    ``regarding`` (the set)."""
    name = result.name
    warnings: tuple[str, ...] = ()
    told: tuple[Notice, ...] = ()
    if result.unlisted:
        warnings = (
            f"{name}: {result.change} removes {_brief(dict(result.unlisted))}, not in {origin}",
        )
    if result.unready:
        unready = _unready_warning(result)
        warnings += (unready,)
        told = (notices.zone_on_not_ready_node(regarding, note=unready),)
    if not result.refused:
        unknown = result.unknown_removed if result.unknown_removed.count else result.unknown_kept
        if unknown.count:
            warnings += (f"{name}: {why_unknown(unknown)}; no listed zone is lost",)
        return allow(warnings=warnings).with_notices(*told)
    if allow_zone_loss:
        zones = [*result.lost, *result.at_risk] or ["a zone"]
        risk = "drops" if not result.depends_on_unknown else "may drop"
        forced = (
            f"{name}: {result.change} {risk} {some(zones, len(zones))}; allowed "
            f'by {ALLOW_ZONE_LOSS}="true" (remove it to re-arm the guard)'
        )
        told += (notices.zone_loss_allowed(regarding, note=forced),)
        return allow(warnings=(*warnings, forced)).with_notices(*told)
    reason = "ZoneUnknown" if result.depends_on_unknown else "ZoneLoss"
    denial = _denial(result, malformed=malformed, group=group)
    refused = refuse(denial, reason=reason, warnings=warnings)
    return refused.with_notices(notices.scale_down_refused(regarding, note=denial))


def stranded(name: str, *, node: str) -> tuple[str, ...]:
    """The warning of a scale-down judged while the pod template binds every pod to ``node``,
    which does not exist ("": it binds none so): why members without a running pod hold no
    zone (:mod:`webhook.rules.locate`). The fix comes first: with long set and node names
    (a node name may have 253 characters) the API server's 256-character cut takes the end."""
    if not node:
        return ()
    return (
        f"{name}: correct or remove spec.nodeName {node} of its pod template: no such node, "
        "so its pods never run and hold no zone",
    )


def stopped(name: str, *, old: int) -> Decision:
    """Scaling to zero stops the set: allowed with a warning, whatever the zones."""
    return allow(
        warnings=(
            f"{name}: {old} -> 0 stops the set in every zone; scaling up puts each ordinal "
            "back in its zone",
        )
    )


def being_deleted(kind: str) -> str:
    """Why no replica count of a set being deleted is judged: its controller (apps/v1's, and
    kruise-manager's) only updates its status once it has a deletionTimestamp."""
    return (
        f"the {kind} is being deleted: its controller creates and deletes no pod, whatever "
        "its replicas say"
    )


def deleting(name: str, *, group: str = "") -> Decision:
    """A change of the ordinals of a set being deleted (``metadata.deletionTimestamp``):
    allowed, unjudged, as ``stszone audit`` and ``stszone explain`` leave it. Its controller
    (apps/v1's, kruise-manager's) returns before making or removing any pod once the set has a
    deletionTimestamp, so no pod goes and no claim with it; a tool tearing the set down may
    scale it to anything."""
    return allow(warnings=(f"{name}: not judged: {being_deleted(workload_kind(group))}",))
