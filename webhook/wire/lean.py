"""The shape of an AdmissionReview that the admission path decodes: what the rules read. Pure.

msgspec builds its decoder from these classes' annotations at import;
:func:`webhook.wire.review.parse` decodes with it. The envelope (the review, its request, and
the request's kind, resource and user) is typed: msgspec checks each field's type as it decodes
(a string, an object, a boolean), so a body off it is refused in one step. The objects are
TypedDicts: plain dicts for the rules, less what no rule reads.
"""

from __future__ import annotations

from typing import Any, Final, TypedDict

import msgspec

# The decode, less what no rule reads. Every object the API server sends carries its
# managedFields (a third of a recorded pod review's bytes, and most of its small dicts), and a
# pod its containers, tolerations and projected token volume (most of what is left): msgspec
# decodes a review against the shape below and steps over what is not in it without building
# an object. What it keeps is decoded as it is (``Any``), in the body's order. The fields are
# those of AdmissionReview and AdmissionRequest (k8s.io/api admission/v1) less the request's
# echoes (requestKind, requestResource, options) and userInfo's groups and extras; ObjectMeta
# (apimachinery meta/v1) less managedFields; and a spec that is the union of what the rules read
# of a PodSpec (its volumes' claims and where it may run) with every field of StatefulSetSpec,
# ScaleSpec and PersistentVolumeClaimSpec. tests/test_review_decode.py holds the rules to it:
# every field the shape leaves out of the recorded reviews is replaced by a value no rule could
# read, and every answer stays the same.
#
# Inside an object, every JSON value fits: where the shape expects an object, any other value is
# decoded as it is, so the rules see it and refuse it (a denial naming the field) as they would
# in a whole decode, and the shape is the only decode a review goes through.

_Scalar = str | int | float | bool | None
#: Any JSON value but an object (msgspec takes at most one object type in a union).
_NotObject = list[Any] | _Scalar


class _ObjectMeta(TypedDict, total=False):
    name: Any
    generateName: Any
    namespace: Any
    selfLink: Any
    uid: Any
    resourceVersion: Any
    generation: Any
    creationTimestamp: Any
    deletionTimestamp: Any
    deletionGracePeriodSeconds: Any
    labels: Any
    annotations: Any
    ownerReferences: Any
    finalizers: Any


class _Volume(TypedDict, total=False):
    name: Any
    persistentVolumeClaim: Any


class _Spec(TypedDict, total=False):
    # PodSpec: what the rules read.
    volumes: list[_Volume | _NotObject] | _Scalar
    affinity: Any
    nodeSelector: Any
    nodeName: Any
    schedulerName: Any
    # StatefulSetSpec (a Scale's spec is its replicas).
    replicas: Any
    selector: Any
    template: Any
    serviceName: Any
    volumeClaimTemplates: Any
    updateStrategy: Any
    podManagementPolicy: Any
    revisionHistoryLimit: Any
    minReadySeconds: Any
    persistentVolumeClaimRetentionPolicy: Any
    ordinals: Any
    # PersistentVolumeClaimSpec (selector above).
    accessModes: Any
    resources: Any
    volumeName: Any
    storageClassName: Any
    volumeMode: Any
    dataSource: Any
    dataSourceRef: Any
    volumeAttributesClassName: Any


class _Object(TypedDict, total=False):
    apiVersion: Any
    kind: Any
    metadata: _ObjectMeta | _NotObject
    spec: _Spec | _NotObject
    status: Any


class UserInfo(msgspec.Struct, frozen=True, gc=False):
    username: str = ""


class GroupVersionKind(msgspec.Struct, frozen=True, gc=False):
    group: str = ""
    version: str = ""
    kind: str = ""


class GroupVersionResource(msgspec.Struct, frozen=True, gc=False):
    group: str = ""
    version: str = ""
    resource: str = ""


# Null is taken where the API server sends it (an object on CREATE's oldObject and DELETE's
# object); the other fields are Go strings, structs and an omitted *bool: absent or typed. None
# of these can be part of a reference cycle (they hold strings, each other, and the decoded
# objects), so the collector does not track them (gc=False).
class AdmissionRequest(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    uid: str = ""
    kind: GroupVersionKind = msgspec.field(default_factory=GroupVersionKind)
    resource: GroupVersionResource = msgspec.field(default_factory=GroupVersionResource)
    sub_resource: str = ""
    name: str = ""
    namespace: str = ""
    operation: str = ""
    user_info: UserInfo = msgspec.field(default_factory=UserInfo)
    object: _Object | None = None
    old_object: _Object | None = None
    dry_run: bool = False


class AdmissionReview(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    api_version: str = ""
    kind: str = ""
    request: AdmissionRequest | None = None


#: Decodes a review to the shape above (:func:`webhook.wire.review.parse`).
REVIEW: Final[msgspec.json.Decoder[AdmissionReview]] = msgspec.json.Decoder(AdmissionReview)
