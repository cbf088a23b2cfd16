"""Mutations of pods and StatefulSets: (object, view) -> a :class:`Decision` with its edits. Pure.

A pod is pinned by the edits of its set's mode: the zone annotation and a node requirement
(affinity mode), a scheduler name (scheduler mode), the ordinal's node label (node-ordinal
mode). Each edit says what the object must carry, not how to change it: the wire applies it to
the object as sent, so an object that already carries it (a reinvocation) gets no patch.
"""

from __future__ import annotations

from collections.abc import Callable

from webhook.config import Defaults
from webhook.errors import Denied
from webhook.model import notices, objects, setkinds
from webhook.model.annotations import (
    DEFAULT_SCHEDULER,
    DEFAULT_TOPOLOGY_KEY,
    NODE_LABEL,
    TOPOLOGY_KEY,
    ZONE,
    ZONES,
)
from webhook.model.extract import statefulset_info
from webhook.model.names import is_qualified_name
from webhook.model.notices import Notice
from webhook.model.objects import JSON
from webhook.model.podspec import required_terms
from webhook.model.selection import PodSelection, pod_selection, template_selection
from webhook.model.store import Store
from webhook.rules import affinity, fit
from webhook.rules.decision import (
    Decision,
    Edit,
    NodeRequirement,
    SchedulerName,
    ZoneAnnotation,
    ZonesAnnotation,
    allow,
    edit,
)
from webhook.rules.placement import claim_data
from webhook.rules.plan import (
    PodPlan,
    PodView,
    check_node_name,
    not_in_template,
    plan_pod,
    read_pod,
)
from webhook.rules.policy import require_synced
from webhook.rules.text import some
from webhook.rules.zonelist import zones_fix, zones_origin


def mutate_pod(
    pod: JSON, *, namespace: str, store: Store, defaults: Defaults, requester: str
) -> Decision:
    """Pin a StatefulSet pod to its ordinal's zone, by its StatefulSet's mode (``requester``:
    who sent its create, ``request.userInfo.username``)."""
    view = read_pod(pod, requester=requester)
    if view is None:
        return allow()
    plan = plan_pod(view, namespace=namespace, store=store)
    check_node_name(view, plan, namespace=namespace, store=store)
    mode = plan.policy.declared.mode
    if mode == "scheduler":
        return _scheduler_mode(view, plan, defaults=defaults, namespace=namespace)
    if mode == "node-ordinal":
        return _node_ordinal_mode(view, plan, namespace=namespace, store=store)
    return _affinity_mode(view, plan, store=store, namespace=namespace)


def _pod_name(view: PodView, plan: PodPlan) -> str:
    return view.name or f"{plan.policy.statefulset}-{plan.ordinal}"


def _pin(
    view: PodView,
    plan: PodPlan,
    *,
    namespace: str,
    store: Store,
    key: str,
    value: str,
    what: str,
    fix: str | Callable[[], str],
    reason: str = "ZoneConflict",
    zone: bool = True,
) -> NodeRequirement:
    """The requirement ``key In [value]``; Denied if the pod's own constraints rule it out.

    They are judged on the view's nodes of ``key=value`` (:mod:`webhook.rules.fit`): a pod
    whose nodeSelector, required affinity or nodeName admits none of them, but admits nodes
    elsewhere, would stay Pending for good once pinned. Where the view has no node there (a
    node pool at zero), only what they say of ``key`` itself can rule it out. ``zone``: False
    when ``key`` is a node label, not a topology key (the message then names no zone).
    ``fix``: the other way out, or what says it (asked only for a denial). Of a constraint the
    set's pod template (as the view holds it) does not hold, the denial says where it came from
    (:func:`~webhook.rules.plan.not_in_template`).
    """
    selection = pod_selection(view.spec)
    judged = fit.fit(selection, key=key, value=value, view=store, zones=zone)
    if not judged.allowed:
        fix = fix if isinstance(fix, str) else fix()
        verb = "admits no node of" if judged.by_nodes else "excludes"
        runs = f"; it would run on {judged.where(zones=zone)}" if judged.elsewhere else ""
        told = f"pod {_pod_name(view, plan)} has {judged.conflict}, which {verb} {key}={value}, "
        sts = store.statefulset(namespace, view.owner, view.group)
        template = None if sts is None else (sts.node_terms, sts.node_selector, sts.node_name)
        if (
            template is not None
            and fit.fit(
                template_selection(*template), key=key, value=value, view=store, zones=zone
            ).allowed
        ):
            ruled = _selector_rules_out(selection, key=key, value=value, store=store, zone=zone)
            origin = not_in_template(view, selector=ruled)
            raise Denied(f"{told}{what}{runs}; {origin}, or {fix}", reason=reason)
        raise Denied(
            f"{told}{what}{runs}; remove that constraint from the {plan.policy.kind}'s pod "
            f"template or {fix}",
            reason=reason,
        )
    return NodeRequirement(key, value)


