"""``stszone audit``, the pure part: expected vs actual placement of every audited StatefulSet.

For each StatefulSet in an opted-in namespace (every StatefulSet when the view holds no
Namespace objects) and each ordinal in ``[start, start + replicas)``: the zone stszone expects
(the rule, or the volume's zone; in node-ordinal mode the node(s) carrying the ordinal's label),
the node and zone its pod really has (located as the scale-down guard locates it: the node's
label, else the pod's own label, else its volume), and a status -- ``ok``, ``MISPLACED``
(running outside what is expected), ``pending`` (no node yet), ``no pod``, ``going`` (its pod
is Terminating, Failed or Succeeded, or on a node that no longer exists: the ordinal counts
where its replacement goes, and the reason says where), ``unknown`` (a zone is not known,
with the reason), or ``skipped`` (its set's pod template is labelled ``stszone.io/skip=true``:
stszone places none of its pods, so none is expected anywhere, and none is misplaced). A pod
on a node that is not Ready is marked: it still holds its zone, but maybe not for long. Also
the zones the set holds now and the lowest replica count the scale-down guard would allow
(unknown zones included; none for a set being deleted, which nobody scales), and, in
node-ordinal mode, ordinal label values no node or several nodes carry.

Removable nodes, and why each other node is not, are computed by :mod:`webhook.rules.removal`,
weighing the audited KafkaNodePools (:mod:`webhook.rules.poolaudit`) too. A report has
*problems* -- the CLI exits 1 -- when a pod is misplaced, a node-ordinal label is missing or
duplicated, a StatefulSet's annotations are malformed, or its pod template binds its pods to a
node that does not exist (:func:`~webhook.rules.locate.missing_node`): each leaves pods that
never run or run in the wrong place. The misplaced pods, node-ordinal labels and malformed
annotations of a set being deleted are shown but are no problem: nothing moves its pods
(``stszone rebalance`` refuses such a set) nor places new ones (its controller creates none),
they go with it.
"""

from __future__ import annotations

from collections.abc import Collection, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from webhook.errors import Denied
from webhook.model.annotations import SKIP, misspelt_warnings, unread_warnings
from webhook.model.kruise import Live
from webhook.model.records import StatefulSetInfo
from webhook.model.setkinds import KINDS
from webhook.model.store import Store
from webhook.rules import guard, kruiseguard, removal
from webhook.rules.auditscope import audited, audited_pools, audits, scope
from webhook.rules.locate import Located, Locator, missing_node
from webhook.rules.placement import place_by_mode
from webhook.rules.policy import Policy, kruise_live, resolve_policy, walked_members, workload_kind

Status = Literal["ok", "MISPLACED", "pending", "no pod", "going", "unknown", "skipped"]

#: What sets the expectation of a member whose pod template is labelled ``stszone.io/skip``.
SKIPPED_BY: Final = f"{SKIP}=true on the pod template"


@dataclass(frozen=True, slots=True)
class Row:
    """One ordinal: where stszone expects it and where its pod is."""

    ordinal: int
    expected_zone: str | None
    #: What sets the expectation: "rule", "volume NAME", "claim NAME" (not bound yet, in the
    #: zone recorded on it), "nodes N1, N2" (node-ordinal), or "".
    expected_by: str
    node: str
    zone: str | None
    status: Status
    #: Why the status is ``unknown`` ("node n7 has no label topology.kubernetes.io/zone"),
    #: where a ``going`` pod's replacement goes ("db-0 is Terminating on node n1 in zone-c;
    #: its replacement goes to zone-a"), or why a pod, ``going`` or ``no pod``, never runs.
    why: str = ""
    #: False when its pod runs on a node that is not Ready (NotReady, Unknown, or tainted so).
    node_ready: bool = True


