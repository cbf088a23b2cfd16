"""Validation of StatefulSets: annotations, template, zone list; the guard's entry point. Pure.

A StatefulSet UPDATE is judged as written: its policy (zones, mode, ``allow-zone-loss``) comes
from the new object, so ``kubectl apply`` of a manifest that both lowers ``replicas`` and sets
``stszone.io/allow-zone-loss: "true"`` is one deliberate act and is allowed with a warning, the
way one GitOps commit is one update. The ``statefulsets/scale`` path is in
:mod:`webhook.rules.scaling`; the final state of a pod in :mod:`webhook.rules.podcheck`.
"""

from __future__ import annotations

from webhook.errors import Denied
from webhook.model import notices, objects
from webhook.model.annotations import (
    MODE,
    TOPOLOGY_KEY,
    ZONES,
    Declared,
    InvalidAnnotations,
    parse_annotations,
    prefixed_annotations,
    template_problems,
    unread_warnings,
)
from webhook.model.extract import statefulset_info
from webhook.model.objects import JSON
from webhook.model.records import StatefulSetInfo
from webhook.model.selection import template_selection
from webhook.model.setkinds import KINDS
from webhook.model.store import Store
from webhook.model.tables import set_info
from webhook.rules import affinity, fit, scaling, verdict
from webhook.rules.decision import Decision, allow, refuse
from webhook.rules.ordinals import removed
from webhook.rules.placement import place_by_mode
from webhook.rules.plan import skipped
from webhook.rules.policy import Policy, kruise_live, walked_members, workload_kind
from webhook.rules.text import some
from webhook.rules.zonelist import spread_warnings, zone_list, zones_origin

#: What :func:`declared_policy` makes of a set's annotations.
DeclaredPolicy = tuple[Declared | None, str, tuple[str, ...]]


def declared_policy(
    annotations: dict[str, str], *, name: str, old: JSON | None, store: Store, group: str
) -> DeclaredPolicy:
    """(policy, a ratchet warning or "", the problems the defaults stand in for) of the
    annotations, or (None, the refusal, the problems).

    Checked as the API server will check what stszone writes from them: a storage-class
    template is filled in for every zone the set will use, its own list or the server's.
    """
    problems: list[str] = []
    try:
        declared: Declared | None = parse_annotations(annotations)
    except InvalidAnnotations as err:
        declared, problems = None, err.problems
    template = declared.storage_class_template if declared is not None else None
    if declared is not None and declared.zones is None and template is not None:
        zones = store.server_zones(declared.topology_key)
        problems = [f"{p} (the server's zones)" for p in template_problems(template, zones=zones)]
    if not problems:
        return declared, "", ()
    if not _unchanged(old, annotations=annotations):
        refusal = f"{workload_kind(group)} {name}: {'; '.join(problems)}"
        return None, refusal, tuple(problems)
    # Ratchet, like the API server's own validation: an update that leaves broken annotations
    # as they were (a status write, an image bump) is not blocked by them; the set's new pods
    # are refused until they are fixed, and the guard runs on defaults.
    said = scaling.malformed_warning(name, problems, by="update", kind=workload_kind(group))
    return Declared(), said, tuple(problems)


