"""AdmissionReview on the wire: a request body read for the rules, a decision rendered back. Pure.

``admission.k8s.io/v1`` reviews are answered in v1 and ``v1beta1`` in v1beta1 (the response
shape is the same; only ``apiVersion`` differs). The response echoes the request ``uid``; a
decision's edits are made to a copy of the object exactly as it was sent and answered as the
JSON Patch between the two (base64, ``patchType: JSONPatch``); a denial carries a ``Status``
with the code, reason and a message the user reads in ``kubectl``'s output.

The envelope (the review, its request, and the request's kind, resource and user) is decoded
typed, with msgspec: each field's type is checked as it is decoded, so a body off it is refused
in one step with a one-line 400. The objects are decoded whole, every field as sent.
"""

from __future__ import annotations

from typing import Any, Final, Literal, NamedTuple, NotRequired, TypedDict

import msgspec

from webhook.config import Defaults
from webhook.errors import BadObject, BadRequest
from webhook.model.notices import Notice
from webhook.model.store import Store
from webhook.rules import admission
from webhook.rules.admission import Endpoint, Request
from webhook.rules.decision import Decision, fit, refuse
from webhook.wire import codec, edits
from webhook.wire.patch import Patch, apply, diff, encode

API_VERSIONS: Final = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
OPERATIONS: Final = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})


# The envelope, as admission/v1's Go types send it: Go strings and structs are never null, an
# object is (oldObject on CREATE, object on DELETE). None of these can be part of a reference
# cycle (they hold strings, each other and the decoded objects): the collector skips them.
class _UserInfo(msgspec.Struct, frozen=True, gc=False):
    username: str = ""


class _Kind(msgspec.Struct, frozen=True, gc=False):
    group: str = ""
    version: str = ""
    kind: str = ""


class _Resource(msgspec.Struct, frozen=True, gc=False):
    group: str = ""
    version: str = ""
    resource: str = ""