@dataclass(frozen=True, slots=True)
class SetReport:
    """The audit of one StatefulSet."""

    namespace: str
    name: str
    mode: str
    zones: tuple[str, ...]
    replicas: int
    start: int
    rows: tuple[Row, ...]
    #: Zones the ordinals hold now (pod, else volume, else rule: as the guard sees them).
    held: tuple[str, ...]
    #: Lowest replica count the scale-down guard allows (unknown zones included).
    lowest: int | None
    #: Ordinals whose zone the guard cannot tell (a refused scale-down may hinge on them).
    unknown: tuple[int, ...] = ()
    #: node-ordinal mode: ordinals no node is labelled for, and values on several nodes.
    missing_labels: tuple[int, ...] = ()
    duplicate_labels: Mapping[int, tuple[str, ...]] | None = None
    #: Malformed annotations and other reasons this set cannot be placed.
    problem: str = ""
    #: The workload's group: "" for ``apps/v1``, ``apps.kruise.io`` for an Advanced StatefulSet.
    group: str = ""
    #: Its pod template is labelled ``stszone.io/skip=true``: stszone places none of its pods.
    skipped: bool = False
    #: What its admission warns of each update (annotations its mode does not read), and its
    #: misspelt ``stszone.io/`` keys.
    warnings: tuple[str, ...] = ()
    #: ``metadata.deletionTimestamp`` is set: nobody scales it, so no count is judged.
    deleting: bool = False
    #: The members walked (:func:`walked_members`), its annotations malformed or not.
    members: Sequence[int] = ()
    #: The node its pod template binds every pod to when that node does not exist ("" else).
    missing_node: str = ""

    @property
    def kind(self) -> str:
        """``StatefulSet`` or ``Advanced StatefulSet``."""
        return workload_kind(self.group)

    @property
    def misplaced(self) -> int:
        """Number of pods running outside their expected zone (or node)."""
        return sum(row.status == "MISPLACED" for row in self.rows)

    @property
    def misplaced_problems(self) -> int:
        """The misplaced pods that are a problem: none of a set being deleted (they go with it,
        nothing moves them)."""
        return 0 if self.deleting else self.misplaced

    @property
    def has_problems(self) -> bool:
        """Misplaced pods, missing or duplicated node labels, malformed annotations, or a
        template bound to a missing node (none of them of a set being deleted: its pods go with
        it, nothing moves them or places new ones, so no annotation or label of it is read
        again)."""
        if self.deleting:
            return False
        labels = self.missing_labels or self.duplicate_labels
        return bool(self.problem or self.misplaced or labels or self.missing_node)


@dataclass(frozen=True, slots=True)
class Report:
    """The whole audit."""

    sets: tuple[SetReport, ...]
    #: True when the view knows no namespaces, so every StatefulSet was audited.
    all_namespaces: bool
    removable: tuple[str, ...]
    removable_together: tuple[str, ...]
    #: StatefulSets of the audit's scope in namespaces stszone never intercepts.
    left_out: int = 0
    #: Each node not removable alone, with what removing it would cost each workload.
    unremovable: tuple[tuple[str, tuple[removal.Blocked, ...]], ...] = ()

    @property
    def has_problems(self) -> bool:
        """Whether ``stszone audit`` exits 1."""
        return any(s.has_problems for s in self.sets)


def _expectation(
    ordinal: int, policy: Policy, store: Store, namespace: str, *, claims: tuple[str, ...]
) -> tuple[str | None, str, tuple[str, ...]]:
    """(expected zone, what sets it, nodes pinned in node-ordinal mode)."""
    placement = place_by_mode(
        ordinal, namespace=namespace, policy=policy, store=store, claims=claims
    )
    if policy.declared.mode == "node-ordinal":
        nodes = store.nodes_with_label(policy.declared.node_label or "", str(ordinal))
        what = f"nodes {', '.join(nodes)}" if nodes else "no node labelled"
        return placement.zone or None, what, nodes
    if placement.nowhere:
        return None, f"volume {placement.volume} (attaches nowhere)", ()
    if placement.volume:
        return placement.zone, f"volume {placement.volume}", ()
    # A claim with no volume yet, recorded in a zone its class makes the volume in.
    return placement.zone, f"claim {placement.claim}" if placement.claim else "rule", ()


