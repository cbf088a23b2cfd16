"""Scale-downs through either path: a StatefulSet UPDATE and the ``statefulsets/scale`` subresource.

Both are judged alike: a set being deleted is not judged (allowed, with a warning: its
controller creates and deletes no pod); scaling to zero stops the set (allowed, with a warning);
any other decrease goes to the guard, once the live view has listed every resource. A Scale
(``autoscaling/v1``: name, replicas, selector) carries no annotations, so its policy comes from
the StatefulSet in the view; annotations already malformed there cannot be changed by a Scale,
so, as on an UPDATE that leaves them as they were, they give a warning and the guard runs on
the defaults -- an HPA scale-down that keeps every zone is never blocked by them.

Whatever the direction, a Scale is told what an UPDATE setting the same ``spec.replicas`` is
told of that count (:func:`count_warnings`: fewer replicas than zones, a listed zone with no
node), read from the set in the view: an operator gets the same answer for the same change,
whichever path it takes. An increase goes to no guard and waits for no sync: a set the view
does not hold yet is allowed without a word.
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook.model import notices, objects
from webhook.model.objects import JSON
from webhook.model.records import StatefulSetInfo
from webhook.model.store import Store
from webhook.rules import guard, retention, verdict
from webhook.rules.decision import CUT, WARNING_MAX, Decision, allow
from webhook.rules.policy import (
    SCALES_RETRIED_BY,
    Policy,
    require_synced,
    resolve_policy,
    workload_kind,
)
from webhook.rules.zonelist import spread_warnings, zone_list, zones_origin


def malformed_warning(
    name: str, problems: Sequence[str], *, by: str, kind: str = "StatefulSet"
) -> str:
    """``StatefulSet db: stszone.io/mode 'x' is not a mode (+1 more; unchanged by this update)``
    (``kind``: the workload's, ``Advanced StatefulSet db: ...``): the first problem without its
    example (the denial of a change shows them all), shortened where the whole would pass the
    warning limit, so the tail saying why it is allowed stays."""
    more = f"+{len(problems) - 1} more; " if len(problems) > 1 else ""
    first = problems[0].split("; ")[0]
    head, tail = f"{kind} {name}: ", f" ({more}unchanged by this {by}; fix it)"
    room = WARNING_MAX - len(head) - len(tail)
    if len(first) > room:
        first = first[: max(room - len(CUT), 0)] + CUT
    return head + first + tail


def count_warnings(sts: StatefulSetInfo | None, replicas: int, *, store: Store) -> tuple[str, ...]:
    """What an UPDATE setting ``sts``'s ``spec.replicas`` to ``replicas`` is warned of that count
    (:func:`~webhook.rules.zonelist.spread_warnings`), for its ``/scale``, read from the set as
    the view holds it (the defaults while its annotations are malformed, as that UPDATE reads
    them). None of a set the view lacks (no zone list to count), one being deleted (it gets no
    new pod) or in node-ordinal mode (its labelled nodes place it, whatever the zones)."""
    if sts is None or sts.deleting or sts.declared.mode == "node-ordinal":
        return ()
    zones = zone_list(sts.declared, store=store)
    # Members fill the listed zones in order (ranked), as the UPDATE's warning counts them.
    return spread_warnings(sts.name, replicas, sts.declared, zones, store=store, ranked=True)


def scale_up(sts: StatefulSetInfo | None, replicas: int, *, store: Store) -> Decision:
    """An increase (or no change) through ``/scale``: no guard, so nothing about its members is
    looked up; its malformed annotations said (its new pods are refused until they are fixed)
    and the count's warnings, as an UPDATE to ``replicas`` gets them."""
    if sts is None:
        return allow()
    said: tuple[str, ...] = ()
    if sts.problems:
        kind = workload_kind(sts.group)
        said = (malformed_warning(sts.name, sts.problems, by="scale", kind=kind),)
    return allow(warnings=said + count_warnings(sts, replicas, store=store))


def judge(
    name: str,
    *,
    old: range,
    new: range,
    namespace: str,
    policy: Policy,
    store: Store,
    allow_zone_loss: bool,
    retried_by: str,
    sts: StatefulSetInfo | None = None,
    uid: str = "",
) -> Decision:
    """The answer to a change of the set's ordinals from ``old`` to ``new``: a decrease of
    replicas, a move of ``ordinals.start``, or both. ``retried_by``: who sends the request
    again after a refusal for retry (:func:`~webhook.rules.placement.require_synced`): an HPA
    for a ``/scale``, nobody for an UPDATE of the set, which a person or a tool sends.
    ``sts``: the set as it will be, whose claims an allowed answer says go with the pods
    (``whenScaled: Delete``); ``uid``: the set's, for the notices about it."""
    regarding = notices.statefulset(namespace, name, uid=uid)
    if not new:
        outcome = verdict.stopped(name, old=len(old))
    else:
        require_synced(
            store,
            what=f"a scale-down of StatefulSet {namespace}/{name}",
            retried_by=retried_by,
        )
        result = guard.scale_down(
            name, old=old, new=new, namespace=namespace, policy=policy, store=store
        )
        outcome = verdict.verdict(
            result,
            allow_zone_loss=allow_zone_loss,
            regarding=regarding,
            malformed=policy.malformed,
            origin=zones_origin(policy.declared, store=store),
        ).with_warnings(verdict.stranded(name, node=result.stranded))
    if sts is None or not outcome.allowed:
        return outcome
    return retention.warning(sts, old=old, new=new, store=store).told(outcome, regarding)


def validate_scale(scale: JSON, *, old: JSON, name: str, namespace: str, store: Store) -> Decision:
    """Guard the ``statefulsets/scale`` subresource (``kubectl scale``, the HPA)."""
    new_count = _scale_replicas(scale)
    sts = store.statefulset(namespace, name)
    # An UPDATE always carries oldObject; a hand-written review may not.
    known = sts.replicas if sts is not None else new_count
    old_count = _scale_replicas(old) if old else known
    if sts is not None and sts.skipped:
        # The objectSelector keeps the set's own writes from stszone; a Scale carries none of
        # its labels, so the API server sends its /scale all the same: left alone alike.
        return allow()
    if new_count >= old_count:
        return scale_up(sts, new_count, store=store)
    if sts is not None and sts.deleting:  # a Scale's metadata has no deletionTimestamp
        return verdict.deleting(name)
    if new_count == 0:
        stopped = verdict.stopped(name, old=old_count)
        if sts is None:
            return stopped
        everything = range(sts.start, sts.start + old_count)
        # A Scale's metadata is its StatefulSet's: its uid is the set's.
        uid = objects.string(objects.mapping(scale, "metadata"), "uid", path="metadata")
        regarding = notices.statefulset(namespace, name, uid=uid)
        deleted = retention.warning(sts, old=everything, new=range(0), store=store)  # none left
        return deleted.told(stopped, regarding)
    # Live: a set missing from the view is refused for retry by resolve_policy. Offline (a saved
    # cluster file without it): guarded on its pods and the server's zones, with a warning.
    policy = resolve_policy(
        namespace, name, store=store, tolerate_malformed=True, retried_by=SCALES_RETRIED_BY
    )
    warnings: tuple[str, ...] = ()
    if policy.malformed:
        warnings = (malformed_warning(name, policy.malformed, by="scale"),)
    elif not policy.known:  # a set the view lacks has no annotations to be malformed
        warnings = (
            f"{namespace}/{name} is not in stszone's view yet: guarded on its pods and the "
            "server's zones",
        )
    outcome = judge(
        name,
        old=range(policy.start, policy.start + old_count),
        new=range(policy.start, policy.start + new_count),
        namespace=namespace,
        policy=policy,
        store=store,
        allow_zone_loss=policy.declared.allow_zone_loss,
        retried_by=SCALES_RETRIED_BY,
        sts=sts,
        # A Scale's metadata is its StatefulSet's: its uid is the set's.
        uid=objects.string(objects.mapping(scale, "metadata"), "uid", path="metadata"),
    )
    return outcome.with_warnings(warnings + count_warnings(sts, new_count, store=store))


def _scale_replicas(scale: JSON) -> int:
    # autoscaling/v1 ScaleSpec.replicas is `int32 json:"replicas,omitempty"`: a scale to 0
    # arrives with no replicas field at all, so missing means 0 here (not the StatefulSet's 1).
    return objects.int32(objects.mapping(scale, "spec"), "replicas", default=0, path="spec")
