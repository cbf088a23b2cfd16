"""patch.diff: jsonpatch's own patch of (original, edited), handed only the branches that differ."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.wire.patch import apply, diff

keys = st.sampled_from(["a", "b", "c/d", "e~f", "g", "metadata", "annotations"])
scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4)
trees = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(keys, children, max_size=4),
    max_leaves=20,
)
documents = st.dictionaries(keys, trees, max_size=5)
# An edit: a path of keys, then set a value or delete the key.
edits = st.lists(
    st.tuples(st.lists(keys, min_size=1, max_size=3), st.booleans(), trees), max_size=4
)


def copy_on_write(
    doc: dict[str, Any], edit_list: list[tuple[list[str], bool, Any]]
) -> dict[str, Any]:
    """Apply edits the way mutations do: copy each dict on the way down, share the rest."""
    root = dict(doc)
    for path, delete, value in edit_list:
        node = root
        for key in path[:-1]:
            child = node.get(key)
            child = dict(child) if isinstance(child, dict) else {}
            node[key] = child
            node = child
        if delete:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value
    return root


@settings(max_examples=400)
@given(doc=documents, edit_list=edits)
def test_diff_applies_to_the_full_original(doc: dict[str, Any], edit_list: list[Any]) -> None:
    """Additions, replacements and deletions at any depth (keys with / and ~ included)."""
    before = copy.deepcopy(doc)
    mutated = copy_on_write(doc, edit_list)
    patch = diff(doc, mutated)
    assert apply(doc, patch) == mutated
    assert doc == before, "diff must not modify its inputs"


def canonical(ops: list[dict[str, Any]]) -> list[str]:
    """A patch's operations as sortable text: jsonpatch walks a dict's keys as a set, so the
    order of its operations on one object follows string hashing, not the documents."""
    return sorted(json.dumps(op, sort_keys=True) for op in ops)


@settings(max_examples=400)
@given(doc=documents, edit_list=edits)
def test_diff_is_make_patch_of_the_whole_objects(doc: dict[str, Any], edit_list: list[Any]) -> None:
    """The shared branches it leaves out change nothing: applied to the object as sent, it
    gives what ``jsonpatch.make_patch`` of the two whole objects gives, in as many operations,
    and the very same ones where no value moves. A move may fill another of two equal added
    values: jsonpatch pairs a removed value with an equal added one in the order it walks a
    dict's keys, which follows string hashing."""
    mutated = copy_on_write(doc, edit_list)
    whole = jsonpatch.make_patch(copy.deepcopy(doc), copy.deepcopy(mutated)).patch
    ours = diff(doc, mutated)
    assert apply(doc, ours) == apply(doc, whole) == mutated
    assert len(ours) == len(whole)
    if not any(op["op"] == "move" for op in (*ours, *whole)):
        assert canonical(ours) == canonical(whole)


@settings(max_examples=400)
@given(doc=documents, edit_list=edits)
def test_reinvocation_gives_an_empty_patch(doc: dict[str, Any], edit_list: list[Any]) -> None:
    """What the API server sends back is already done: the patched object (a fresh copy that
    shares nothing with ``mutated``) differs from the mutated one by nothing, and a second pass
    of the same mutation over it (``reinvocationPolicy: IfNeeded``) patches nothing."""
    mutated = copy_on_write(doc, edit_list)
    patched = apply(doc, diff(doc, mutated))
    assert diff(patched, mutated) == []
    assert diff(patched, copy_on_write(patched, edit_list)) == []
    assert diff(mutated, copy_on_write(mutated, edit_list)) == []


def test_identical_objects_give_no_patch() -> None:
    """No change, no patch (reinvocation)."""
    doc = {"metadata": {"annotations": {"x": "1"}}, "spec": {"containers": [{"name": "a"}]}}
    assert diff(doc, copy.deepcopy(doc)) == []
    assert diff(doc, doc) == []


def test_annotation_key_with_slash_is_escaped() -> None:
    """jsonpatch escapes '/' as ~1, so stszone.io/zone lands at the right path."""
    doc: dict[str, Any] = {"metadata": {"annotations": {"a": "b"}}}
    mutated = {"metadata": {"annotations": {"a": "b", "stszone.io/zone": "z"}}}
    assert diff(doc, mutated) == [
        {"op": "add", "path": "/metadata/annotations/stszone.io~1zone", "value": "z"}
    ]