class _Request(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    uid: str = ""
    kind: _Kind = msgspec.field(default_factory=_Kind)
    resource: _Resource = msgspec.field(default_factory=_Resource)
    sub_resource: str = ""
    name: str = ""
    namespace: str = ""
    operation: str = ""
    user_info: _UserInfo = msgspec.field(default_factory=_UserInfo)
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = None
    dry_run: bool = False


class _Review(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    api_version: str = ""
    kind: str = ""
    request: _Request | None = None


_DECODER: Final[msgspec.json.Decoder[_Review]] = msgspec.json.Decoder(_Review)


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


class Review(NamedTuple):
    """A parsed AdmissionReview: what the answer echoes, and the request for the rules."""

    api_version: str
    uid: str
    request: Request


def parse(body: bytes | str) -> Review:
    """Parse a request body into a :class:`Review`; :class:`BadRequest` says what is wrong."""
    try:
        data = codec.request_body(body, expected="an AdmissionReview", decoder=_DECODER)
    except msgspec.ValidationError as err:
        codec.request_body(body, expected="an AdmissionReview")  # not JSON at all: say so
        raise BadRequest(f"request body is not an AdmissionReview: {err}") from None
    if data.kind != "AdmissionReview":
        raise BadRequest(f"kind must be AdmissionReview, got {data.kind!r}")
    if data.api_version not in API_VERSIONS:
        raise BadRequest(
            f"apiVersion must be one of {', '.join(API_VERSIONS)}, got {data.api_version!r}"
        )
    request = data.request
    if request is None:
        raise BadRequest("AdmissionReview.request is missing")
    if not request.uid:
        raise BadRequest("AdmissionReview.request.uid is missing or empty")
    if request.operation not in OPERATIONS:
        raise BadRequest(
            f"request.operation must be one of {sorted(OPERATIONS)}, got {request.operation!r}"
        )
    kind, resource = request.kind, request.resource
    return Review(
        data.api_version,
        request.uid,
        Request(
            kind=kind.kind,
            group=kind.group,
            resource=resource.resource,
            sub_resource=request.sub_resource,
            operation=request.operation,
            namespace=request.namespace,
            name=request.name,
            object=request.object or {},
            old_object=request.old_object or {},
            dry_run=request.dry_run,
            resource_group=resource.group,
            username=request.user_info.username,
        ),
    )


def from_dict(data: Any) -> Review:
    """:func:`parse` of a review held as Python objects (a test's, a file read with YAML)."""
    return parse(codec.dumps(data))


class Answer(NamedTuple):
    """A decision and the patch its edits come to on the object as sent."""

    decision: Decision
    patch: Patch
    #: The object with the decision's edits made (the object itself when it has none).
    edited: dict[str, Any]

    @property
    def allowed(self) -> bool:
        return self.decision.allowed

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.decision.warnings

    @property
    def code(self) -> int:
        return self.decision.code

    @property
    def reason(self) -> str:
        return self.decision.reason

    @property
    def message(self) -> str:
        return self.decision.message

    @property
    def notices(self) -> tuple[Notice, ...]:
        """The decision's notices, less those of edits the object already carries: a second
        invocation (an empty patch) is the same decision, not a new one to tell of."""
        decision = self.decision
        if decision.edits and not self.patch:
            return ()
        return decision.notices

    @property
    def result(self) -> Literal["patched", "allowed", "denied", "error"]:
        """``patched``, ``allowed``, ``denied``, or ``error`` (an internal error)."""
        decision = self.decision
        if not decision.allowed:
            return "error" if decision.code >= 500 else "denied"
        return "patched" if self.patch else "allowed"


def render(request: Request, decision: Decision) -> Answer:
    """The patch of ``decision``'s edits to ``request.object`` (none for a refusal)."""
    original = request.object
    if not decision.allowed or not decision.edits:
        return Answer(decision, [], original)
    try:
        edited = edits.apply(original, decision.edits)
    except BadObject as err:  # a field on an edit's path that no rule read
        refusal = refuse(f"malformed {request.kind}: {err.message}", code=400, reason="BadRequest")
        return Answer(refusal, [], original)
    return Answer(decision, diff(original, edited), edited)


def answer(endpoint: Endpoint, review: Review, *, store: Store, defaults: Defaults) -> Answer:
    """Decide ``review`` as ``endpoint`` and render the decision."""
    request = review.request
    return render(request, admission.DECIDE[endpoint](request, store=store, defaults=defaults))


def chain(review: Review, *, store: Store, defaults: Defaults) -> Answer:
    """What the API server makes of both webhooks: mutate, then validate the mutated object.

    A denial from either wins; otherwise the mutation's patch with the warnings of both.
    """
    mutated = answer("mutate", review, store=store, defaults=defaults)
    if not mutated.allowed:
        return mutated
    after = review
    if mutated.patch:
        request = review.request._replace(object=apply(review.request.object, mutated.patch))
        after = review._replace(request=request)
    checked = answer("validate", after, store=store, defaults=defaults)
    if not checked.allowed:
        return checked._replace(decision=checked.decision.with_warnings(mutated.warnings))
    return mutated._replace(decision=mutated.decision.with_warnings(checked.warnings))


def response(review: Review, answered: Answer) -> ReviewWire:
    """The AdmissionReview answering ``review``, in the request's apiVersion."""
    decision = answered.decision
    body: ResponseWire = {"uid": review.uid, "allowed": decision.allowed}
    if decision.allowed and answered.patch:
        body["patchType"] = "JSONPatch"
        body["patch"] = encode(answered.patch)
    if decision.warnings:
        body["warnings"] = list(dict.fromkeys(fit(decision.warnings)))
    if not decision.allowed:
        status: StatusWire = {
            "code": decision.code,
            "message": decision.message,
            "status": "Failure",
        }
        if decision.reason:
            status["reason"] = decision.reason
        body["status"] = status
    return {"apiVersion": review.api_version, "kind": "AdmissionReview", "response": body}


def dumps(review: ReviewWire) -> bytes:
    """Compact JSON bytes of a response review."""
    return codec.dumps(review)
