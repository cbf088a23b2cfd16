"""Kubernetes name rules, exactly as the API server applies them to what stszone writes. Pure.

stszone copies annotation values into objects the API server validates later: a zone becomes a
label value in a pod's nodeAffinity, a topology key or node label a label key, a scheduler name
``spec.schedulerName`` (a DNS-1123 subdomain), a filled storage-class template a PVC's
``spec.storageClassName`` (a DNS-1123 subdomain). A value the API server would refuse there must
be refused on the StatefulSet instead, where the person who wrote it reads the message.

The checks follow ``k8s.io/apimachinery/pkg/util/validation``. Matching is whole-string
(``fullmatch``): Python's ``re.match`` with ``$`` also accepts a trailing newline, which is what a
YAML block scalar (``key: |``) leaves at the end of a value.
"""

from __future__ import annotations

import re
from typing import Final

#: ``IsDNS1123Subdomain``: dot-separated DNS-1123 labels, lower case, at most 253 characters.
DNS_SUBDOMAIN_MAX: Final = 253
_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*")

#: ``IsQualifiedName`` name part and ``IsValidLabelValue``: at most 63 characters,
#: alphanumerics, ``-``, ``_`` and ``.``, alphanumeric at both ends.
NAME_MAX: Final = 63
_NAME = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def is_dns_label(value: str) -> bool:
    """Whether ``value`` is a DNS-1123 label (namespace and Service names), at most 63
    characters."""
    return len(value) <= NAME_MAX and re.fullmatch(_DNS_LABEL, value) is not None


def is_dns_subdomain(value: str) -> bool:
    """Whether ``value`` is a DNS-1123 subdomain (scheduler names, StorageClass names)."""
    return len(value) <= DNS_SUBDOMAIN_MAX and _DNS_SUBDOMAIN.fullmatch(value) is not None


def is_qualified_name(value: str) -> bool:
    """Whether ``value`` is a qualified name, ``[prefix/]name`` (label keys, condition types).

    The prefix, when present, is a non-empty DNS-1123 subdomain; the name is required.
    """
    parts = value.split("/")
    if len(parts) == 2:
        prefix, name = parts
        if not prefix or not is_dns_subdomain(prefix):
            return False
    elif len(parts) == 1:
        name = parts[0]
    else:
        return False
    return len(name) <= NAME_MAX and _NAME.fullmatch(name) is not None


def is_label_value(value: str) -> bool:
    """Whether ``value`` is a valid, non-empty label value (a zone name).

    Kubernetes also accepts the empty label value; stszone never needs it (an empty zone name
    is always a mistake), so it is refused here.
    """
    return len(value) <= NAME_MAX and _NAME.fullmatch(value) is not None
