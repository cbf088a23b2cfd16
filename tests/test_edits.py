"""wire.edits: a decision's edits made to the object as sent, and the patch they come to.

Node selection as Kubernetes reads it: the terms of a required node affinity are ORed, so the
requirement goes into every term; an empty term matches no node and stays empty. An edit the
object already carries leaves it as it is: the second invocation of the webhook patches nothing.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.errors import BadObject
from webhook.rules.decision import (
    Edit,
    MetadataAnnotation,
    NodeRequirement,
    SchedulerName,
    StorageClass,
    ZoneAnnotation,
    ZonesAnnotation,
)
from webhook.wire.edits import apply
from webhook.wire.patch import apply as apply_patch
from webhook.wire.patch import diff

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
KEY = "topology.kubernetes.io/zone"

operators = st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
expressions = st.fixed_dictionaries(
    {
        "key": st.sampled_from([KEY, "disk", "kubernetes.io/hostname"]),
        "operator": operators,
        "values": st.lists(st.sampled_from(["a", "b", "c", "1"]), max_size=2),
    }
)
fields = st.fixed_dictionaries(
    {"key": st.just("metadata.name"), "operator": st.just("In"), "values": st.just(["n1"])}
)
terms = st.fixed_dictionaries(
    {},
    optional={
        "matchExpressions": st.lists(expressions, max_size=2),
        "matchFields": st.lists(fields, max_size=1),
    },
)
edits_drawn = st.lists(
    st.one_of(
        st.builds(ZoneAnnotation, st.sampled_from(["a", "b"])),
        st.builds(ZonesAnnotation, st.just(("a", "b", "c"))),
        st.builds(NodeRequirement, st.sampled_from([KEY, "example.io/node"]), st.just("a")),
        st.builds(SchedulerName, st.sampled_from(["zoned", "default-scheduler"])),
        st.builds(StorageClass, st.sampled_from(["ssd-a", "ssd-b"])),
        st.builds(
            MetadataAnnotation,
            st.just("strimzi.io/remove-node-ids"),
            st.sampled_from(["[5, 3]", "[1]"]),
        ),
    ),
    max_size=4,
    unique_by=type,  # a decision never asks for two values of one field
)


def pod(node_terms: list[dict[str, Any]] | None, **spec: Any) -> dict[str, Any]:
    """A pod with the given required node terms (None: no affinity at all)."""
    body: dict[str, Any] = {
        "metadata": {"name": "db-0", "managedFields": [{"manager": "kubectl"}]},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec},
    }
    if node_terms is not None:
        body["spec"]["affinity"] = {
            "nodeAffinity": {
                REQUIRED: {"nodeSelectorTerms": node_terms},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": []}}
                ],
            }
        }
    return body


def terms_of(obj: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = obj["spec"]["affinity"]["nodeAffinity"][REQUIRED][
        "nodeSelectorTerms"
    ]
    return result


@settings(max_examples=300)
@given(node_terms=st.none() | st.lists(terms, max_size=3), edits=edits_drawn)
def test_edits_patch_the_object_as_sent_and_a_second_pass_patches_nothing(
    node_terms: list[dict[str, Any]] | None, edits: list[Edit]
) -> None:
    original = pod(node_terms)
    sent = copy.deepcopy(original)
    edited = apply(original, edits)
    assert original == sent, "the object as sent is never changed"
    patched = apply_patch(original, diff(original, edited))
    assert patched == edited
    # The API server sends the patched object back (a fresh copy): nothing more to do.
    again = apply(patched, edits)
    assert again is patched
    assert diff(patched, again) == []


@settings(max_examples=300)
@given(node_terms=st.lists(terms, max_size=3))
def test_a_requirement_goes_into_every_non_empty_term_and_nowhere_else(
    node_terms: list[dict[str, Any]],
) -> None:
    edited = apply(pod(node_terms), [NodeRequirement(KEY, "b")])
    wanted = {"key": KEY, "operator": "In", "values": ["b"]}
    got = terms_of(edited)
    if not node_terms:
        assert got == [{"matchExpressions": [wanted]}]
        return
    assert len(got) == len(node_terms)
    for before, after in zip(node_terms, got, strict=True):
        if not before.get("matchExpressions") and not before.get("matchFields"):
            assert after == before  # matches no node; the requirement would make it match
        else:
            assert wanted in after["matchExpressions"]
            assert after.get("matchFields") == before.get("matchFields")
            rest = [e for e in after["matchExpressions"] if e != wanted]
            assert rest == [e for e in before.get("matchExpressions", []) if e != wanted]
    assert edited["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]


def test_the_patch_names_only_what_changed_with_escaped_paths() -> None:
    original = pod(None, schedulerName="default-scheduler")
    edited = apply(original, [ZoneAnnotation("zone-b"), SchedulerName("zoned")])
    assert sorted(diff(original, edited), key=lambda op: op["path"]) == [
        {"op": "add", "path": "/metadata/annotations", "value": {"stszone.io/zone": "zone-b"}},
        {"op": "replace", "path": "/spec/schedulerName", "value": "zoned"},
    ]
    annotated = {**original, "metadata": {**original["metadata"], "annotations": {"a": "b"}}}
    assert diff(annotated, apply(annotated, [ZoneAnnotation("zone-b")])) == [
        {"op": "add", "path": "/metadata/annotations/stszone.io~1zone", "value": "zone-b"}
    ]


def test_a_metadata_annotation_is_set_beside_the_others_and_kept_when_there() -> None:
    original = pod(None)
    original["metadata"]["annotations"] = {"strimzi.io/next-node-ids": "[10-20]"}
    edit = MetadataAnnotation("strimzi.io/remove-node-ids", "[5, 3]")
    edited = apply(original, [edit])
    assert diff(original, edited) == [
        {
            "op": "add",
            "path": "/metadata/annotations/strimzi.io~1remove-node-ids",
            "value": "[5, 3]",
        }
    ]
    assert edited["metadata"]["annotations"]["strimzi.io/next-node-ids"] == "[10-20]"
    assert apply(edited, [edit]) is edited
    replaced = apply({**original, "metadata": {"annotations": {edit.key: "[1]"}}}, [edit])
    assert replaced["metadata"]["annotations"] == {edit.key: "[5, 3]"}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"affinity": "near"}, "spec.affinity"),
        ({"affinity": {"nodeAffinity": []}}, "spec.affinity.nodeAffinity"),
        ({"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": ["x"]}}}}, "[0]"),
    ],
)
def test_a_field_of_the_wrong_shape_on_the_path_is_named(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(BadObject) as caught:
        apply({"spec": spec}, [NodeRequirement(KEY, "a")])
    assert field in caught.value.message
