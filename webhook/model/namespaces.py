"""Namespaces as the view holds them: whether each is opted in. Pure."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import msgspec

from webhook.errors import BadObject
from webhook.model import objects
from webhook.model.annotations import ENABLED


class NamespaceInfo(msgspec.Struct, frozen=True, gc=False):
    """A namespace and whether it is opted in (label ``stszone.io/enabled=true``)."""

    name: str
    enabled: bool

    @property
    def key(self) -> str:
        return self.name


def namespace_info(obj: Mapping[str, Any]) -> NamespaceInfo:
    """Record of a Namespace."""
    if not isinstance(obj, Mapping):
        raise BadObject("object must be a JSON object")
    meta = objects.mapping(obj, "metadata")
    name = objects.string(meta, "name", path="metadata")
    if not name:
        raise BadObject("metadata.name is missing")
    labels = objects.str_map(meta, "labels")
    return NamespaceInfo(name=sys.intern(name), enabled=labels.get(ENABLED) == "true")
