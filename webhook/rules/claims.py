"""Claims of a StatefulSet's volumeClaimTemplates: their zone and their StorageClass. Pure.

A claim is annotated with the zone its ordinal belongs in, and, when the set has a
``stszone.io/storage-class-template``, gets the class of that zone, so that an
Immediate-binding class provisions its volume there. Two kinds of claim are left as written:

- a claim that names its volume -- ``spec.volumeName``, or a PersistentVolume pre-bound to it
  by ``claimRef`` -- is in that volume's zone, and its class is never rewritten: Kubernetes
  binds a named volume only when the classes match ("storageClassName does not match"), so a
  rewritten class would leave the claim Pending forever;
- an explicit ``storageClassName: ""`` asks for a volume without a class (pre-provisioned);
  replacing it would silently change what the claim binds to.
"""

from __future__ import annotations

from webhook.errors import Denied
from webhook.model import objects, setkinds
from webhook.model.annotations import STORAGE_CLASS_TEMPLATE, storage_class_for
from webhook.model.objects import JSON
from webhook.model.store import Store
from webhook.rules.decision import Decision, Edit, StorageClass, ZoneAnnotation, allow, edit
from webhook.rules.placement import place_by_mode, zone_among
from webhook.rules.plan import STATEFULSET_CONTROLLERS, skipped
from webhook.rules.policy import Policy, require_synced, resolve_policy


def claim_owners(name: str, *, namespace: str, store: Store) -> list[tuple[str, int, str]]:
    """Every (StatefulSet, ordinal) whose volumeClaimTemplate produces a claim of this name,
    by the set's name.

    Two sets can produce one name (template ``data`` of set ``db-main`` and template ``data-db``
    of set ``main`` both make ``data-db-main-0``); the order keeps the answer the same however
    the view lists them. Every match reads the same ordinal (the digits after the name's last
    dash), so the set's name is all that tells them apart.
    """
    found: list[tuple[str, int, str]] = []
    for sts in store.workloads_in(namespace):  # StatefulSets and Advanced StatefulSets
        for template in sts.templates:
            prefix = f"{template}-{sts.name}-"
            rest = name[len(prefix) :]
            if name.startswith(prefix) and rest.isascii() and rest.isdigit():
                found.append((sts.name, int(rest), sts.group))
    return sorted(found)


def _other_controller(meta: JSON) -> bool:
    """Whether a claim is controlled by another kind than a set. The set controllers' accounts
    make such claims too: kube-controller-manager, running with one identity, those of generic
    ephemeral volumes (``<pod>-<volume>``, controlled by the pod), and kruise-manager those of
    CloneSets (controlled by the CloneSet). No StatefulSet will ever produce them, so refusing
    them for retry would refuse them for good."""
    refs = objects.dicts(meta, "ownerReferences", path="metadata")
    return any(r.get("controller") is True and r.get("kind") != "StatefulSet" for r in refs)


def mutate_claim(claim: JSON, *, namespace: str, store: Store, requester: str) -> Decision:
    """Record the zone on a StatefulSet's claim; set its StorageClass from the template, if any."""
    meta = objects.mapping(claim, "metadata")
    if skipped(objects.str_map(meta, "labels", path="metadata")):
        return allow()
    name = objects.string(meta, "name")
    group = STATEFULSET_CONTROLLERS.get(requester)
    kind = None if group is None else setkinds.KINDS[group]
    if "statefulsets" in store.unsynced():  # whose claim it is cannot be known yet
        # A user's claim is sent again by no controller: the user retries it.
        retried_by = "" if kind is None else kind.creates_retried_by
        require_synced(store, what=f"claim {namespace}/{name}", retried_by=retried_by)
    owners = claim_owners(name, namespace=namespace, store=store)
    owner = owners[0] if owners else None
    if owner is None:
        if kind is not None and store.lagging() and not _other_controller(meta):
            # The controller creates claims right after the set; an Immediate-binding class
            # would provision this one before we know its zone. Refuse; the controller retries.
            raise Denied(
                f"claim {namespace}/{name} comes from {kind.controller}, but no {kind.text} in "
                "stszone's view produces it yet (its watch event is usually milliseconds "
                f"behind); {kind.controller} retries this create",
                reason="StatefulSetNotYetSeen",
            )
        return allow()
    statefulset, ordinal, group = owner
    others = sorted({other for other, _, _ in owners[1:] if other != statefulset})
    shared: tuple[str, ...] = ()
    if others:
        shared = (
            f"claim {name} is also a claim name of {', '.join(others)}; placed for "
            f"{statefulset} (rename a set or template)",
        )
    return _owned_claim(
        claim,
        name=name,
        statefulset=statefulset,
        ordinal=ordinal,
        namespace=namespace,
        store=store,
        group=group,
        # A user's claim (one pre-created to restore data, say) is sent again by the user alone.
        retried_by="" if kind is None else None,
    ).with_warnings(shared)


