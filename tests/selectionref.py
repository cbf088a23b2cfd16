"""Kubernetes' node selection, written again from its Go source for property tests.

Independent of ``webhook/`` (nothing here imports it): each function follows one function of
Kubernetes 1.36, reading the raw JSON of a pod or a PersistentVolume, and says so.

- ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``: ``LazyErrorNodeSelector.Match``
  (empty terms skipped; a term with a parse error does not match), ``nodeSelectorTerm.match``
  (fields compared only when the node has fields, i.e. a name), ``GetRequiredNodeAffinity`` and
  ``RequiredNodeAffinity.Match`` (nodeSelector, then the required terms).
- ``k8s.io/apimachinery/pkg/labels``: ``NewRequirement`` (key a label key; In/NotIn need
  values; Exists/DoesNotExist take none; Gt/Lt take one ``ParseInt``-able value; every value a
  label value) and ``Requirement.Matches``; ``fields.OneTermEqualSelector`` /
  ``OneTermNotEqualSelector`` (a missing field reads ``""``).
- ``k8s.io/component-helpers/storage/volume.CheckNodeAffinity``: a PV's required terms against
  a node built from labels only (no name, so no fields).
- ``pkg/scheduler/framework/plugins/volumezone``: the PV's four topology labels (``__`` joins
  zones, blanks trimmed, an empty part drops the label); a node with none of the four passes;
  otherwise each key, or its GA form, must hold one of the values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

JSON = dict[str, Any]
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"

# content/kube.go and content/dns.go
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _anchored(pattern: re.Pattern[str], text: str) -> bool:
    # Go's RE2 "$" matches only at the very end; Python's also before a final newline.
    return "\n" not in text and pattern.match(text) is not None


def is_label_key(key: str) -> bool:
    """``IsLabelKey`` (= ``IsQualifiedName``)."""
    parts = key.split("/")
    if len(parts) > 2:
        return False
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix or len(prefix) > 253 or not _anchored(_SUBDOMAIN, prefix):
            return False
    return 0 < len(name.encode()) <= 63 and _anchored(_NAME_PART, name)


def is_label_value(value: str) -> bool:
    """``IsValidLabelValue``."""
    return len(value.encode()) <= 63 and _anchored(_VALUE, value)


def parse_int(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``: an optional sign, then one or more ASCII digits."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or any(c not in "0123456789" for c in body):
        return None
    number = int(text)
    return number if -(2**63) <= number <= 2**63 - 1 else None


def new_requirement(expr: Mapping[str, Any]) -> bool:
    """Whether ``nodeSelectorRequirementsAsSelector`` accepts one matchExpression."""
    op = expr.get("operator")
    values = expr.get("values") or []
    if op not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
        return False
    if not is_label_key(expr.get("key") or ""):
        return False
    if op in ("In", "NotIn") and len(values) == 0:
        return False
    if op in ("Exists", "DoesNotExist") and len(values) != 0:
        return False
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            return False
        if any(parse_int(v) is None for v in values):
            return False
    return all(is_label_value(v) for v in values)


def requirement_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """``labels.Requirement.Matches``."""
    key, op, values = expr.get("key") or "", expr["operator"], list(expr.get("values") or [])
    exists = key in labels
    if op == "In":
        return exists and labels[key] in values
    if op == "NotIn":
        return not exists or labels[key] not in values
    if op == "Exists":
        return exists
    if op == "DoesNotExist":
        return not exists
    if not exists:
        return False
    have = parse_int(labels[key])
    if have is None or len(values) != 1:
        return False
    bound = parse_int(values[0])
    if bound is None:
        return False
    return have > bound if op == "Gt" else have < bound


def field_requirement_ok(expr: Mapping[str, Any]) -> bool:
    """Whether ``nodeSelectorRequirementsAsFieldSelector`` accepts one matchFields entry."""
    return expr.get("operator") in ("In", "NotIn") and len(expr.get("values") or []) == 1


def term_match(term: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    """One non-empty term, parsed and matched (``newNodeSelectorTerm``, ``match``)."""
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not all(new_requirement(e) for e in exprs) or not all(map(field_requirement_ok, fields)):
        return False  # parse errors: no match
    if exprs and not all(requirement_matches(e, labels) for e in exprs):
        return False
    node_fields = {"metadata.name": name} if name else {}
    if fields and node_fields:
        for f in fields:
            have = node_fields.get(f.get("key") or "", "")
            want = (f.get("values") or [""])[0]
            if (have == want) != (f["operator"] == "In"):
                return False
    return True


def selector_match(terms: list[JSON], labels: Mapping[str, str], name: str) -> bool:
    """``LazyErrorNodeSelector.Match``: empty terms skipped, the rest ORed."""
    for term in terms:
        if not (term.get("matchExpressions") or term.get("matchFields")):
            continue  # nil or empty term selects no objects
        if term_match(term, labels, name):
            return True
    return False


def pod_match(spec: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    """``RequiredNodeAffinity.Match`` of ``GetRequiredNodeAffinity(pod)``, and
    ``spec.nodeName`` (the kubelet admits only its own node's pods)."""
    if spec.get("nodeName") and spec["nodeName"] != name:
        return False
    selector = spec.get("nodeSelector") or {}
    if selector and not all(k in labels and labels[k] == v for k, v in selector.items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED)
    if required is None:
        return True
    return selector_match(required.get("nodeSelectorTerms") or [], labels, name)


TOPOLOGY = (
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
)
_GA = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}


def label_zones(value: str) -> set[str] | None:
    """``LabelZonesToSet``."""
    zones = set()
    for part in value.split("__"):
        trimmed = part.strip()
        if trimmed == "":
            return None
        zones.add(trimmed)
    return zones


def volume_zone(pv: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """The VolumeZone filter for one bound PV on a node with ``labels``."""
    pv_labels = (pv.get("metadata") or {}).get("labels") or {}
    if not any(k in labels for k in TOPOLOGY):
        return True
    for key in TOPOLOGY:
        if key not in pv_labels:
            continue
        zones = label_zones(pv_labels[key])
        if zones is None:
            continue  # "failed to parse PV's topology label, ignoring the label"
        have = labels.get(key)
        if have is None:
            have = labels.get(_GA.get(key, key))
        if have is None or have not in zones:
            return False
    return True


def check_node_affinity(pv: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """``CheckNodeAffinity``: the node is built from its labels alone."""
    affinity = (pv.get("spec") or {}).get("nodeAffinity")
    if affinity is None or affinity.get("required") is None:
        return True
    return selector_match(affinity["required"].get("nodeSelectorTerms") or [], labels, "")


def volume_admits(pv: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Both volume filters kube-scheduler runs for a bound PV."""
    return check_node_affinity(pv, labels) and volume_zone(pv, labels)
