"""Reading JSON objects field by field (``webhook.model.objects``): what a wrong shape is called.

The message of a malformed object names the field by its path from the object's root, as
``kubectl explain`` does; a field at the root is named alone. A pod the live view cannot
record is named with the field that stopped it (``webhook.model.podspec``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests import builders as b
from webhook.errors import BadObject
from webhook.model import objects
from webhook.model.extract import pod_info

READERS: list[tuple[Callable[..., Any], Any, str]] = [
    (objects.mapping, "x", "spec must be an object, got str"),
    (objects.sequence, "x", "spec must be a list, got str"),
    (objects.string, 1, "spec must be a string, got int"),
    (lambda o, k, **kw: objects.integer(o, k, default=0, **kw), "1", "spec must be an integer, got str"),
    (objects.str_map, {"a": 1}, "spec.a must be a string, got int"),
    (objects.dicts, [{}, "x"], "spec[1] must be an object"),
]  # fmt: skip


@pytest.mark.parametrize(("read", "value", "message"), READERS)
def test_a_field_at_the_root_is_named_alone(
    read: Callable[..., Any], value: Any, message: str
) -> None:
    with pytest.raises(BadObject) as raised:
        read({"spec": value}, "spec")
    assert raised.value.message == message


@pytest.mark.parametrize(("read", "value", "message"), READERS)
def test_a_field_below_the_root_is_named_by_its_path(
    read: Callable[..., Any], value: Any, message: str
) -> None:
    with pytest.raises(BadObject) as raised:
        read({"spec": value}, "spec", path="items[0]")
    assert raised.value.message == f"items[0].{message}"


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        (("spec", "volumes"), "x", "spec.volumes must be a list, got str"),
        (("spec", "volumes", 0, "persistentVolumeClaim"), "x", "spec.volumes[].persistentVolumeClaim must be an object, got str"),
        (("spec", "volumes", 0, "persistentVolumeClaim", "claimName"), 7, "spec.volumes[].persistentVolumeClaim.claimName must be a string, got int"),
        (("spec", "volumes", 0, "name"), 7, "spec.volumes[].name must be a string, got int"),
        (("status", "phase"), 7, "status.phase must be a string, got int"),
    ],
)  # fmt: skip
def test_a_pod_the_view_cannot_record_names_the_field(
    where: tuple[str | int, ...], value: Any, message: str
) -> None:
    pod = b.sts_pod("db", 0, phase="Running")
    parent: Any = pod
    for step in where[:-1]:
        parent = parent[step]
    parent[where[-1]] = value
    with pytest.raises(BadObject) as raised:
        pod_info(pod)
    assert raised.value.message == message