def validate_statefulset(
    sts: JSON,
    *,
    old: JSON | None,
    namespace: str,
    store: Store,
    group: str = "",
    read: DeclaredPolicy | None = None,
) -> Decision:
    """Check a StatefulSet CREATE (``old`` None) or UPDATE; of ``group`` ``apps.kruise.io``,
    an Advanced StatefulSet, whose members are placed by rank over its live ordinals.
    ``read``: :func:`declared_policy` of its annotations, when the caller has read them.

    Denied: malformed ``stszone.io/*`` annotations; a pod template whose own nodeSelector,
    required node affinity or ``spec.nodeName`` excludes listed zones (or, in node-ordinal
    mode, ordinal labels);
    a scale-down that drops a zone. Warned: fewer replicas than zones; a listed zone with no
    node (a node pool at zero, say) that a member goes to, neither of a set of zero replicas,
    created so or scaled there (an UPDATE to zero is warned as its ``/scale`` is); a changed
    zone list.
    """
    meta = objects.mapping(sts, "metadata")
    name = objects.string(meta, "name") or "(unnamed)"
    annotations = objects.str_map(meta, "annotations", path="metadata")
    declared, said, malformed = (
        read
        if read is not None
        else declared_policy(annotations, name=name, old=old, store=store, group=group)
    )
    if declared is None:
        return refuse(said, code=422, reason="Invalid")
    warnings: tuple[str, ...] = (said,) if said else ()
    warnings += unread_warnings(name, annotations)
    # A generateName'd set may reach validation unnamed; the checks below only print the name.
    info = set_info({**sts, "metadata": {**meta, "name": name}}, group)
    live = kruise_live(info, store=store) if KINDS[group].live_ordinals else None
    policy = Policy(
        statefulset=info.name,
        declared=declared,
        zones=zone_list(declared, store=store),
        start=info.start if live is None else live.start,
        templates=info.templates,
        known=True,
        group=group,
        live=live,
        malformed=malformed,
    )
    before = statefulset_info(old) if old is not None else None
    # A set being deleted (the old object's: no update removes a deletionTimestamp) is torn
    # down and gets no new pod: that its template excludes a zone, its count leaves a zone
    # empty, its pods wait for a node in a zone, or its zone list moves members, tells its
    # owner nothing.
    ending = before is not None and before.deleting
    # A template labelled skip gets no zone from stszone: its constraints contradict nothing.
    left_alone = ending or _template_skipped(sts)
    excluded = None if left_alone else _template_exclusion(info, policy, store=store)
    if excluded is not None:
        if not _unchanged(old, annotations=annotations, template=info):
            return refuse(excluded, reason="ZoneConflict")
        warnings += (f"{excluded} (unchanged by this update)",)
    if declared.mode != "node-ordinal" and not ending:
        warnings += spread_warnings(
            name, info.replicas, declared, policy.zones, store=store, ranked=True
        )
    if old is None or before is None:
        return allow(warnings=warnings)
    uid = objects.string(meta, "uid", path="metadata")
    changes, moving = (
        ((), "")
        if ending
        else _zone_list_change(
            info, policy, old=old, before=before, namespace=namespace, store=store
        )
    )
    warnings += changes
    regarding = notices.workload(namespace, name, group=group, uid=uid)
    told = (notices.members_moved(regarding, note=moving),) if moving else ()
    # A move of spec.ordinals.start removes the ordinals below the new start (and at or above
    # the new start + replicas), whatever replicas does: the guard checks them alike.
    old_range = range(before.start, before.start + before.replicas)
    new_range = range(info.start, info.start + info.replicas)
    if not removed(old_range, new_range):
        return allow(warnings=warnings).with_notices(*told)  # no ordinal removed: no lookups
    if ending:
        return verdict.deleting(name).with_warnings(warnings).with_notices(*told)
    outcome = scaling.judge(
        name,
        old=old_range,
        new=new_range,
        namespace=namespace,
        policy=policy,
        store=store,
        allow_zone_loss=declared.allow_zone_loss,
        retried_by="",  # an UPDATE of the set is a person's or a tool's: the HPA writes /scale
        sts=info,
        uid=uid,
    )
    return outcome.with_warnings(warnings).with_notices(*told)


def _unchanged(
    old: JSON | None, *, annotations: dict[str, str], template: StatefulSetInfo | None = None
) -> bool:
    """Whether an UPDATE keeps the stszone annotations (and the template's node constraints)."""
    if not old:
        return False
    old_meta = objects.mapping(old, "metadata")
    old_annotations = objects.str_map(old_meta, "annotations", path="oldObject.metadata")
    if prefixed_annotations(old_annotations) != prefixed_annotations(annotations):
        return False
    if template is None:
        return True
    before = statefulset_info(old)
    return (before.node_terms, before.node_selector, before.node_name) == (
        template.node_terms,
        template.node_selector,
        template.node_name,
    )


def _template_skipped(sts: JSON) -> bool:
    template = objects.mapping(objects.mapping(sts, "spec"), "template", path="spec")
    meta = objects.mapping(template, "metadata", path="spec.template")
    return skipped(objects.str_map(meta, "labels", path="spec.template.metadata"))


def _template_exclusion(info: StatefulSetInfo, policy: Policy, *, store: Store) -> str | None:
    """Why the pod template itself rules out some zones (or pinned ordinals), or None."""
    declared = policy.declared
    if declared.mode == "node-ordinal":
        key = declared.node_label or ""  # pragma: no mutate (never empty here)
        if not affinity.constrains(info.node_terms, info.node_selector, key):
            return None  # the usual case: nothing in the template mentions the ordinal label
        values = [str(o) for o in walked_members(info, store=store)]
    else:
        key, values = declared.topology_key, list(policy.zones)
    # Judged on the view's nodes of each value (webhook.rules.fit), by its name alone where
    # the view has none there.
    selection = template_selection(info.node_terms, info.node_selector, info.node_name)
    zones = key == declared.topology_key  # node-ordinal's key is a node label, no zone
    judged = [fit.fit(selection, key=key, value=v, view=store, zones=zones) for v in values]
    excluded = [j.value for j in judged if not j.allowed]
    if not excluded:
        return None
    allowed = [j.value for j in judged if j.allowed]
    first = next(j for j in judged if not j.allowed)
    why = first.conflict
    # A spec.nodeName conflict already names its node's zone, the only place its pods run.
    if first.elsewhere and not info.node_name:
        why += f" (its pods would run on {first.where(zones=zones)})"
    if declared.mode == "node-ordinal":
        return (
            f"{policy.kind} {info.name}: its pod template's {why} excludes {key} value(s) "
            f"{', '.join(excluded)}, so those ordinals could never run on the nodes pinned to "
            "them; remove that constraint from spec.template"
        )
    fix = f"remove that constraint from spec.template or list only the zones it allows in {ZONES}"
    if allowed:
        fix += f', e.g. {ZONES}: "{",".join(allowed)}"'
    listed = f"{zones_origin(declared, store=store)} ({','.join(policy.zones)})"
    return (
        f"{policy.kind} {info.name}: its pod template's {why} excludes zone(s) "
        f"{', '.join(excluded)} of {listed}, so the ordinals stszone places there could never "
        f"be scheduled; {fix}"
    )


