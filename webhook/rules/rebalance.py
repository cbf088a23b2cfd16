"""The plan of ``stszone rebalance``: which misplaced ordinals move, in what order, and why not.

Pure: it reads the same facts as the scale-down guard and the audit (where each ordinal is, from
:class:`~webhook.rules.locate.Locator`; what pins it, from
:func:`~webhook.rules.pinned.volume_zones`) plus the health the one-shot command lists
(:class:`~webhook.model.state.LiveState`). Each member whose pod runs outside its rule zone
(``zones[(i - start) mod k]`` for ordinal ``i`` of an ``apps/v1`` StatefulSet; for an OpenKruise
Advanced StatefulSet, ``zones[rank mod k]`` among its live ordinals,
:func:`~webhook.rules.placement.policy_zone`) is

- **movable**: no bound volume holds it elsewhere; moving it = evicting its pod, the set's
  controller re-creates it under the same name (both controllers do: a live ordinal without a
  pod gets one) and the webhook places it in its rule zone;
- **pinned by data**: a volume bound to one of its claims is in another zone; it moves only
  with ``--move-data``, which deletes its claims with the pod (that replica's data is gone);
- **blocked**: it cannot move now, with the reasons (zone unknown, its pod bound by the
  template to a node that does not exist, set not fully Ready, rollout under way, no node that
  could take it in the rule zone, a claim its pod owns, or the order below).

Order. One pod of a set at a time, and never the last pod of a listed zone while the rule puts
another ordinal there: that ordinal moves in first. Among the moves allowed at each point, one
that brings a zone back comes first, then the lowest ordinal. Moves left waiting on each other
(every zone's only pod must leave for another's) are blocked with the way out: scale up first.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace

from webhook.errors import Denied
from webhook.model.records import StatefulSetInfo
from webhook.model.state import LiveState
from webhook.model.store import Store
from webhook.rules.auditscope import audited
from webhook.rules.blockers import owned_claims, set_blockers, some, unplanned, zone_blocker
from webhook.rules.locate import Locator
from webhook.rules.pinned import volume_zones
from webhook.rules.placement import claim_name, policy_zone
from webhook.rules.policy import Policy, resolve_policy, walked_members
from webhook.rules.rebalance_plan import Claim, Kind, Plan, Row, SetPlan, Step


@dataclass(frozen=True, slots=True)
class _Set:
    """What classifying the ordinals of one set reads, gathered once."""

    sts: StatefulSetInfo
    policy: Policy
    store: Store
    state: LiveState
    where: Locator
    #: Reasons no ordinal of the set may move now.
    blockers: tuple[str, ...]
    move_data: bool
    #: Zone -> why no node there can take a pod ("" when one can), filled as zones come up.
    homes: dict[str, str]


@dataclass(slots=True)
class _Draft:
    row: Row
    moves: bool
    uid: str = ""
    #: The zone its pod runs in, when it is one to move (its row's zone, never None then).
    source: str = ""


def _claims(
    ordinal: int, *, sts: StatefulSetInfo, policy: Policy, store: Store, state: LiveState
) -> tuple[Claim, ...]:
    """The claims of ``ordinal`` that ``--move-data`` deletes (those that exist)."""
    found: list[Claim] = []
    for template in policy.templates:
        name = claim_name(template, sts.name, ordinal)
        claim = state.claims.get((sts.namespace, name))
        # The store and the state are read from one list, so a claim in the state is in both.
        bound = store.claims.get((sts.namespace, name))
        if claim is not None:
            volume = bound.volume if bound is not None else ""  # pragma: no mutate (never None)
            found.append(Claim(name, claim.uid, volume))
    return tuple(found)


def _draft(ordinal: int, ctx: _Set) -> _Draft:
    sts, policy, store, state = ctx.sts, ctx.policy, ctx.store, ctx.state
    target = policy_zone(ordinal, policy)
    name = f"{sts.name}-{ordinal}"
    pod = store.set_pods(sts.namespace, sts.name, sts.group).by_name.get(ordinal)
    live = state.pods.get((sts.namespace, name))
    node = pod.node if pod is not None else ""
    located = ctx.where(ordinal)
    if node and located.zone is None:
        # A scheduled pod is where its node (or its own label, or its volume) is: the rule never
        # answers for it, so without those its zone is unknown (the locator says why). Bound by
        # the template to a missing node, its replacement would never run: the detail says so.
        said = "" if located.source == "stranded" else "its zone is unknown: "
        why = f"{said}{located.detail}"
        return _Draft(Row(ordinal, name, node, None, target, "blocked", notes=(why,)), False)
    zone = located.zone if node or located.source in ("volume", "claim") else None
    if zone is None or zone == target:
        return _Draft(Row(ordinal, name, node, zone, target, "in place"), False)
    found = volume_zones(
        ctx.where.claims(ordinal), namespace=sts.namespace, policy=policy, store=store
    )
    allowed = found.zones
    pinned = bool(allowed) and target not in allowed
    notes: list[str] = []
    claims: tuple[Claim, ...] = ()
    reasons = list(ctx.blockers)
    if found.nowhere:  # the re-created pod could not run anywhere
        reasons.append(f"its {found.nowhere}: a re-created pod would stay Pending")
    if pinned:
        several = len(found.names) + len(found.claims) > 1
        notes.append(f"its {found.what} {'are' if several else 'is'} in {some(sorted(allowed))}")
        claims = _claims(ordinal, sts=sts, policy=policy, store=store, state=state)
    else:
        reasons += owned_claims(ordinal, sts=sts, policy=policy, state=state)
    if target not in ctx.homes:
        home = zone_blocker(target, sts=sts, policy=policy, store=store, state=state)
        ctx.homes[target] = home or ""
    if ctx.homes[target]:
        reasons.append(ctx.homes[target])
    kind: Kind = "blocked" if reasons else ("pinned by data" if pinned else "movable")
    if pinned and not ctx.move_data and not reasons:
        notes.append("it moves only with --move-data, which deletes its data")
    if pinned and ctx.move_data and not reasons:
        lost = ", ".join(c.name for c in claims) or "(none found)"
        notes.append(
            f"--move-data deletes claim(s) {lost} with the pod: the data on this replica is "
            "gone and the database must re-replicate it"
        )
        kept = [c.volume for c in claims if c.volume and state.reclaim.get(c.volume) == "Retain"]
        if kept:
            notes.append(f"volume(s) {', '.join(kept)} stay (reclaim policy Retain): delete later")
    moves = not reasons and (not pinned or ctx.move_data)
    if moves and (info := state.workload(sts.namespace, sts.name, sts.group)) and info.outdated:
        notes.append(f"OnDelete, {info.outdated} pod(s) not updated: the new pod takes the update")
    row = Row(ordinal, name, node, zone, target, kind, notes=(*reasons, *notes), claims=claims)
    uid = live.uid if live is not None else ""  # pragma: no mutate (a missing pod blocks its set)
    return _Draft(row, moves, uid, source=zone)


def _order(
    drafts: list[_Draft], *, policy: Policy, name: str
) -> list[tuple[_Draft, tuple[int, ...]]]:
    """The moves in a coverage-preserving order, each with the ordinals keeping its source
    zone held meanwhile; the moves left are marked blocked in place."""
    holders: dict[str, set[int]] = {}
    by_rule: dict[str, set[int]] = {}
    for draft in drafts:
        row = draft.row
        if row.zone is not None and row.node:
            holders.setdefault(row.zone, set()).add(row.ordinal)
        by_rule.setdefault(row.target, set()).add(row.ordinal)

    def may_leave(draft: _Draft) -> bool:
        zone, ordinal = draft.source, draft.row.ordinal
        if zone not in policy.zones or holders.get(zone, set()) - {ordinal}:
            return True
        return not (by_rule.get(zone, set()) - {ordinal})  # the rule puts nobody else there

    waiting = [d for d in drafts if d.moves]
    ordered: list[tuple[_Draft, tuple[int, ...]]] = []
    while waiting:
        allowed = [d for d in waiting if may_leave(d)]
        if not allowed:
            break
        pick = min(allowed, key=lambda d: (bool(holders.get(d.row.target)), d.row.ordinal))
        waiting.remove(pick)
        source = holders[pick.source]
        source.discard(pick.row.ordinal)
        company = tuple(sorted(source)) if pick.source in policy.zones else ()
        ordered.append((pick, company))
        holders.setdefault(pick.row.target, set()).add(pick.row.ordinal)
    stuck = {d.row.ordinal for d in waiting}
    for draft in waiting:
        zone = draft.source
        others = sorted(by_rule.get(zone, set()))
        why = (
            f"it is the only pod in {zone}: evicting it would leave {zone} empty until "
            f"ordinal(s) {some(map(str, others))} move there"
        )
        if stuck & set(others):
            why += (
                f", and they wait for the same reason; scale {name} up by "
                f"{len(policy.zones)} first (the new ordinals hold every zone), run rebalance "
                "again, then scale back"
            )
        else:
            why += ", which cannot move now (see their rows)"
        draft.row = replace(draft.row, kind="blocked", notes=(why, *draft.row.notes))
    return ordered


def plan_set(sts: StatefulSetInfo, *, store: Store, state: LiveState, move_data: bool) -> SetPlan:
    """The plan of one set (an ``apps/v1`` StatefulSet or an Advanced StatefulSet: its
    members are its live ordinals, each placed by its rank)."""
    empty = SetPlan(sts.namespace, sts.name, (), sts.replicas, group=sts.group)
    try:
        policy = resolve_policy(sts.namespace, sts.name, store=store, group=sts.group)
    except Denied as err:
        return replace(empty, problem=err.message)
    empty = replace(empty, zones=policy.zones)
    if note := unplanned(sts, policy):
        return replace(empty, note=note)
    if not policy.zones:
        key = policy.declared.topology_key
        why = f"no zone list: no stszone.io/zones on it, no --zones, and no node labelled {key}"
        return replace(empty, problem=why)
    ordinals = walked_members(sts, store=store)
    pods = store.set_pods(sts.namespace, sts.name, sts.group).by_name
    gone = {
        f"{sts.name}-{o}": pod.node
        for o in ordinals
        if (pod := pods.get(o)) is not None and store.node_gone(pod.node)
    }
    ctx = _Set(
        sts=sts,
        policy=policy,
        store=store,
        state=state,
        where=Locator(namespace=sts.namespace, policy=policy, store=store),
        blockers=tuple(set_blockers(sts, state, ordinals, gone=gone)),
        move_data=move_data,
        homes={},
    )
    drafts = [_draft(o, ctx) for o in ordinals]
    steps: list[Step] = []
    for number, (draft, company) in enumerate(_order(drafts, policy=policy, name=sts.name), 1):
        row = draft.row = replace(draft.row, step=number)
        steps.append(
            Step(
                namespace=sts.namespace,
                statefulset=sts.name,
                ordinal=row.ordinal,
                pod=row.pod,
                uid=draft.uid,
                node=row.node,
                source=draft.source,
                target=row.target,
                topology_key=policy.declared.topology_key,
                replicas=sts.replicas,
                claims=row.claims,
                company=company,
                group=sts.group,
                set_uid=sts.uid,
                start=policy.start,
                spec_start=sts.start,
                reserved=sts.reserved,
            )
        )
    return replace(empty, rows=tuple(d.row for d in drafts), steps=tuple(steps))


def plan(
    store: Store,
    state: LiveState,
    *,
    sets: Iterable[StatefulSetInfo],
    move_data: bool = False,
) -> Plan:
    """The plan for ``sets`` (see :func:`chosen` for which)."""
    return Plan(
        sets=tuple(plan_set(s, store=store, state=state, move_data=move_data) for s in sets),
        move_data=move_data,
    )


def chosen(
    store: Store,
    *,
    excluded: Collection[str] = (),
    namespace: str | None = None,
    statefulset: tuple[str, str] | None = None,
) -> list[StatefulSetInfo]:
    """The sets to plan: the audit's (opted-in, never kube-system or stszone's own namespace),
    narrowed to ``namespace`` or to one ``statefulset`` (namespace, name)."""
    if statefulset is not None:
        namespace = statefulset[0]  # pragma: no mutate (only narrows the sets the key filters)
    sets = audited(store, excluded=excluded, namespace=namespace)
    return [s for s in sets if statefulset is None or s.key == statefulset]