def _owned_claim(
    claim: JSON,
    *,
    name: str,
    statefulset: str,
    ordinal: int,
    namespace: str,
    store: Store,
    group: str = "",
    retried_by: str | None = None,
) -> Decision:
    """The zone (and class) of the claim of ``ordinal`` of ``statefulset`` (of ``group``);
    ``retried_by``: who sends it again after a refusal for retry (None: the set's controller)."""
    meta = objects.mapping(claim, "metadata")
    policy = resolve_policy(namespace, statefulset, store=store, group=group, retried_by=retried_by)
    spec = objects.mapping(claim, "spec")
    uid = objects.string(meta, "uid", path="metadata")
    volume = objects.string(spec, "volumeName", path="spec") or store.prebound(
        namespace, name, uid=uid, new=True
    )
    if volume:
        return _follow_volume(
            claim, volume=volume, ordinal=ordinal, namespace=namespace, policy=policy, store=store
        )
    placement = place_by_mode(
        ordinal, namespace=namespace, policy=policy, store=store, creating=(name, uid)
    )
    if not placement.zone:  # node-ordinal mode without one node zone yet, or nowhere to run
        return allow(warnings=placement.warnings)
    edits: list[Edit] = [ZoneAnnotation(placement.zone)]
    warnings = placement.warnings
    template = policy.declared.storage_class_template
    if template:
        current = spec.get("storageClassName")
        wanted = storage_class_for(template, placement.zone)
        if current == "":
            warnings += (
                f'claim {name} keeps storageClassName "" (volumes without a class); '
                "the storage-class template is not applied",
            )
        else:
            edits.append(StorageClass(wanted))
            if isinstance(current, str) and current != wanted:
                warnings += (
                    f"claim {name}: storageClassName {current} -> {wanted} "
                    f"({STORAGE_CLASS_TEMPLATE})",
                )
    return edit(*edits, warnings=warnings)


def _follow_volume(
    claim: JSON, *, volume: str, ordinal: int, namespace: str, policy: Policy, store: Store
) -> Decision:
    """A claim naming its volume: the volume's zone, and its class left as written."""
    name = objects.string(objects.mapping(claim, "metadata"), "name")
    if store.volume(volume) is None:
        return allow(
            warnings=(f"claim {name} names volume {volume}, not in stszone's view: no zone set",)
        )
    key = policy.declared.topology_key
    zones = store.volume_zones(volume, key)
    if zones is None:  # it can attach to no node of a known zone: no zone to record
        return allow(warnings=(f"claim {name}: {store.volume_nowhere(volume, key)}; no zone set",))
    if zones:
        zone = zone_among(zones, ordinal, policy)
    else:  # a volume usable from any zone (NFS, say): its pod goes where the rule says
        zone = place_by_mode(ordinal, namespace=namespace, policy=policy, store=store).zone
    warnings: tuple[str, ...] = ()
    template = policy.declared.storage_class_template
    current = objects.mapping(claim, "spec").get("storageClassName")
    if template and zone and current != storage_class_for(template, zone):
        warnings = (
            f"claim {name} names volume {volume}: storageClassName kept (a named volume binds "
            "only if the classes match)",
        )
    return edit(ZoneAnnotation(zone), warnings=warnings) if zone else allow(warnings=warnings)
