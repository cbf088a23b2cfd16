"""AdmissionReview on the wire: parse a request body, build the response. Pure.

``admission.k8s.io/v1`` reviews are answered in v1 and ``v1beta1`` in v1beta1 (the response
shape is the same; only ``apiVersion`` differs). The response echoes the request ``uid``; a
mutation is a base64 JSON Patch with ``patchType: JSONPatch``; a denial carries a ``Status``
with the code, reason and a message the user will read in ``kubectl``'s output.
"""

from __future__ import annotations

from typing import Any, Final, Literal, NamedTuple, NotRequired, TypedDict

import msgspec

from webhook.errors import BadRequest
from webhook.wire import codec, lean
from webhook.wire.patches import Patch, diff_encoded, encode

API_VERSIONS: Final = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
#: The API server's advice for admission warnings: "Limit warnings to 120 characters if
#: possible. Warnings over 256 characters and large numbers of warnings may be truncated."
WARNING_TARGET: Final = 120
WARNING_MAX: Final = 256
#: What marks a warning (or a part of one) cut short.
CUT: Final = " [...]"
OPERATIONS: Final = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})


class GroupVersionKind(TypedDict):
    group: str
    version: str
    kind: str


class StatusWire(TypedDict, total=False):
    code: int
    message: str
    reason: str
    status: str


class ResponseWire(TypedDict):
    uid: str
    allowed: bool
    patchType: NotRequired[Literal["JSONPatch"]]
    patch: NotRequired[str]
    warnings: NotRequired[list[str]]
    status: NotRequired[StatusWire]


class ReviewWire(TypedDict):
    apiVersion: str
    kind: Literal["AdmissionReview"]
    response: ResponseWire


class Request(NamedTuple):
    """The parts of ``AdmissionReview.request`` the engine reads.

    ``Request`` and :class:`Outcome` are built once per request: named tuples, immutable like
    frozen dataclasses (and read-only to mypy) but built in half the time.
    """

    api_version: str
    uid: str
    kind: str
    group: str
    resource: str
    sub_resource: str
    operation: str
    namespace: str
    name: str
    #: The objects as :func:`decode` reads them: what no rule reads (managedFields, a pod's
    #: containers) may be left out.
    object: dict[str, Any]
    old_object: dict[str, Any]
    dry_run: bool
    #: ``request.resource.group``: tells apps/v1 StatefulSets from look-alikes on a subresource.
    resource_group: str = ""
    #: ``request.userInfo.username``: who asked (the StatefulSet controller, a user, the HPA).
    username: str = ""

    def __repr__(self) -> str:  # the identity of the request, never the objects it carries
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"Request({self.operation} {self.kind} {where} uid={self.uid})"


def parse(body: bytes | str) -> Request:
    """Parse a request body into a :class:`Request`; :class:`BadRequest` says what is wrong.

    The body is decoded against :mod:`webhook.wire.lean`: what no rule reads is stepped over,
    so a number there is not read, and one beyond a float's range, or an integer longer than
    the interpreter reads (4300 digits by default), is not refused (the API server sends
    neither: it decodes every object into Go types before it calls a webhook). A body that is
    not JSON is refused as :func:`webhook.wire.codec.request_body` refuses it, with its message.
    """
    try:
        data = codec.request_body(body, expected="an AdmissionReview", decoder=lean.REVIEW)
    except msgspec.ValidationError as err:
        codec.request_body(body, expected="an AdmissionReview")  # not JSON at all: say so
        raise BadRequest(f"request body is not an AdmissionReview: {err}") from None
    if data.kind != "AdmissionReview":
        raise BadRequest(f"kind must be AdmissionReview, got {data.kind!r}")
    api_version = data.api_version
    if api_version not in API_VERSIONS:
        raise BadRequest(
            f"apiVersion must be one of {', '.join(API_VERSIONS)}, got {api_version!r}"
        )
    request = data.request
    if request is None:
        raise BadRequest("AdmissionReview.request is missing")
    if not request.uid:
        raise BadRequest("AdmissionReview.request.uid is missing or empty")
    operation = request.operation
    if operation not in OPERATIONS:
        raise BadRequest(
            f"request.operation must be one of {sorted(OPERATIONS)}, got {operation!r}"
        )
    kind, resource = request.kind, request.resource
    return Request(
        api_version,
        request.uid,
        kind.kind,
        kind.group,
        resource.resource,
        request.sub_resource,
        operation,
        request.namespace,
        request.name,
        request.object or {},
        request.old_object or {},
        request.dry_run,
        resource.group,
        request.user_info.username,
    )


