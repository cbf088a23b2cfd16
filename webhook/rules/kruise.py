"""Admission of OpenKruise Advanced StatefulSets (``apps.kruise.io`` StatefulSet). Pure.

The set itself is checked as an ``apps/v1`` StatefulSet is (its ``stszone.io/*`` annotations,
its pod template against the zones, the warnings), by :func:`validate.validate_statefulset`
with the ordinals left alone; what removes members is judged here, by the live ordinal sets
before and after (:mod:`webhook.rules.kruiseguard`): a ``replicas`` decrease (UPDATE, or the
``statefulsets/scale`` subresource) and any change of ``reserveOrdinals`` (or, with
``--kruise-start-ordinal``, of ``spec.ordinals.start``).

``v1alpha1`` has no ``reserveOrdinals`` in its schema: an UPDATE through it stores the set
without them (both objects of the review lack them), so its "before" is the set as the view
holds it (read through ``v1beta1``) and its "after" reserves nothing, as the controller will.
"""

from __future__ import annotations

from webhook.model import kruise, notices, objects
from webhook.model.annotations import Declared
from webhook.model.extract import kruise_set_info
from webhook.model.kruise import Live
from webhook.model.objects import JSON
from webhook.model.records import StatefulSetInfo
from webhook.model.store import Store
from webhook.rules import kruiseguard, retention, verdict
from webhook.rules import validate as validations
from webhook.rules.decision import Decision, allow
from webhook.rules.policy import (
    SCALES_RETRIED_BY,
    Policy,
    kruise_live,
    require_synced,
    resolve_policy,
)
from webhook.rules.scaling import count_warnings, malformed_warning, scale_up
from webhook.rules.zonelist import zone_list, zones_origin


def _policy(
    info: StatefulSetInfo,
    declared: Declared,
    live: Live,
    *,
    store: Store,
    malformed: tuple[str, ...] = (),
) -> Policy:
    return Policy(
        statefulset=info.name,
        declared=declared,
        zones=zone_list(declared, store=store),
        start=live.start,
        templates=info.templates,
        known=True,
        group=kruise.GROUP,
        live=live,
        malformed=malformed,
    )


def _same_ordinals(old: JSON, new: JSON) -> JSON:
    """``old`` with the new object's replicas and ordinals: the ``apps/v1`` checks then judge
    the annotations and template only, never the ordinals (judged here instead)."""
    spec = dict(objects.mapping(old, "spec"))
    new_spec = objects.mapping(new, "spec")
    for key in ("replicas", "ordinals"):
        if key in new_spec:
            spec[key] = new_spec[key]
        else:
            spec.pop(key, None)
    return {**old, "spec": spec}


def _unreadable_warning(name: str, info: StatefulSetInfo) -> tuple[str, ...]:
    if info.reserve_ok:
        return ()
    return (
        f"{name}: spec.reserveOrdinals holds an entry the Kruise controller cannot read "
        '(integers and "a-b" ranges only), so it ignores the whole list: no ordinal is reserved',
    )


def validate_kruise_set(sts: JSON, *, old: JSON | None, namespace: str, store: Store) -> Decision:
    """Check an Advanced StatefulSet CREATE (``old`` None) or UPDATE."""
    base_old = _same_ordinals(old, sts) if old is not None else None
    meta = objects.mapping(sts, "metadata")
    name = objects.string(meta, "name") or "(unnamed)"
    annotations = objects.str_map(meta, "annotations", path="metadata")
    # One read for the base check and the guard: while the annotations are malformed (a
    # misspelt key, a storage class template that fails for the server's zones) and left as
    # they were, both run on the defaults.
    read = validations.declared_policy(
        annotations, name=name, old=base_old, store=store, group=kruise.GROUP
    )
    base = validations.validate_statefulset(
        sts, old=base_old, namespace=namespace, store=store, group=kruise.GROUP, read=read
    )
    info = kruise_set_info({**sts, "metadata": {**meta, "name": name}})
    base = base.with_warnings(_unreadable_warning(name, info))
    if not base.allowed or old is None:
        return base
    before_info = kruise_set_info(old)
    deleting = before_info.deleting  # the old object's: no update removes a deletionTimestamp
    held = store.statefulset(namespace, name, kruise.GROUP)
    if objects.string(old, "apiVersion").endswith("/v1alpha1") and held is not None:
        before_info = held  # v1alpha1 shows no reserveOrdinals; the view read them
    before, after = kruise_live(before_info, store=store), kruise_live(info, store=store)
    same = (before.reserved, before.start) == (after.reserved, after.start)
    if same and after.replicas >= before.replicas:
        return base  # nothing removed: no lookups
    if deleting:
        told = verdict.deleting(name, group=kruise.GROUP)
        return told.with_warnings(base.warnings).with_notices(*base.notices)
    declared, _, malformed = read
    assert declared is not None  # the base check refused what is not allowed
    label = "" if same else _label(before, after)
    outcome = judge_live(
        name,
        before=before,
        after=after,
        namespace=namespace,
        old_policy=_policy(before_info, declared, before, store=store, malformed=malformed),
        new_policy=_policy(info, declared, after, store=store, malformed=malformed),
        store=store,
        retried_by="",  # an UPDATE of the set is a person's or a tool's: the HPA writes /scale
        label=label,
        uid=objects.string(meta, "uid", path="metadata"),
        sts=info,
    )
    return outcome.with_warnings(base.warnings).with_notices(*base.notices)


