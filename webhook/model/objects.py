"""Typed, defensive access to Kubernetes objects held as plain JSON.

The API server only sends well-formed objects, but ``stszone review`` reads files written by
hand and a fuzzer sends anything. Every accessor either returns the expected type (missing and
``null`` become the empty value) or raises :class:`BadObject` naming the field path, so a wrong
shape becomes a denial with a reason instead of a crash. :func:`with_annotation` is the one
writer: copy on write, so a mutation and its original share everything it does not touch.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import repeat
from typing import Any, Final

from webhook.errors import BadObject

JSON = dict[str, Any]


def _where(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def mapping(obj: Mapping[str, Any], key: str, *, path: str = "") -> JSON:
    """``obj[key]`` as a dict; ``{}`` when missing or null."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadObject(f"{_where(path, key)} must be an object, got {type(value).__name__}")
    return value


def sequence(obj: Mapping[str, Any], key: str, *, path: str = "") -> list[Any]:
    """``obj[key]`` as a list; ``[]`` when missing or null."""
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadObject(f"{_where(path, key)} must be a list, got {type(value).__name__}")
    return value


def string(obj: Mapping[str, Any], key: str, *, path: str = "") -> str:
    """``obj[key]`` as a str; ``""`` when missing or null."""
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadObject(f"{_where(path, key)} must be a string, got {type(value).__name__}")
    return value


def integer(obj: Mapping[str, Any], key: str, *, default: int, path: str = "") -> int:
    """``obj[key]`` as an int (bool refused); ``default`` when missing or null."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadObject(f"{_where(path, key)} must be an integer, got {type(value).__name__}")
    return value


#: Kubernetes' ``int32`` fields (replicas, ordinals): the API server stores no larger value.
INT32: Final = range(-(2**31), 2**31)


def int32(obj: Mapping[str, Any], key: str, *, default: int, path: str = "") -> int:
    """``obj[key]`` as an ``int32`` field: :func:`integer`, refused outside that range (a
    hand-written file's ``replicas: 1e30`` would otherwise reach ``range`` and overflow)."""
    value = integer(obj, key, default=default, path=path)
    if value not in INT32:
        raise BadObject(f"{_where(path, key)} must be a 32-bit integer, got {value}")
    return value


def str_map(obj: Mapping[str, Any], key: str, *, path: str = "") -> dict[str, str]:
    """A labels/annotations style ``map[string]string``; ``{}`` when missing."""
    value = mapping(obj, key, path=path)
    # Every value checked in one C-level pass (labels are read on every request); the loop
    # below only looks for the one to name.
    if not all(map(isinstance, value.values(), repeat(str))):
        for k, v in value.items():
            if not isinstance(v, str):
                where = _where(_where(path, key), k)
                raise BadObject(f"{where} must be a string, got {type(v).__name__}")
    return value


def dicts(obj: Mapping[str, Any], key: str, *, path: str = "") -> list[JSON]:
    """A list whose items must all be objects."""
    items = sequence(obj, key, path=path)
    if not all(map(isinstance, items, repeat(dict))):  # one C-level pass, as in str_map
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise BadObject(f"{_where(path, key)}[{i}] must be an object")
    return items


def with_annotation(obj: JSON, key: str, value: str) -> JSON:
    """Copy of ``obj`` with one annotation set (metadata and annotations copied, rest shared)."""
    meta = dict(mapping(obj, "metadata"))
    meta["annotations"] = {**str_map(meta, "annotations", path="metadata"), key: value}
    return {**obj, "metadata": meta}