def _selector_rules_out(
    selection: PodSelection, *, key: str, value: str, store: Store, zone: bool
) -> bool:
    """Whether the pod's nodeSelector takes part in ruling ``key=value`` out: it does alone,
    or the rest of its constraints (affinity, nodeName) do not without it. Only then can the
    PodNodeSelector admission plugin, which writes the nodeSelector and nothing else, have
    added what refuses the pod."""
    if not selection.selector:
        return False
    alone = PodSelection(selector=selection.selector)
    if not fit.fit(alone, key=key, value=value, view=store, zones=zone).allowed:
        return True
    rest = selection._replace(selector=())
    return fit.fit(rest, key=key, value=value, view=store, zones=zone).allowed


def _placement_notices(view: PodView, plan: PodPlan, *, namespace: str) -> tuple[Notice, ...]:
    """What a placement says as Events on the set: a pod that follows its volume away from
    its rule zone, or one whose volume can attach nowhere."""
    placement = plan.placement
    if not placement.warnings or not (placement.nowhere or placement.claim):
        return ()
    workload = notices.workload(namespace, view.owner, group=view.group, uid=view.owner_uid)
    pod = notices.pod(namespace, _pod_name(view, plan))
    note = placement.warnings[0]
    if placement.nowhere:
        return (notices.nowhere_to_run(workload, pod=pod, note=note),)
    return (notices.placed_with_data(workload, pod=pod, note=note),)


def _affinity_mode(view: PodView, plan: PodPlan, *, store: Store, namespace: str) -> Decision:
    zone = plan.placement.zone
    told = _placement_notices(view, plan, namespace=namespace)
    if not zone:  # its volume can attach nowhere: no zone to pin it to (the warning says so)
        return allow(warnings=plan.placement.warnings).with_notices(*told)
    key = plan.policy.declared.topology_key
    why = f"the zone stszone chose for ordinal {plan.ordinal}"
    if plan.placement.volume:
        why = f"the zone of its volume {plan.placement.volume}"
    elif plan.placement.claim:
        why = f"the zone of its claim {plan.placement.claim}"

    def fix() -> str:
        # Data gravity: a pod follows its data (in its rule zone or not) whatever the list says.
        policy = plan.policy
        held = plan.placement.claim or next(
            (
                c
                for c in plan.claims
                if claim_data(c, namespace=namespace, policy=policy, store=store).zones
            ),
            "",
        )
        if not held:
            return zones_fix(policy.declared, owner=f"the {policy.kind}")
        return (
            "give the ordinal a new claim (its data decides its zone, whatever "
            f"{zones_origin(policy.declared, store=store)} says; deleting claim {held} deletes "
            "that data)"
        )

    required = _pin(
        view, plan, namespace=namespace, store=store, key=key, value=zone, what=why, fix=fix
    )
    decided = edit(ZoneAnnotation(zone), required, warnings=plan.placement.warnings)
    return decided.with_notices(*told)


def _scheduler_mode(
    view: PodView, plan: PodPlan, *, defaults: Defaults, namespace: str
) -> Decision:
    told = _placement_notices(view, plan, namespace=namespace)
    if not plan.placement.zone:  # its volume can attach nowhere: no zone for the scheduler
        return allow(warnings=plan.placement.warnings).with_notices(*told)
    spec = view.spec
    current = objects.string(spec, "schedulerName", path="spec")
    wanted = plan.policy.declared.scheduler_name or defaults.scheduler_name
    warnings = plan.placement.warnings
    edits: list[Edit] = [ZoneAnnotation(plan.placement.zone)]
    if current in ("", DEFAULT_SCHEDULER):
        edits.append(SchedulerName(wanted))
    elif current != wanted:
        warnings += (
            f"pod {_pod_name(view, plan)} asks for scheduler {current!r}; stszone leaves it "
            f"and only records {ZONE}={plan.placement.zone} for it",
        )
    return edit(*edits, warnings=warnings).with_notices(*told)


