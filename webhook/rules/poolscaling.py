"""KafkaNodePool scale-downs by either path: UPDATE of the pool, and ``kafkanodepools/scale``. Pure.

- ``/validate`` of an UPDATE judges the IDs the operator will remove with the object as
  written (its ``spec.replicas`` and ``strimzi.io/remove-node-ids``, against its
  ``status.nodeIds``): a listed zone left empty is refused, naming the brokers and the zone.
- ``/mutate`` of an UPDATE that lowers ``spec.replicas`` and names no brokers writes
  ``strimzi.io/remove-node-ids`` with the balanced choice when it is more even than the
  operator's default order (nothing when the default is as even), and says so in a warning.
  An annotation that is there is never rewritten; the same request always gets the same
  answer, so a reinvocation and a dry run agree with the real request.
- A ``/scale`` request carries a Scale, not the pool: its annotations cannot be written. One
  whose default order drops a zone is refused with the ``kubectl annotate`` that makes it
  balanced; one that keeps every zone is allowed, with a warning when a more balanced choice
  existed.
- A scale to zero, by either path, removes every broker: allowed with warnings, whatever the
  zones, as a StatefulSet's is (:func:`_emptied`).
- Any other ``/scale``, up or down, is told what an UPDATE setting the same ``spec.replicas``
  is told of the count (:func:`_scale_spread`), as a StatefulSet's ``/scale`` is.

The pool's ``stszone.io/*`` annotations are checked here too, on CREATE and on an UPDATE that
changes them, and warned of on one that leaves them malformed (:func:`pool_annotation_problems`),
read as every path reads them (:func:`webhook.rules.poolzones.pool_annotations`); CREATE and
UPDATE are warned, as a StatefulSet's are, of fewer replicas than zones and of a listed zone
with no node (:func:`pool_spread_warnings`), except at zero brokers (an UPDATE to zero is
warned as its ``/scale`` is). A request reads them once (:func:`written`): the check, the guard
and the warnings then judge one policy.
"""

from __future__ import annotations

from typing import NamedTuple

from webhook.errors import BadObject
from webhook.model import notices, objects
from webhook.model.annotations import ALLOW_ZONE_LOSS, Declared, prefixed_annotations
from webhook.model.nodepools import (
    REMOVE_NODE_IDS,
    KafkaNodePoolInfo,
    format_node_ids,
    nodepool_info,
)
from webhook.model.notices import ObjectRef
from webhook.model.objects import JSON
from webhook.model.store import Store
from webhook.model.tables import POOL_TABLES
from webhook.rules.decision import Decision, MetadataAnnotation, allow, edit, refuse
from webhook.rules.policy import SCALES_RETRIED_BY, require_synced
from webhook.rules.poolguard import (
    Removal,
    annotate_command,
    balanced,
    brokers,
    denial,
    imbalance,
    judge,
    order_for,
    override,
)
from webhook.rules.poolzones import (
    PoolPolicy,
    members,
    policy_of,
    pool_annotations,
    pool_policy,
)
from webhook.rules.scaling import malformed_warning
from webhook.rules.zonelist import spread_warnings, zone_list


class Written(NamedTuple):
    """A pool's annotations as the request writes them, and the policy they declare, read
    once (:func:`written`) for every check of the request: the annotations' problems, the
    guard, the spread warnings."""

    annotations: dict[str, str]
    #: The policy (the defaults when malformed) and its problems (:func:`pool_annotations`).
    declared: Declared
    problems: tuple[str, ...]


def written(obj: JSON, *, store: Store) -> Written:
    """Read the ``stszone.io/*`` annotations of the pool ``obj`` as every path reads them."""
    annotations = objects.str_map(objects.mapping(obj, "metadata"), "annotations", path="metadata")
    declared, problems = pool_annotations(annotations, store=store)
    return Written(annotations, declared, problems)


def _as_written(obj: JSON, *, old: JSON, namespace: str, store: Store, read: Written) -> PoolPolicy:
    """The pool as the request writes it (``read``: its annotations), with the brokers it has:
    ``old``'s ``status.nodeIds``.

    The status stored by an UPDATE of the pool itself is always the old one (the CRD has a
    status subresource: the API server copies it in after the mutating webhooks). A PUT need not
    carry it at all, so the object as sent says nothing reliable of the brokers.
    """
    info = nodepool_info(obj)
    require_synced(
        store,
        what=f"KafkaNodePool {namespace}/{info.name}",
        also=POOL_TABLES,
        retried_by="",  # an UPDATE of the pool is sent by a person or a tool, not the operator
    )
    base = store.nodepool(namespace, info.name) or info
    pool = KafkaNodePoolInfo(
        namespace=namespace,
        name=info.name,
        uid=info.uid,
        # The version the view reads it at (the request's may be another one it serves).
        api_version=base.api_version or info.api_version,
        cluster=info.cluster or base.cluster,
        # With any misspelt key, which the record drops but the check of the update reads.
        annotations={**info.annotations, **prefixed_annotations(read.annotations)},
        replicas=info.replicas,
        node_ids=nodepool_info(old).node_ids,
        claim_prefixes=info.claim_prefixes or base.claim_prefixes,
    )
    # Malformed annotations are refused by /validate unless left as they were: the guard then
    # runs on the defaults.
    return policy_of(pool, store=store, read=(read.declared, read.problems))