def member_row(
    ordinal: int, *, policy: Policy, store: Store, where: Locator, located: Located
) -> Row:
    """The audit's row of ``ordinal``, ``located`` by ``where`` (``stszone explain`` shows it)."""
    namespace = where.namespace
    held = store.statefulset(namespace, policy.statefulset, policy.group)
    left_alone = held is not None and held.template_skipped
    pinned: tuple[str, ...] = ()
    if left_alone:  # the objectSelector keeps its pods from stszone: none is expected anywhere
        expected, by = None, SKIPPED_BY
    else:
        try:
            claims = where.claims(ordinal)
            expected, by, pinned = _expectation(ordinal, policy, store, namespace, claims=claims)
        except Denied as err:
            expected, by, pinned = None, err.message, ()
    pod = store.pod(namespace, f"{policy.statefulset}-{ordinal}")
    if pod is None or pod.owner != policy.statefulset or pod.group != policy.group:
        # Bound to a missing node by the template, the pod it gets never runs: say so.
        why = located.detail if located.source == "stranded" else ""
        return Row(ordinal, expected, by, "", None, "no pod", why)
    if pod.going or store.node_gone(pod.node):  # the guard counts it where its replacement goes
        return Row(ordinal, expected, by, pod.node, where.sits(pod), "going", located.detail)
    if not pod.node:
        return Row(ordinal, expected, by, "", None, "pending")
    zone = located.zone  # the guard's own facts: node label, pod label, volume
    status: Status
    why = ""
    if left_alone:
        status, why = ("skipped", "") if zone is not None else ("unknown", located.detail)
    elif policy.declared.mode == "node-ordinal":
        status = "ok" if pod.node in pinned else "MISPLACED"
    elif zone is None or expected is None:
        status = "unknown"
        why = located.detail if zone is None else "no expected zone"
    else:
        status = "ok" if zone == expected else "MISPLACED"
    node = store.nodes.get(pod.node)
    ready = node is None or node.ready
    return Row(ordinal, expected, by, pod.node, zone, status, why, node_ready=ready)


#: Ordinals :func:`audit_steps` visits between pauses (about 0.1 ms of work each).
PAUSE_EVERY: Final = 16

#: What :func:`audit_steps` is: pauses (``None``), then the report as its return value.
AuditSteps = Generator[None, None, "SetReport"]


def audit_set(sts: StatefulSetInfo, *, store: Store) -> SetReport:
    """The audit of one StatefulSet (a malformed one gets a ``problem`` and no rows)."""
    return finish(audit_steps(sts, store=store))


