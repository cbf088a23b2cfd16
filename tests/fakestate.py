"""The fake API server's storage and wire shapes: objects as JSON bytes, history, event lines.

Kept apart from the HTTP side (:mod:`tests.fakeapi`) so the benchmark can fill it with 300k
generated objects cheaply: an object is stored as the bytes the server will send, plus the few
fields it filters on (key, labels). Shapes follow ``tests/fixtures/api/``: list items carry no
``kind``/``apiVersion``, watch objects do, metadata-only items are ``PartialObjectMetadata``.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

API_FIXTURES: Final = Path(__file__).parent / "fixtures" / "api"

#: resource -> (URL path, kind, apiVersion, namespaced)
RESOURCES: Final = {
    "nodes": ("/api/v1/nodes", "Node", "v1", False),
    "persistentvolumes": ("/api/v1/persistentvolumes", "PersistentVolume", "v1", False),
    "persistentvolumeclaims": (
        "/api/v1/persistentvolumeclaims",
        "PersistentVolumeClaim",
        "v1",
        True,
    ),
    "statefulsets": ("/apis/apps/v1/statefulsets", "StatefulSet", "apps/v1", True),
    # OpenKruise Advanced StatefulSets, as the CRD serves them (v1beta1): served, never in
    # fixtures; discovery is not served, so the live view leaves them alone.
    "kruisesets": (
        "/apis/apps.kruise.io/v1beta1/statefulsets",
        "StatefulSet",
        "apps.kruise.io/v1beta1",
        True,
    ),
    "pods": ("/api/v1/pods", "Pod", "v1", True),
    "namespaces": ("/api/v1/namespaces", "Namespace", "v1", False),
    # What ``--manage-certs`` reads and writes (tests.fakewrites): served, never in fixtures.
    "secrets": ("/api/v1/secrets", "Secret", "v1", True),
    "leases": ("/apis/coordination.k8s.io/v1/leases", "Lease", "coordination.k8s.io/v1", True),
    "mutatingwebhookconfigurations": (
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        "admissionregistration.k8s.io/v1",
        False,
    ),
    "validatingwebhookconfigurations": (
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        "admissionregistration.k8s.io/v1",
        False,
    ),
    # What the Event recorder writes (tests.fakeevents): served, never in fixtures.
    "events": ("/apis/events.k8s.io/v1/events", "Event", "events.k8s.io/v1", True),
}

JSON = dict[str, Any]
Key = tuple[str, str]


@dataclass(slots=True)
class Stored:
    """One object as served: the list-item bytes, and its metadata-only bytes made on demand."""

    key: Key
    labels: dict[str, str]
    body: bytes
    _metadata: bytes | None = field(default=None, repr=False)

    def metadata_only(self) -> bytes:
        """The ``PartialObjectMetadata`` form the API server converts this object to."""
        if self._metadata is None:
            meta = json.loads(self.body)["metadata"]
            partial = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1"}
            self._metadata = json.dumps({**partial, "metadata": meta}).encode()
        return self._metadata


@dataclass(frozen=True, slots=True)
class Change:
    """One write: ``before`` and ``after`` (None for ADDED and DELETED respectively)."""

    rv: int
    type: str
    before: Stored | None
    after: Stored | None


def stored(resource: str, obj: JSON) -> Stored:
    """Stored form of a full object (``kind``/``apiVersion`` dropped, as list items have none)."""
    meta = obj["metadata"]
    namespaced = RESOURCES[resource][3]
    key = (meta.get("namespace", "") if namespaced else "", meta["name"])
    item = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
    return Stored(key, dict(meta.get("labels") or {}), json.dumps(item).encode())


class Objects:
    """All objects of every resource, one resourceVersion clock, and the watchable history."""

    def __init__(self, *, rv: int = 666) -> None:
        self.rv = rv
        self.tables: dict[str, dict[Key, Stored]] = {r: {} for r in RESOURCES}
        self.history: dict[str, list[Change]] = {r: [] for r in RESOURCES}
        #: Watches from a resourceVersion older than this get 410 (etcd compaction).
        self.compacted = 0

    def write(self, resource: str, obj: JSON | None, *, key: Key | None = None) -> Change:
        """Create/update ``obj`` (or delete ``key`` when ``obj`` is None); returns the change."""
        self.rv += 1
        if obj is not None:
            obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
            new: Stored | None = stored(resource, obj)
            assert new is not None
            key = new.key
        else:
            new = None
        assert key is not None
        old = self.tables[resource].get(key)
        if new is not None:
            self.tables[resource][key] = new
        elif old is not None:
            del self.tables[resource][key]
            # DELETED carries the object's last state at the deletion's resourceVersion.
            last = json.loads(old.body)
            last["metadata"]["resourceVersion"] = str(self.rv)
            old = Stored(old.key, old.labels, json.dumps(last).encode())
        kind = "DELETED" if new is None else ("MODIFIED" if old is not None else "ADDED")
        change = Change(self.rv, kind, old, new)
        if new is not None or old is not None:
            self.history[resource].append(change)
        return change

    def since(self, resource: str, rv: int) -> list[Change]:
        """Changes after ``rv``, oldest first."""
        history = self.history[resource]
        start = bisect.bisect_right([c.rv for c in history], rv)
        return history[start:]

    def compact(self) -> None:
        """Forget history: watches from any version before now get ``410 Gone``."""
        self.compacted = self.rv
        for history in self.history.values():
            history.clear()

    def load_raw(self, resource: str, items: Iterable[Stored]) -> None:
        """Bulk-load stored objects with no history (the benchmark's 300k objects)."""
        table = self.tables[resource]
        for item in items:
            table[item.key] = item

    def load_fixtures(self) -> None:
        """The recorded cluster: 6 nodes, 12 PVs, 12 claims, 4 StatefulSets, 12 pods."""
        full_node = _fixture("nodes-list-limit2")["items"][0]
        for partial in _fixture("nodes-metadata-list")["items"]:
            # Only two full Nodes were recorded; the others get the first one's spec and status.
            self._load("nodes", {**full_node, "metadata": partial["metadata"]})
        for resource, name in (
            ("persistentvolumes", "pv-list"),
            ("persistentvolumeclaims", "pvc-list"),
            ("statefulsets", "statefulsets-list"),
            ("pods", "sts-pods-list"),
            ("namespaces", "namespaces-list-empty"),
        ):
            for item in _fixture(name)["items"]:
                self._load(resource, item)

    def _load(self, resource: str, obj: JSON) -> None:
        # Recorded objects keep their own resourceVersions (all below the list's 666).
        item = stored(resource, obj)
        self.tables[resource][item.key] = item


def _fixture(name: str) -> JSON:
    data: JSON = json.loads((API_FIXTURES / f"{name}.json").read_text())
    return data


def http_fixture(name: str) -> tuple[int, bytes]:
    """(status, body) of a recorded ``.http`` response (status line, headers, blank line, body)."""
    raw = (API_FIXTURES / f"{name}.http").read_bytes().replace(b"\r\n", b"\n")
    head, _, body = raw.partition(b"\n\n")
    return int(head.split(b"\n", 1)[0].split()[1]), body.strip()


def matches(selector: str, labels: dict[str, str]) -> bool:
    """Equality-based label selector: ``k``, ``!k``, ``k=v``, ``k==v``, ``k!=v``, comma-ANDed."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


# --- wire shapes ------------------------------------------------------------------------


def representation(accept: str, *, watch: bool) -> bool | None:
    """True for metadata-only, False for full objects, None when nothing acceptable is asked."""
    wanted = "PartialObjectMetadata" if watch else "PartialObjectMetadataList"
    if not accept.strip():
        return False
    for media in accept.split(","):
        mime, *rest = (part.strip() for part in media.split(";"))
        params = dict(p.split("=", 1) for p in rest if "=" in p)
        if mime not in ("application/json", "application/*", "*/*"):
            continue
        if "as" not in params:
            return False
        if (params["as"], params.get("g"), params.get("v")) == (wanted, "meta.k8s.io", "v1"):
            return True
    return None


def field_matches(selector: str, stored: Stored) -> bool:
    """The one field selector served: ``metadata.name=NAME`` (what a watch of one object uses)."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        field, _, value = term.replace("==", "=").partition("=")
        if field.strip() != "metadata.name":
            raise ValueError(f"field selector {term!r} is not served by the fake")
        if stored.key[1] != value.strip():
            return False
    return True


def event_line(
    kind: str,
    api_version: str,
    change: Change,
    selector: str,
    *,
    metadata: bool,
    fields: str = "",
) -> bytes | None:
    def selected(stored: Stored | None) -> bool:
        return (
            stored is not None
            and matches(selector, stored.labels)
            and field_matches(fields, stored)
        )

    before, after = selected(change.before), selected(change.after)
    if change.type == "DELETED":
        obj, event = (change.before, "DELETED") if before else (None, "")
    elif after:
        obj, event = change.after, ("MODIFIED" if before else "ADDED")
    else:  # left the selector: a real server sends DELETED with the new state
        obj, event = (change.after, "DELETED") if before else (None, "")
    if obj is None:
        return None
    body = obj.metadata_only() if metadata else with_kind(obj.body, kind, api_version)
    return b'{"type":"' + event.encode() + b'","object":' + body + b"}\n"


def with_kind(body: bytes, kind: str, api_version: str) -> bytes:
    return f'{{"kind":"{kind}","apiVersion":"{api_version}",'.encode() + body[1:]


def bookmark_line(kind: str, api_version: str, rv: int, metadata: bool) -> bytes:
    obj: JSON = {"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": str(rv)}}
    if metadata:
        obj.update(kind="PartialObjectMetadata", apiVersion="meta.k8s.io/v1")
    elif kind == "Pod":
        obj.update(spec={"containers": None}, status={})  # as recorded
    return json.dumps({"type": "BOOKMARK", "object": obj}).encode() + b"\n"


def expired_line(rv: int, current: int) -> bytes:
    _, body = http_fixture("sts-pods-watch-expired")
    event = json.loads(body)
    event["object"]["message"] = f"too old resource version: {rv} ({current})"
    return json.dumps(event).encode() + b"\n"


def error_line(code: int) -> bytes:
    """A watch ERROR event carrying a Status of ``code`` (e.g. an etcd error as a 500)."""
    status: JSON = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    status.update(message=f"injected watch error {code}", reason="InternalError", code=code)
    return json.dumps({"type": "ERROR", "object": status}).encode() + b"\n"
