"""Which StatefulSet a reference is: ``apps/v1`` or OpenKruise's Advanced StatefulSet. Pure.

Two API groups name a kind ``StatefulSet`` that stszone manages: ``apps`` and OpenKruise's
``apps.kruise.io``. Records, store keys, plans and reports carry a set's kind as its **group
key**: "" for ``apps``, ``apps.kruise.io`` for an Advanced StatefulSet. :func:`group_of` is the
one place an ``apiVersion`` (an owner reference's, an object's) becomes a group key: a
StatefulSet of any other group, or of a version stszone does not read, gets none and is no set
of stszone's. :data:`KINDS` says, per group key, what each reader names or reads for it and
how its sets behave where the kinds differ.
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple

from webhook.model import kruise

#: The kind both groups give their StatefulSets.
KIND: Final = "StatefulSet"


class SetKind(NamedTuple):
    """What stszone names and reads for the sets of one group key, and where they differ."""

    #: The ``apiVersion`` stszone reads the sets at (and names in Events).
    api_version: str
    #: The store table holding its sets.
    table: Literal["statefulsets", "kruisesets"]
    #: The kind in messages (``kubectl`` output, warnings, reports).
    text: str
    #: The ``kind`` label of its metrics.
    label: str
    #: Its members are its live ordinals, each placed by its rank among them
    #: (:class:`webhook.model.kruise.Live`: ``spec.reserveOrdinals`` skipped, ``ordinals.start``
    #: only with ``--kruise-start-ordinal``), not ``start..start+replicas-1`` placed by ordinal.
    live_ordinals: bool
    #: Its pods' owner references are matched on its uid too, so a pod of an earlier set of
    #: that name, deleted, is no member of it.
    owner_uid: bool
    #: Its ``minReadySeconds`` sits in ``spec.updateStrategy.rollingUpdate`` (Kruise's
    #: getMinReadySeconds), not in ``spec``.
    min_ready_in_strategy: bool
    #: Who creates its pods and claims, and sends a create again after a refusal meant for
    #: retry.
    controller: str

    @property
    def creates_retried_by(self) -> str:
        """Who sends a create of its pods or claims again after a refusal meant for retry: its
        controller. (An HPA scales the set; it never sends a pod or a claim.)"""
        return f"{self.controller} retries its creates by itself"


KINDS: Final[dict[str, SetKind]] = {
    "": SetKind(
        "apps/v1",
        "statefulsets",
        "StatefulSet",
        "StatefulSet",
        live_ordinals=False,
        owner_uid=False,
        min_ready_in_strategy=False,
        controller="the StatefulSet controller",
    ),
    kruise.GROUP: SetKind(
        f"{kruise.GROUP}/{kruise.WATCHED_VERSION}",
        "kruisesets",
        "Advanced StatefulSet",
        "AdvancedStatefulSet",
        live_ordinals=True,
        owner_uid=True,
        min_ready_in_strategy=True,
        controller="kruise-manager",
    ),
}


def group_of(api_version: str) -> str | None:
    """The group key of a StatefulSet at ``api_version``: "" for ``apps`` (any version),
    ``apps.kruise.io`` at a version stszone reads, else None."""
    group, _, version = api_version.rpartition("/")
    if group == "apps":
        return ""
    return kruise.GROUP if group == kruise.GROUP and version in kruise.VERSIONS else None
