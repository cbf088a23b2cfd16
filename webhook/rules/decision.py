"""What a rule decides about one admission request, in the domain's words. Pure.

A rule allows or refuses (a reason, an HTTP-style code and a message the user reads in
``kubectl``'s output), says warnings, and asks for edits of the object it was sent:

- :class:`ZoneAnnotation`: record the chosen zone on a pod or claim (``stszone.io/zone``);
- :class:`ZonesAnnotation`: write a set's zone list (``stszone.io/zones``);
- :class:`NodeRequirement`: require a node label, ANDed into every node-selector term of the
  pod's required node affinity (the terms are ORed, so it must go into each one);
- :class:`SchedulerName`: hand the pod to a scheduler;
- :class:`StorageClass`: give a claim a StorageClass;
- :class:`MetadataAnnotation`: set any annotation on the object (a KafkaNodePool's
  ``strimzi.io/remove-node-ids``, say).

A decision that a person should be able to find later also carries :class:`Notice` s, which
the server posts to its outbox (never for a dry run) and a background job writes as Events on
the workload.

The rules know nothing of JSON Patch or AdmissionReview: :mod:`webhook.wire.review` applies
the edits to a copy of the object exactly as the API server sent it and answers the patch
between the two, so an edit the object already carries changes nothing and a second
invocation answers an empty patch.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from webhook.model.notices import Notice

#: The API server's advice for admission warnings: "Limit warnings to 120 characters if
#: possible. Warnings over 256 characters and large numbers of warnings may be truncated."
WARNING_TARGET: Final = 120
WARNING_MAX: Final = 256
#: What marks a warning (or a part of one) cut short.
CUT: Final = " [...]"


class ZoneAnnotation(NamedTuple):
    """``stszone.io/zone: <zone>`` on the object's metadata."""

    zone: str


class ZonesAnnotation(NamedTuple):
    """``stszone.io/zones: <a,b,c>`` on a set's metadata."""

    zones: tuple[str, ...]


class NodeRequirement(NamedTuple):
    """``key In [value]`` in every non-empty node-selector term of the pod's required node
    affinity (a new term holding only it when there is none). An empty term matches no node
    and stays as it is: the requirement would make it match."""

    key: str
    value: str


class SchedulerName(NamedTuple):
    """``spec.schedulerName`` of a pod."""

    name: str


class StorageClass(NamedTuple):
    """``spec.storageClassName`` of a claim."""

    name: str


class MetadataAnnotation(NamedTuple):
    """``metadata.annotations[key] = value`` on the object."""

    key: str
    value: str


Edit = (
    ZoneAnnotation
    | ZonesAnnotation
    | NodeRequirement
    | SchedulerName
    | StorageClass
    | MetadataAnnotation
)


class Decision(NamedTuple):
    """The decision on one request; build it with the constructors below."""

    allowed: bool = True
    edits: tuple[Edit, ...] = ()
    warnings: tuple[str, ...] = ()
    code: int = 200
    reason: str = ""
    message: str = ""
    #: What the decision says as Events on the workload.
    notices: tuple[Notice, ...] = ()

    def with_notices(self, *notices: Notice) -> Decision:
        """The same decision with more notices."""
        if not notices:
            return self
        return self._replace(notices=self.notices + notices)

    def with_warnings(self, warnings: tuple[str, ...]) -> Decision:
        """The same decision with more warnings appended."""
        if not warnings:
            return self
        return self._replace(warnings=self.warnings + fit(warnings))


def fit(warnings: tuple[str, ...]) -> tuple[str, ...]:
    """``warnings`` with each one cut to ``WARNING_MAX`` characters, marked where it was cut.

    Messages are written short (under ``WARNING_TARGET`` where they can be, long lists
    summarised with a count); this is the backstop for long object names, so the API server
    never truncates one of ours somewhere we did not choose.
    """
    if not warnings or max(map(len, warnings)) <= WARNING_MAX:
        return warnings
    return tuple(
        w if len(w) <= WARNING_MAX else w[: WARNING_MAX - len(CUT)] + CUT for w in warnings
    )


#: Allowed unchanged, nothing said (shared: decisions are immutable).
ALLOWED: Final = Decision()


def allow(*, warnings: tuple[str, ...] = ()) -> Decision:
    """Allow unchanged."""
    if not warnings:
        return ALLOWED
    return Decision(warnings=fit(warnings))


def edit(*edits: Edit, warnings: tuple[str, ...] = ()) -> Decision:
    """Allow with ``edits`` made to the object."""
    return Decision(edits=edits, warnings=fit(warnings))


def refuse(
    message: str, *, code: int = 403, reason: str = "Forbidden", warnings: tuple[str, ...] = ()
) -> Decision:
    """Refuse, with a message the user will see in kubectl's output."""
    return Decision(
        allowed=False, code=code, reason=reason, message=message, warnings=fit(warnings)
    )
