"""``stszone explain``, the pure part: where stszone placed a member and why, and what each
smaller size of its workload would get. Pure.

For a pod: its workload and ordinal, the zone the rule gives it, the zone of its data (a bound
volume pinned to a zone wins over the rule), what its own constraints (the pod template's
nodeSelector and required node affinity) allow, where it runs (node, zone, readiness), the
audit's status, and whether it holds its zone for the scale-down guard -- and why not, when it
is going away, its zone is unknown or its pod never runs. For a workload: each member as the
audit sees it, and the answer the guard would give to a scale-down to each smaller replica
count (allowed with its warnings, or refused with the denial's message), so a person can see
which sizes are safe and why before asking for one.

Everything comes from the rules the webhook runs: :mod:`webhook.rules.audit` for the members,
:mod:`webhook.rules.locate` for the guard's facts, :mod:`webhook.rules.explain_sizes` for the
answers (the guard's own), so explain and the webhook never disagree.

The parts that depend on the kind of workload (which object owns a pod) are in
:class:`StatefulSets`; Strimzi node pools have their own (:mod:`webhook.rules.explain_pools`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from itertools import islice
from typing import Final

from webhook.errors import Denied
from webhook.model.annotations import SKIP, misspelt_warnings, unread_warnings
from webhook.model.kruise import GROUP as KRUISE
from webhook.model.records import StatefulSetInfo
from webhook.model.selection import template_selection
from webhook.model.store import Store
from webhook.rules import audit, fit
from webhook.rules.explain_sizes import SIZES, SizeAnswer, namespace_refusal, ranges, sizes
from webhook.rules.locate import SCHEDULED, Located, Locator
from webhook.rules.placement import policy_zone
from webhook.rules.policy import Policy, kruise_live, resolve_policy, walked_members, workload_kind
from webhook.rules.text import LIVE_SHOWN, live_span, ordinal_span


@dataclass(frozen=True, slots=True)
class Workload:
    """The workload a member belongs to."""

    kind: str
    namespace: str
    name: str
    mode: str
    zones: tuple[str, ...]
    replicas: int
    start: int
    #: An Advanced StatefulSet's first few live ordinals (reserveOrdinals leaves gaps); None
    #: for a set whose members are ``[start, start + replicas)``.
    live: tuple[int, ...] | None = None
    #: What its admission warns of each update (annotations its mode does not read), and its
    #: misspelt ``stszone.io/`` keys.
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Guarded:
    """What the scale-down guard counts for one member: the zone it holds (None: none), and
    in words why (or why not)."""

    zone: str | None
    why: str
    #: Where the guard counts a member that holds no zone (a going pod: its replacement's zone).
    counts: str | None = None
    #: Its pod is bound to a node that does not exist: it holds no zone, nor is it unknown.
    never_runs: bool = False


@dataclass(frozen=True, slots=True)
class Member:
    """One member: the audit's row, the rule's zone, and what the guard counts."""

    row: audit.Row
    rule_zone: str | None
    guard: Guarded


@dataclass(frozen=True, slots=True)
class PodExplanation:
    """Where stszone placed one pod and why (``left_alone``: why it does not place it)."""

    namespace: str
    name: str
    workload: Workload | None = None
    member: Member | None = None
    #: The listed zones the pod template's own constraints allow (None: it names no zone).
    allowed_zones: tuple[str, ...] | None = None
    left_alone: str = ""
    #: The template's ``spec.nodeName`` of a node the cluster lacks, its set being deleted or
    #: not (:attr:`.Locator.bound_to`; "" else): one of that name may yet join, so the zones it
    #: allows are not judged, but no pod runs. ``deleting``: its set makes no pod at all.
    missing_node: str = ""
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class WorkloadExplanation:
    """Each member, and the answer for each smaller size (``problem``: why there is none)."""

    workload: Workload
    members: tuple[Member, ...]
    sizes: tuple[SizeAnswer, ...]
    #: Smaller sizes left unjudged (more than :data:`SIZES` below the current count).
    unjudged: int = 0
    problem: str = ""
    #: ``metadata.deletionTimestamp`` is set: nobody scales it, so no size is judged.
    deleting: bool = False


class StatefulSets:
    """The per-kind part for ``apps/v1`` StatefulSets."""

    kind: Final = "StatefulSet"

    @staticmethod
    def find(store: Store, namespace: str, name: str, group: str = "") -> StatefulSetInfo | None:
        return store.statefulset(namespace, name, group)

    @staticmethod
    def owner(store: Store, namespace: str, pod: str) -> tuple[str, int] | None:
        """(set, ordinal) of a pod in the view, else of a name ``<set>-<n>`` of a set in it."""
        info = store.pod(namespace, pod)
        if info is not None:
            if info.owner is None or info.ordinal is None:
                return None
            return info.owner, info.ordinal
        head, _, tail = pod.rpartition("-")
        if tail.isascii() and tail.isdigit():
            found = store.statefulset(namespace, head) or store.statefulset(namespace, head, KRUISE)
            if found is not None:
                return head, int(tail)
        return None


def _workload(sts: StatefulSetInfo, policy: Policy | None, *, store: Store) -> Workload:
    mode = policy.declared.mode if policy is not None else "?"
    zones = policy.zones if policy is not None else ()
    # Read from replicas and reserveOrdinals, the annotations malformed (no policy) or not.
    live = kruise_live(sts, store=store) if sts.group == KRUISE else None
    return Workload(
        workload_kind(sts.group),
        sts.namespace,
        sts.name,
        mode,
        zones,
        sts.replicas,
        sts.start if live is None else live.start,
        None if live is None else tuple(islice(live, LIVE_SHOWN)),
        unread_warnings(sts.name, sts.annotations) + misspelt_warnings(sts.name, keys=sts.misspelt),
    )


def _guarded(located: Located, *, ready: bool) -> Guarded:
    zone = located.zone
    if located.source == "unknown":
        return Guarded(
            None, f"its zone is unknown ({located.detail}): a scale-down that removes it is refused"
        )
    if located.source == "replacement":
        why = f"holds no zone: {located.detail}; the guard counts it there"
        return Guarded(None, why, counts=zone)
    if located.source == "ending":  # nothing replaces it: no "there" to count it in
        return Guarded(None, f"holds no zone: {located.detail}", counts=zone)
    if located.source == "stranded":  # its pod never runs: the guard counts it nowhere
        return Guarded(None, f"holds no zone: {located.detail}", never_runs=True)
    if located.source in SCHEDULED or located.node:
        why = f"holds {zone} for the scale-down guard"
        if located.source == "volume":
            why += f" (its node has no zone label; its volume {located.detail} says)"
        if not ready:
            why += (
                f"; its node {located.node} is not Ready: a scale-down that leaves it its "
                "zone's last pod is warned about"
            )
        return Guarded(zone, why)
    where = {
        "volume": f"its volume {located.detail}",
        "claim": f"its claim {located.detail} (not bound yet: its class makes its volume there)",
        "node-label": f"node {located.detail}",
    }
    by = where.get(located.source, "the placement rule")
    return Guarded(zone, f"not running: the guard counts it in {zone}, where {by} puts it")


def _member(ordinal: int, *, policy: Policy, store: Store, where: Locator) -> Member:
    located = where(ordinal)
    row = audit.member_row(ordinal, policy=policy, store=store, where=where, located=located)
    ruled = bool(policy.zones) and policy.declared.mode != "node-ordinal"
    rule = policy_zone(ordinal, policy) if ruled else None
    return Member(row, rule, _guarded(located, ready=row.node_ready))


def _outside(member: Member, name: str, span: str, *, kind: str) -> Member:
    """A member's explanation for an ordinal outside the workload's members: its pod, if any,
    is one the controller deletes (a scale-down, a move of the start) and never replaces, so it
    is neither misplaced nor counted where a replacement would go."""
    row = member.row
    if row.status != "no pod":
        why = (
            f"ordinal {row.ordinal} is not a member now ({span}): the {kind}'s controller "
            f"deletes {name} and makes no replacement"
        )
        row = replace(row, status="going", why=why)
    outside = f"not a member now ({span}): the guard does not count it"
    return Member(row, member.rule_zone, Guarded(None, outside))


def _allowed_zones(sts: StatefulSetInfo, policy: Policy, store: Store) -> tuple[str, ...] | None:
    selection = template_selection(sts.node_terms, sts.node_selector, sts.node_name)
    if policy.declared.mode == "node-ordinal" or not selection.constrained:
        return None
    key = policy.declared.topology_key
    return tuple(fit.allowed(selection, key, policy.zones, view=store))


def explain_pod(
    store: Store, namespace: str, name: str, *, excluded: Collection[str] = ()
) -> PodExplanation | None:
    """Where ``namespace/name`` is and why; None when the view holds neither the pod nor a set
    it would belong to."""
    owned = StatefulSets.owner(store, namespace, name)
    if owned is None:
        if store.pod(namespace, name) is None:
            return None
        return PodExplanation(namespace, name, left_alone="no StatefulSet controls it")
    set_name, ordinal = owned
    held = store.pod(namespace, name)
    group = held.group if held is not None else ""
    if held is None and store.statefulset(namespace, set_name) is None:
        group = KRUISE  # a member not created yet of an Advanced StatefulSet
    sts = StatefulSets.find(store, namespace, set_name, group)
    if sts is None:
        why = f"its StatefulSet {set_name} is not in the view"
        return PodExplanation(namespace, name, left_alone=why)
    refused = namespace_refusal(store, namespace, excluded=excluded)
    if not refused and sts.template_skipped:
        refused = f"its pod template is labelled {SKIP}=true"
    try:
        policy = resolve_policy(namespace, set_name, store=store, group=group)
    except Denied as err:
        workload = _workload(sts, None, store=store)
        return PodExplanation(namespace, name, workload, left_alone=err.message)
    where = Locator(namespace=namespace, policy=policy, store=store)
    member = _member(ordinal, policy=policy, store=store, where=where)
    members = ranges(sts, sts.replicas)[0]
    live = policy.live
    span = ""
    if live is not None and ordinal not in live:
        span = live_span(list(islice(live, LIVE_SHOWN)), live.replicas)
    elif live is None and ordinal not in members:  # left over, or asked before a scale-up
        span = ordinal_span(members.start, len(members))
    if span:
        member = _outside(member, name, span, kind=policy.kind)
    return PodExplanation(
        namespace,
        name,
        _workload(sts, policy, store=store),
        member,
        _allowed_zones(sts, policy, store),
        left_alone=refused,
        missing_node=where.bound_to,
        deleting=where.ending,
    )


def explain_workload(
    store: Store, namespace: str, name: str, *, group: str = "", excluded: Collection[str] = ()
) -> WorkloadExplanation | None:
    """Each member of ``namespace/name`` (of ``group``: "" for ``apps/v1``) and the answer for
    each smaller size (in a namespace stszone never hears from, the API server's: allowed);
    None when the view does not hold it."""
    sts = StatefulSets.find(store, namespace, name, group)
    if sts is None:
        return None
    try:
        policy = resolve_policy(namespace, name, store=store, group=group)
    except Denied as err:
        if not sts.problems:
            workload = _workload(sts, None, store=store)
            return WorkloadExplanation(workload, (), (), problem=err.message)
        # Malformed annotations refuse its new pods, but a Scale cannot change them, so the
        # guard judges its scale-downs on the defaults: each size gets that answer.
        policy = resolve_policy(namespace, name, store=store, group=group, tolerate_malformed=True)
        answers = () if sts.deleting else sizes(sts, policy, store, excluded=excluded)
        unjudged = 0 if sts.deleting else max(sts.replicas - SIZES, 0)
        return WorkloadExplanation(
            _workload(sts, None, store=store), (), answers, unjudged, err.message, sts.deleting
        )
    where = Locator(namespace=namespace, policy=policy, store=store)
    members = tuple(
        _member(o, policy=policy, store=store, where=where)
        for o in walked_members(sts, store=store)
    )
    if sts.deleting:
        return WorkloadExplanation(_workload(sts, policy, store=store), members, (), deleting=True)
    answers = sizes(sts, policy, store, excluded=excluded)
    unjudged = max(sts.replicas - SIZES, 0)
    return WorkloadExplanation(_workload(sts, policy, store=store), members, answers, unjudged)