def from_dict(data: Any) -> Request:
    """:func:`parse` of a review held as Python objects (a test's, a file read with YAML)."""
    return parse(codec.dumps(data))


#: The patch of an outcome without one (shared: patches are read-only, see webhook.wire.patches).
NO_PATCH: Final[Patch] = []


class Outcome(NamedTuple):
    """The decision on one request; build it with the constructors below."""

    allowed: bool = True
    patch: Patch = NO_PATCH
    warnings: tuple[str, ...] = ()
    code: int = 200
    reason: str = ""
    message: str = ""
    #: The mutated object (only for patched outcomes), so a chain can validate it.
    mutated: dict[str, Any] | None = None
    #: ``patch`` in its base64 wire form, when already known (memoised with the patch).
    encoded: str = ""

    def with_warnings(self, warnings: tuple[str, ...]) -> Outcome:
        """The same outcome with more warnings appended."""
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


#: Allowed unchanged, nothing said (shared: outcomes are immutable).
ALLOWED: Final = Outcome()


def allowed(*, warnings: tuple[str, ...] = (), message: str = "") -> Outcome:
    """Allow unchanged."""
    if not warnings and not message:
        return ALLOWED
    return Outcome(warnings=fit(warnings), message=message)


def denied(
    message: str, *, code: int = 403, reason: str = "Forbidden", warnings: tuple[str, ...] = ()
) -> Outcome:
    """Refuse, with a message the user will see in kubectl's output."""
    return Outcome(allowed=False, code=code, reason=reason, message=message, warnings=fit(warnings))


def patched(
    original: dict[str, Any], mutated: dict[str, Any], *, warnings: tuple[str, ...] = ()
) -> Outcome:
    """Allow with the JSON Patch from ``original`` to ``mutated`` (empty when nothing changed)."""
    patch, encoded = diff_encoded(original, mutated)
    return Outcome(patch=patch, warnings=fit(warnings), mutated=mutated, encoded=encoded)


def response(request: Request, outcome: Outcome) -> ReviewWire:
    """The AdmissionReview answering ``request``, in the request's apiVersion."""
    body: ResponseWire = {"uid": request.uid, "allowed": outcome.allowed}
    if outcome.allowed and outcome.patch:
        body["patchType"] = "JSONPatch"
        body["patch"] = outcome.encoded or encode(outcome.patch)
    if outcome.warnings:
        body["warnings"] = list(dict.fromkeys(outcome.warnings))
    if not outcome.allowed:
        status: StatusWire = {"code": outcome.code, "message": outcome.message, "status": "Failure"}
        if outcome.reason:
            status["reason"] = outcome.reason
        body["status"] = status
    return {"apiVersion": request.api_version, "kind": "AdmissionReview", "response": body}


def decision(outcome: Outcome | None, status: int = 200) -> str:
    """``patched``, ``allowed``, ``denied`` or ``error`` (a 4xx, or an internal error)."""
    if outcome is None or status != 200:
        return "error"
    if not outcome.allowed:
        return "error" if outcome.code >= 500 else "denied"
    return "patched" if outcome.patch else "allowed"


def dumps(review: ReviewWire) -> bytes:
    """Compact JSON bytes of a response review."""
    return codec.dumps(review)