def _node_ordinal_mode(view: PodView, plan: PodPlan, *, namespace: str, store: Store) -> Decision:
    """Pin ordinal N to the node labelled ``<stszone.io/node-label>=N`` (one broker per machine).

    The requirement goes into every nodeSelectorTerm, like the zone in affinity mode. The rule's
    zone plays no part: the node decides the zone, recorded when its node(s) agree on one. The
    scheduler's failure modes become admission warnings: no such node (Pending forever),
    several (the pod may flap between them), a node in a zone the pod or its volume rules out.
    """
    # Node-ordinal mode without stszone.io/node-label is refused as malformed: the label is set.
    label = plan.policy.declared.node_label or ""  # pragma: no mutate (never empty here)
    key = plan.policy.declared.topology_key
    value, name = str(plan.ordinal), _pod_name(view, plan)
    edits: list[Edit] = [
        _pin(
            view,
            plan,
            namespace=namespace,
            store=store,
            key=label,
            value=value,
            what=f"the node label of ordinal {value}",
            fix=f"change its {NODE_LABEL}",
            reason="NodeConflict",
            zone=False,
        )
    ]
    nodes = store.nodes_with_label(label, value)
    warnings: tuple[str, ...]
    if not nodes and "nodes" in store.loaded:  # no node view at all (--zones only): unknown
        warnings = (
            f"no node carries {label}={value}; {name} will stay Pending until one does "
            f"(kubectl label node NODE {label}={value})",
        )
    elif len(nodes) > 1:
        warnings = (
            f"{name} may land on any of nodes {some(nodes, len(nodes))} (all carry "
            f"{label}={value}); keep one node per value",
        )
    else:
        warnings = ()
    zones = sorted(store.zones_of(nodes, key))
    if plan.placement.zone:  # the node(s) share one zone: record it
        zone = plan.placement.zone
        edits.insert(0, ZoneAnnotation(zone))
        conflict = affinity.exclusion(view.spec, key, zone, terms=required_terms(view.spec))
        if conflict is not None:
            own = conflict.removeprefix("required nodeAffinity ")
            warnings += (
                f"{name} stays Pending: node {label}={value} is in {zone}; its own: {own}",
            )
    for claim in plan.claims if nodes else ():
        volume, at = store.claim_zones(namespace, claim, key)
        # A volume that attaches to no node of a known zone may still attach to these nodes
        # when none of them has a zone: only with a zone known is it sure to be out of reach.
        if at is None and zones:
            warnings += (f"{name} stays Pending: {store.volume_nowhere(volume, key)}",)
        elif at and not at & set(zones):
            # A node without the zone label never matches a volume pinned to a zone.
            where = f"in {', '.join(zones)}" if zones else f"has no {key} label"
            warnings += (
                f"{name} stays Pending: its volume {volume} is in {', '.join(sorted(at))}, "
                f"node {label}={value} {where}",
            )
    return edit(*edits, warnings=warnings)


def server_zones_for(
    annotations: dict[str, str], *, store: Store, what: str, retried_by: str
) -> tuple[str, tuple[str, ...]]:
    """The topology key a new workload declares (the default when absent or invalid: the
    validating webhook refuses an invalid one) and the server's zones on it. Raises
    :class:`Denied`, for retry, while a live view has not listed the nodes: an empty node view
    is no zone list (``retried_by``: who retries the refused request, as the refusal tells it)."""
    key = annotations.get(TOPOLOGY_KEY, DEFAULT_TOPOLOGY_KEY)
    key = key if is_qualified_name(key) else DEFAULT_TOPOLOGY_KEY
    from_nodes = key != DEFAULT_TOPOLOGY_KEY or not store.zones_override
    if from_nodes and "nodes" in store.unsynced():
        require_synced(store, what=f"the zones of {what}", retried_by=retried_by)
    return key, store.server_zones(key)


def mutate_statefulset(sts: JSON, *, store: Store, group: str = "") -> Decision:
    """On CREATE, fill ``stszone.io/zones`` from the server's zone source when it is missing
    (``group``: the set's group key, ``apps.kruise.io`` for an Advanced StatefulSet).

    ``--zones`` lists values of the default topology key; a set with its own
    ``stszone.io/topology-key`` gets the values nodes carry under that key (sorted), and none
    (with a warning) when no node carries it yet. Only the zones the pod template's own
    nodeSelector / required affinity allow are written: a set pinned to two zones by its
    template gets those two, in the server's order.
    """
    meta = objects.mapping(sts, "metadata")
    annotations = objects.str_map(meta, "annotations", path="metadata")
    if ZONES in annotations:
        return allow()
    name = objects.string(meta, "name") or "(unnamed)"
    kind = setkinds.KINDS[group]
    # A set's creation is sent by a person or a tool, not by its controller: none is named.
    key, zones = server_zones_for(
        annotations, store=store, what=f"{kind.text} {name}", retried_by=""
    )
    if not zones:
        if key == DEFAULT_TOPOLOGY_KEY:
            text = f"{name}: no zones known (no --zones, no node with {key}); set {ZONES}"
        else:
            text = f"{name}: no node carries {key} yet, so {ZONES} is left unset; set it"
        return allow(warnings=(text,))
    warnings: tuple[str, ...] = ()
    if key != DEFAULT_TOPOLOGY_KEY and store.zones_override:
        warnings = (
            f"{name}: {ZONES} from the nodes' {key} values (--zones is for {DEFAULT_TOPOLOGY_KEY})",
        )
    # generateName'd sets arrive unnamed; only the template is read from this record, so its
    # name is a placeholder.
    named = {**meta, "name": meta.get("name") or "unnamed"}  # pragma: no mutate (never read)
    info = statefulset_info({**sts, "metadata": named})
    selection = template_selection(info.node_terms, info.node_selector, info.node_name)
    allowed = tuple(fit.allowed(selection, key, zones, view=store))
    if not allowed:
        text = f"{name}: its pod template rules out every zone ({','.join(zones)}); {ZONES} unset"
        return allow(warnings=(*warnings, text))
    if allowed != zones:
        warnings += (f"{name}: {ZONES} set to {','.join(allowed)}, the zones its template allows",)
    return edit(ZonesAnnotation(allowed), warnings=warnings)
