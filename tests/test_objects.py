"""Reading JSON objects field by field (``webhook.model.objects``): what a wrong shape is called.

The message of a malformed object names the field by its path from the object's root, as
``kubectl explain`` does; a field at the root is named alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from webhook.errors import BadObject
from webhook.model import objects

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