def finish(steps: AuditSteps) -> SetReport:
    """Run :func:`audit_steps` through its pauses; its report."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def audit_steps(sts: StatefulSetInfo, *, store: Store, every: int = PAUSE_EVERY) -> AuditSteps:
    """:func:`audit_set` in slices: pauses (yields) before each slice of ``every`` ordinals it
    visits one by one, and returns the report.

    A caller on an event loop answers requests at each pause, so a set holds the loop for one
    slice at a time; the longest hold is the first, with the set's policy and the guard's answer
    for the lowest safe count (one call, bounded by the set's objects in the view, as for a
    scale-down request of that set). The view may change at a pause: the policy and the lowest
    count are then those at the start, each row is of the view at its own slice, and the next
    refresh sees the change whole.
    """
    warnings = unread_warnings(sts.name, sts.annotations)
    warnings += misspelt_warnings(sts.name, keys=sts.misspelt)
    ordinals = walked_members(sts, store=store)
    try:
        policy = resolve_policy(sts.namespace, sts.name, store=store, group=sts.group)
    except Denied as err:
        # No policy gives the start: the members' own, as a well-formed set's report has it
        # (an Advanced StatefulSet's spec.ordinals.start counts only with the gate).
        live = KINDS[sts.group].live_ordinals
        start = kruise_live(sts, store=store).start if live else sts.start
        return SetReport(
            group=sts.group,
            namespace=sts.namespace,
            name=sts.name,
            mode="?",
            zones=(),
            replicas=sts.replicas,
            start=start,
            rows=(),
            held=(),
            lowest=None,
            problem=err.message,
            warnings=warnings,
            deleting=sts.deleting,
            members=ordinals,
        )
    # The lowest count is the guard's own answer for a scale-down to zero replicas, so the
    # audit and the guard agree on every cluster; a set being deleted is scaled by nobody.
    lowest = None if sts.deleting else _lowest(sts, policy=policy, store=store)
    node_ordinal = policy.declared.mode == "node-ordinal"
    label = policy.declared.node_label or ""
    rows: list[Row] = []
    unknown: list[int] = []
    held: set[str] = set()
    pinned: dict[int, tuple[str, ...]] = {}
    step = max(every, 1)
    for first in range(0, len(ordinals), step):
        yield
        # A Locator per slice: it holds the set's pods as the view has them now.
        where = Locator(namespace=sts.namespace, policy=policy, store=store)
        for o in ordinals[first : first + step]:
            at = where(o)
            if at.source == "unknown":
                unknown.append(o)
            elif at.zone is not None:  # none when bound to a missing node ("stranded")
                held.add(at.zone)
            rows.append(member_row(o, policy=policy, store=store, where=where, located=at))
            if node_ordinal:
                pinned[o] = store.nodes_with_label(label, str(o))
    missing = tuple(o for o, nodes in pinned.items() if not nodes)
    duplicate = {o: nodes for o, nodes in pinned.items() if len(nodes) > 1}
    return SetReport(
        group=sts.group,
        namespace=sts.namespace,
        name=sts.name,
        mode=policy.declared.mode,
        zones=policy.zones,
        replicas=sts.replicas,
        start=policy.start,  # an Advanced StatefulSet's spec.ordinals.start may not count
        rows=tuple(rows),
        held=tuple(sorted(held)),
        lowest=lowest,
        unknown=tuple(unknown),
        missing_labels=missing,
        duplicate_labels=duplicate or None,
        skipped=sts.template_skipped,
        warnings=warnings,
        deleting=sts.deleting,
        members=ordinals,
        missing_node=missing_node(sts.namespace, policy=policy, store=store),
    )


def _lowest(sts: StatefulSetInfo, *, policy: Policy, store: Store) -> int | None:
    """The guard's own answer for a scale-down to zero, so the audit and the guard agree."""
    if KINDS[sts.group].live_ordinals:
        live = policy.live or Live(replicas=0)
        empty = live.resized(0)
        compared = kruiseguard.compare(
            sts.name,
            before=live,
            after=empty,
            namespace=sts.namespace,
            old_policy=policy,
            new_policy=policy._replace(live=empty),
            store=store,
        )
        return compared.lowest if compared is not None else None
    everything = range(sts.start, sts.start + sts.replicas)
    return guard.scale_down(
        sts.name,
        old=everything,
        new=range(sts.start, sts.start),
        namespace=sts.namespace,
        policy=policy,
        store=store,
    ).lowest


def audit(store: Store, *, excluded: Collection[str] = (), namespace: str | None = None) -> Report:
    """Audit every opted-in StatefulSet of ``store`` (or of one namespace) and find the nodes
    that can be removed: those always weigh every opted-in set and KafkaNodePool, whatever
    ``namespace`` says, since draining a node affects them all."""
    sets = audited(store, excluded=excluded, namespace=namespace)
    everywhere = sets if namespace is None else audited(store, excluded=excluded)
    pools = audited_pools(store, excluded=excluded)
    nodes = removal.removable_nodes(store, everywhere, pools)
    return Report(
        sets=tuple(audit_set(s, store=store) for s in sets),
        all_namespaces=store.namespace_enabled("") is None,
        removable=nodes.alone,
        removable_together=nodes.together,
        unremovable=nodes.blocked,
        left_out=sum(not audits(store, s, excluded=excluded) for s in scope(store, namespace)),
    )