def _replicas(obj: JSON) -> int:
    value = objects.mapping(obj, "spec").get("replicas", 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadObject("spec.replicas must be an integer")
    return value


def _regarding(policy: PoolPolicy) -> ObjectRef:
    pool = policy.pool
    return notices.kafkanodepool(
        pool.namespace, pool.name, uid=pool.uid, api_version=pool.api_version
    )


def _verdict(policy: PoolPolicy, result: Removal, *, change: str, fix: str = "") -> Decision:
    """Refuse a scale-down that drops (or may drop) a listed zone, unless the pool allows it
    (then warn); a refusal and a forced loss are notices (Events) on the pool too."""
    if not result.refused:
        return allow()
    if policy.declared.allow_zone_loss:
        zones = ", ".join([*result.lost, *result.at_risk])
        forced = (
            f"{policy.pool.name}: {change} {'drops' if result.lost else 'may drop'} "
            f'{zones}; allowed by {ALLOW_ZONE_LOSS}="true" (remove it to re-arm the guard)'
        )
        told = notices.zone_loss_allowed(_regarding(policy), note=forced)
        return allow(warnings=(forced,)).with_notices(told)
    reason = "ZoneLoss" if result.lost else "ZoneUnknown"
    message = f"{denial(policy, result, change=change)}; {fix or override(policy)}"
    told = notices.scale_down_refused(_regarding(policy), note=message)
    return refuse(message, reason=reason).with_notices(told)


def pool_annotation_problems(obj: JSON, *, read: Written, old: JSON | None) -> Decision | None:
    """Refuse malformed ``stszone.io/*`` annotations (``read``, of ``obj``) on a pool's CREATE,
    or an UPDATE that changes any ``stszone.io/`` key (a misspelt one too); allow one leaving
    them as they were with a warning, whatever else it changes, as for StatefulSets (its new
    brokers are refused until they are fixed); None when they are fine. A storage-class
    template is filled in for every zone it will get."""
    problems = read.problems
    if not problems:
        return None
    name = objects.string(objects.mapping(obj, "metadata"), "name") or "(unnamed)"
    if old is not None:
        before = objects.str_map(objects.mapping(old, "metadata"), "annotations")
        if prefixed_annotations(before) == prefixed_annotations(read.annotations):
            said = malformed_warning(name, problems, by="update", kind="KafkaNodePool")
            return allow(warnings=(said,))
    return refuse(f"KafkaNodePool {name}: {'; '.join(problems)}", code=422, reason="Invalid")


def validate_pool_update(obj: JSON, *, old: JSON, namespace: str, store: Store) -> Decision:
    """Judge the IDs the operator will remove with the pool as written."""
    read = written(obj, store=store)
    checked = pool_annotation_problems(obj, read=read, old=old)
    if checked is not None and not checked.allowed:
        return checked
    judged = _judge_update(obj, old=old, namespace=namespace, store=store, read=read)
    said = checked.warnings if checked is not None else ()
    return judged.with_warnings(said + pool_spread_warnings(obj, read=read, old=old, store=store))


def pool_spread_warnings(
    obj: JSON, *, read: Written, old: JSON | None, store: Store
) -> tuple[str, ...]:
    """A StatefulSet's warnings of the pool as written (fewer replicas than zones, a listed
    zone with no node: any, as where its brokers are does not follow from its count), on its
    annotations as every path reads them (``read``); none while it is deleted, when the
    operator creates no broker, nor at zero brokers, created so or scaled there (an UPDATE to
    zero is warned as its ``/scale`` to zero is, :func:`_emptied`): no broker is in a zone
    (:func:`~webhook.rules.zonelist.spread_warnings`)."""
    if old is not None and objects.mapping(old, "metadata").get("deletionTimestamp"):
        return ()
    name = objects.string(objects.mapping(obj, "metadata"), "name") or "(unnamed)"
    zones = zone_list(read.declared, store=store)
    return spread_warnings(name, _replicas(obj), read.declared, zones, store=store, ranked=False)


def _judge_update(obj: JSON, *, old: JSON, namespace: str, store: Store, read: Written) -> Decision:
    new_replicas, old_replicas = _replicas(obj), _replicas(old)
    annotation = read.annotations.get(REMOVE_NODE_IDS)
    before = objects.str_map(objects.mapping(old, "metadata"), "annotations").get(REMOVE_NODE_IDS)
    if new_replicas >= old_replicas and annotation == before:
        return allow()
    if new_replicas <= 0 < old_replicas:
        if objects.mapping(old, "metadata").get("deletionTimestamp"):
            return allow()  # torn down: the operator creates and removes no broker
        return _emptied(nodepool_info(obj).name, old=old_replicas)
    policy = _as_written(obj, old=old, namespace=namespace, store=store, read=read)
    if not policy.pool.node_ids:
        return allow()
    removed = order_for(policy, new_replicas, annotation)
    if not removed or new_replicas <= 0:
        return allow()
    where = members(namespace, policy, store=store)
    change = f"scale-down from {len(policy.pool.node_ids)} to {new_replicas}"
    result = judge(policy, where, removed)
    fix = ""
    if result.refused and all(where.get(i) is not None for i in policy.pool.node_ids):
        # The update can name other brokers itself (stszone writes its choice only where the
        # update names none): say which keep every zone, when some do.
        chosen = balanced(policy.pool.node_ids, where, len(removed))
        if not judge(policy, where, chosen).refused:
            fix = (
                f"name brokers that keep every zone in the same update: {REMOVE_NODE_IDS}: "
                f"'{format_node_ids(chosen)}', or {override(policy)}"
            )
    return _verdict(policy, result, change=change, fix=fix)


def mutate_pool_update(obj: JSON, *, old: JSON, namespace: str, store: Store) -> Decision:
    """Write ``remove-node-ids`` with the balanced choice on a scale-down naming no brokers.

    Also where an UPDATE drops the annotation while the scale-down is still pending (a person,
    or a tool replacing the whole object): the same choice is written again, so such a tool
    and stszone never fight.
    """
    annotations = objects.str_map(objects.mapping(obj, "metadata"), "annotations")
    had = REMOVE_NODE_IDS in objects.str_map(objects.mapping(old, "metadata"), "annotations")
    new_replicas = _replicas(obj)
    lowered = new_replicas < _replicas(old) or had
    if REMOVE_NODE_IDS in annotations or not lowered or new_replicas <= 0:
        return allow()
    read = written(obj, store=store)
    policy = _as_written(obj, old=old, namespace=namespace, store=store, read=read)
    node_ids = policy.pool.node_ids
    if not node_ids or new_replicas >= len(node_ids):
        return allow()
    where = members(namespace, policy, store=store)
    if any(where.get(i) is None for i in node_ids):
        return allow()  # facts only: no choice while a broker's zone is unknown
    default = order_for(policy, new_replicas, None)
    chosen = balanced(node_ids, where, len(default))
    if _score(policy, where, chosen) >= _score(policy, where, default):
        return allow()
    kept = [i for i in node_ids if i not in chosen]
    return edit(
        MetadataAnnotation(REMOVE_NODE_IDS, format_node_ids(chosen)),
        warnings=(
            f"{policy.pool.name}: stszone set {REMOVE_NODE_IDS}={format_node_ids(chosen)}: "
            f"removes {brokers(policy, chosen, where)} from the fullest zones, keeping "
            f"{_zone_counts(policy, where, kept)} (the highest IDs would keep "
            f"{_zone_counts(policy, where, [i for i in node_ids if i not in default])})",
        ),
    )


def _score(
    policy: PoolPolicy, where: dict[int, str | None], removed: tuple[int, ...]
) -> tuple[int, int]:
    """(listed zones lost, imbalance) of the brokers kept: lower is better."""
    node_ids = policy.pool.node_ids or ()
    gone = set(removed)
    kept = [i for i in node_ids if i not in gone]
    lost = len(judge(policy, where, removed).lost)
    return lost, imbalance(policy.zones, where, kept)


def _zone_counts(policy: PoolPolicy, where: dict[int, str | None], kept: list[int]) -> str:
    """How many of the brokers ``kept`` each listed zone holds, e.g. ``zone-a:2 zone-b:1``."""
    found = dict.fromkeys(policy.zones, 0)
    for i in kept:
        zone = where.get(i)
        if zone is not None:
            found[zone] = found.get(zone, 0) + 1
    return " ".join(f"{z}:{n}" for z, n in found.items())


def validate_pool_scale(
    scale: JSON, *, old: JSON, name: str, namespace: str, store: Store
) -> Decision:
    """A ``kafkanodepools/scale`` UPDATE, judged with the pool as the view holds it."""
    new_replicas = _replicas(scale)
    if old:
        old_replicas = _replicas(old)
    else:  # an UPDATE always carries oldObject; a hand-written review may not
        held = store.nodepool(namespace, name)
        old_replicas = held.replicas if held is not None else new_replicas
    if new_replicas >= old_replicas:
        return _scale_spread(store.nodepool(namespace, name), new_replicas, store=store)
    if new_replicas <= 0:
        held = store.nodepool(namespace, name)
        # A Scale carries none of the pool's labels: the objectSelector cannot skip its /scale.
        return allow() if held is not None and held.skipped else _emptied(name, old=old_replicas)
    # A Scale cannot change the pool's annotations: malformed ones give a warning, and the
    # guard runs on the defaults, as for a StatefulSet's /scale.
    policy = pool_policy(
        namespace, name, store=store, tolerate_malformed=True, retried_by=SCALES_RETRIED_BY
    )
    # A Scale carries none of the pool's labels: the objectSelector cannot skip its /scale.
    if policy is None or policy.pool.skipped:
        return allow()
    node_ids = policy.pool.node_ids
    if not node_ids:  # not reconciled yet: the operator removes no broker
        return _scale_spread(policy.pool, new_replicas, store=store)
    annotation = policy.pool.annotations.get(REMOVE_NODE_IDS)
    removed = order_for(policy, new_replicas, annotation)
    if not removed:
        return _scale_spread(policy.pool, new_replicas, store=store)
    where = members(namespace, policy, store=store)
    change = f"scale-down from {len(node_ids)} to {new_replicas}"
    result = judge(policy, where, removed)
    known = all(where.get(i) is not None for i in node_ids)
    chosen = balanced(node_ids, where, len(removed)) if known else removed
    # One naming no ID the pool holds (left by an earlier scale-down) changes no removal.
    inert = annotation is None or order_for(policy, 0, annotation) == order_for(policy, 0, None)
    better = inert and _score(policy, where, chosen) < _score(policy, where, removed)
    fix = ""
    if better and not judge(policy, where, chosen).refused:
        fix = (
            f"name the brokers that keep every zone first: {annotate_command(policy, chosen)} "
            f"(then scale again), or {override(policy)}"
        )
    decided = _verdict(policy, result, change=change, fix=fix)
    said = spread_warnings(
        name, new_replicas, policy.declared, policy.zones, store=store, ranked=False
    )
    if better and not result.refused:
        decided = decided.with_warnings(
            (
                f"{name}: removes {brokers(policy, removed, where)}; "
                f"{brokers(policy, chosen, where)} would keep the zones more even: "
                f"{annotate_command(policy, chosen)}",
            )
        )
    return decided.with_warnings(_malformed(policy, by="scale") + said)


def _scale_spread(pool: KafkaNodePoolInfo | None, replicas: int, *, store: Store) -> Decision:
    """A ``/scale`` that removes no broker: no guard, so nothing about its brokers is looked up;
    its malformed annotations said (its new brokers are refused until they are fixed) and the
    count's warnings, as an UPDATE of the pool to ``replicas`` gets them
    (:func:`pool_spread_warnings`). Nothing of a pool the view lacks, nor of one labelled skip."""
    if pool is None or pool.skipped:
        return allow()
    declared, problems = pool_annotations(pool.annotations, store=store)
    said: tuple[str, ...] = ()
    if problems:
        said = (malformed_warning(pool.name, problems, by="scale", kind="KafkaNodePool"),)
    zones = zone_list(declared, store=store)
    spread = spread_warnings(pool.name, replicas, declared, zones, store=store, ranked=False)
    return allow(warnings=said + spread)


def _emptied(name: str, *, old: int) -> Decision:
    """Scaling a pool to zero removes all its brokers: allowed with warnings, whatever the
    zones, as a StatefulSet scaled to zero is. The Kafka cluster runs on in its other pools
    (the operator refuses a cluster whose pools all have zero replicas), and the operator
    removes no broker that still hosts partition replicas unless its check is skipped. Two
    warnings, since one saying all this is longer than WARNING_MAX and would be cut."""
    return allow(
        warnings=(
            f"{name}: {old} -> 0 removes every broker of the pool, in every zone: the Kafka "
            "cluster keeps only the brokers of its other pools; scaled up again, each broker "
            "goes to its data, else where the pool has fewest",
            f"{name}: Strimzi removes no broker still hosting partition replicas unless the "
            "Kafka sets strimzi.io/skip-broker-scaledown-check",
        )
    )


def _malformed(policy: PoolPolicy, *, by: str) -> tuple[str, ...]:
    """The warning of a scale-down judged on the defaults: the pool's annotations are
    malformed and left as they were."""
    if not policy.malformed:
        return ()
    return (malformed_warning(policy.pool.name, policy.malformed, by=by, kind="KafkaNodePool"),)