def _zone_list_change(
    info: StatefulSetInfo,
    policy: Policy,
    *,
    old: JSON,
    before: StatefulSetInfo,
    namespace: str,
    store: Store,
) -> tuple[tuple[str, ...], str]:
    """(a warning listing the ordinals whose zone a changed ``stszone.io/zones`` or a moved
    ``spec.ordinals.start`` moves: both change ``zones[(i - start) mod k]``; so does a switch
    into or out of node-ordinal mode, where the labelled nodes place each ordinal instead. A
    move of the start names only the ordinals the set had before (the others are new); the
    warning that says members move, or "" when none does)."""
    if not (before.replicas and info.replicas):
        return (), ""  # no member before (each new one starts in its zone) or none after
    # An Advanced StatefulSet's ordinals are judged in webhook.rules.kruise: equal here.
    start = before.start if policy.live is None else policy.start
    old_annotations = objects.str_map(objects.mapping(old, "metadata"), "annotations")
    try:
        old_declared: Declared = parse_annotations(old_annotations)
    except InvalidAnnotations:
        return (), ""  # the old list was unusable: nothing was placed by it
    old_zones = zone_list(old_declared, store=store)
    by_nodes = (old_declared.mode == "node-ordinal", policy.declared.mode == "node-ordinal")
    if all(by_nodes) or not ((policy.zones or by_nodes[1]) and (old_zones or by_nodes[0])):
        return (), ""  # zones pin nothing in node-ordinal mode; with no list, nothing was placed
    key, old_key = policy.declared.topology_key, old_declared.topology_key
    if key != old_key and by_nodes[1]:
        return (), ""  # the labelled nodes place every ordinal, whatever the key reads
    if key != old_key:
        # Zone names under two labels name different places: no ordinal-by-ordinal comparison.
        relabelled = (
            f"{info.name}: new {TOPOLOGY_KEY} {key} places every ordinal by its node's {key} "
            f"label when re-created (was {old_key}); `stszone rebalance` can move its "
            "existing pods"
        )
        return (relabelled,), relabelled
    # A list read in node-ordinal mode placed nothing: only the switch of mode moves members.
    zones_changed = old_zones != policy.zones and not any(by_nodes)
    mode_changed = by_nodes[0] != by_nodes[1]
    if not (zones_changed or mode_changed) and start == policy.start:
        return (), ""
    before_policy = policy._replace(declared=old_declared, zones=old_zones, start=start)
    moved: list[str] = []
    stay: list[str] = []
    ordinals = walked_members(info, store=store)
    checked = len(ordinals)
    existed = range(start, start + before.replicas)
    for ordinal in ordinals:
        if start != policy.start and ordinal not in existed:
            continue
        try:
            after = place_by_mode(ordinal, namespace=namespace, policy=policy, store=store)
            was = place_by_mode(ordinal, namespace=namespace, policy=before_policy, store=store)
        except Denied:
            continue  # no zones before, or conflicting volumes: reported where it matters
        if any(by_nodes) and "" in (was.zone, after.zone):
            continue  # no labelled node, or nodes in several zones: no zone to compare
        if was.zone != after.zone:
            moved.append(f"{ordinal} ({was.zone}->{after.zone})")
        elif after.volume and was.rule_zone != after.rule_zone:
            stay.append(f"{ordinal} ({after.zone}, {after.volume})")
    if not zones_changed and not (moved or stay):
        return (), ""  # ordinals.start moved by a multiple of the zone count: no zone changes
    count = len(moved)
    scope = "" if checked == info.replicas else f" of the first {checked}"
    moves = f": {some(moved, count, shown=count if count <= 2 else 1)}" if moved else ""
    what = [ZONES] if zones_changed else []
    if mode_changed:
        what.append(f"{MODE} {policy.declared.mode}")
    if start != policy.start:
        what.append(f"spec.ordinals.start {policy.start}")
    verb = "moves" if len(what) == 1 else "move"
    warnings: tuple[str, ...] = (
        f"{info.name}: new {' and '.join(what)} {verb} {count} ordinal(s){scope} when "
        f"re-created{moves}",
    )
    if start != policy.start and moved:
        warnings += (f"{info.name}: `stszone rebalance` can move its existing pods to their zones",)
    if stay:
        warnings += (
            f"{info.name}: ordinal(s) {some(stay, len(stay), shown=2)} stay with their volumes",
        )
    return warnings, warnings[0] if moved else ""