def _label(before: Live, after: Live) -> str:
    parts = []
    if before.reserved != after.reserved:
        was, now = (
            kruiseguard.describe_reserve(before.reserved),
            kruiseguard.describe_reserve(after.reserved),
        )
        parts.append(f"reserveOrdinals {was} -> {now}")
    if before.start != after.start:
        parts.append(f"ordinals.start {before.start} -> {after.start}")
    if before.replicas != after.replicas:
        parts.append(f"replicas {before.replicas} -> {after.replicas}")
    return ", ".join(parts)


def judge_live(
    name: str,
    *,
    before: Live,
    after: Live,
    namespace: str,
    old_policy: Policy,
    new_policy: Policy,
    store: Store,
    retried_by: str,
    label: str = "",
    uid: str = "",
    sts: StatefulSetInfo | None = None,
) -> Decision:
    """The verdict on going from the live set ``before`` to ``after``; ``retried_by``: who
    sends the request again after a refusal for retry (an HPA for a ``/scale``, nobody for an
    UPDATE of the set); ``sts``: the set as it will be, whose claims an allowed answer says go
    with the removed members."""
    regarding = notices.workload(namespace, name, group=kruise.GROUP, uid=uid)
    if not after.replicas:
        outcome = verdict.stopped(name, old=before.replicas)
    else:
        require_synced(
            store,
            what=f"a change of Advanced StatefulSet {namespace}/{name}",
            also=("kruisesets",),
            retried_by=retried_by,
        )
        result = kruiseguard.compare(
            name,
            before=before,
            after=after,
            namespace=namespace,
            old_policy=old_policy,
            new_policy=new_policy,
            store=store,
            label=label,
        )
        if result is None:
            return allow(
                warnings=(
                    f"{name}: over {kruiseguard.LIMIT} members; stszone does not judge this change",
                )
            )
        outcome = verdict.verdict(
            result,
            allow_zone_loss=new_policy.declared.allow_zone_loss,
            regarding=regarding,
            malformed=new_policy.malformed,
            origin=zones_origin(new_policy.declared, store=store),
            group=kruise.GROUP,
        ).with_warnings(verdict.stranded(name, node=result.stranded))
    if sts is None or not outcome.allowed:
        return outcome
    deleted = retention.live_warning(sts, before=before, after=after, store=store, label=label)
    return deleted.told(outcome, regarding)


def validate_kruise_scale(
    scale: JSON, *, old: JSON, name: str, namespace: str, store: Store
) -> Decision:
    """Guard ``statefulsets/scale`` of ``apps.kruise.io`` (``kubectl scale``, the HPA); any
    change of count is told what an UPDATE to it is told of the count, as a set's ``/scale``
    is (:func:`~webhook.rules.scaling.count_warnings`)."""
    new_count = _replicas(scale)
    held = store.statefulset(namespace, name, kruise.GROUP)
    if held is not None and held.skipped:
        return allow()  # a Scale lacks the set's labels: the objectSelector cannot skip it
    # An UPDATE always carries oldObject; a hand-written review may not.
    old_count = _replicas(old) if old else held.replicas if held is not None else new_count
    if new_count >= old_count:
        return scale_up(held, new_count, store=store)  # not a scale-down: no guard
    if held is not None and held.deleting:  # a Scale's metadata has no deletionTimestamp
        return verdict.deleting(name, group=kruise.GROUP)
    uid = objects.string(objects.mapping(scale, "metadata"), "uid", path="metadata")
    if new_count == 0:
        stopped = verdict.stopped(name, old=old_count)
        if held is None:
            return stopped
        everything = kruise_live(held, store=store, replicas=old_count)
        regarding = notices.workload(namespace, name, group=kruise.GROUP, uid=uid)
        gone = everything.resized(0)
        return retention.live_warning(held, before=everything, after=gone, store=store).told(
            stopped, regarding
        )
    policy = resolve_policy(
        namespace,
        name,
        store=store,
        tolerate_malformed=True,
        group=kruise.GROUP,
        retried_by=SCALES_RETRIED_BY,
    )
    warnings: tuple[str, ...] = ()
    if policy.malformed:
        warnings = (malformed_warning(name, policy.malformed, by="scale", kind=policy.kind),)
    elif held is None:
        warnings = (
            f"{namespace}/{name} is not in stszone's view yet: guarded on its pods and the "
            "server's zones, with no reserved ordinals",
        )
    live = policy.live or Live(replicas=0)
    before = live.resized(old_count)
    after = live.resized(new_count)
    outcome = judge_live(
        name,
        before=before,
        after=after,
        namespace=namespace,
        old_policy=policy._replace(live=before),
        new_policy=policy._replace(live=after),
        store=store,
        retried_by=SCALES_RETRIED_BY,
        label="",
        uid=uid,
        sts=held,
    )
    return outcome.with_warnings(warnings + count_warnings(held, new_count, store=store))


def _replicas(scale: JSON) -> int:
    # autoscaling/v1 ScaleSpec.replicas is omitempty: a scale to 0 has no replicas field.
    return objects.int32(objects.mapping(scale, "spec"), "replicas", default=0, path="spec")
