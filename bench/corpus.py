"""The benchmark's request corpus: recorded AdmissionReviews plus ones built for the live cluster.

* every recorded Pod CREATE and Scale UPDATE review of ``tests/fixtures/admission`` (odd numbers
  to ``/mutate``, even ones to ``/validate``, as the API server sent them);
* Pod CREATE reviews for ordinals of generated StatefulSets (the recorded pod 003, renamed),
  to both endpoints: each resolves its set, its claim and its volume in the 300k-object view;
* Scale UPDATE reviews of generated sets to ``/validate``: up, down keeping every zone (allowed
  after locating 50 pods through their nodes), down to one (denied: zones lost).

Pod reviews sent to ``/validate`` carry the pod as ``/mutate`` left it (:func:`chained`).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import jsonpatch

from bench.cluster import namespace_name, set_name

FIXTURES: Final = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "admission"

Item = tuple[str, bytes]  # (path, body)


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def recorded() -> list[Item]:
    items: list[Item] = []
    for path in sorted(FIXTURES.glob("*.json")):
        number, kind = int(path.name[:3]), path.name.split("-")[1]
        if kind not in ("Pod", "Scale"):
            continue
        endpoint = "/mutate" if number % 2 else "/validate"
        items.append((endpoint, path.read_bytes()))
    return items


def pod_review(namespace: str, sts: str, ordinal: int) -> dict[str, Any]:
    """The recorded Pod CREATE of ``cap/db-0``, renamed to ordinal ``ordinal`` of ``sts``."""
    review = _load("003-Pod-CREATE.json")
    request = review["request"]
    request["uid"] = str(uuid.uuid4())
    name = f"{sts}-{ordinal}"
    request["name"], request["namespace"] = name, namespace
    pod = request["object"]
    meta = pod["metadata"]
    meta.update(name=name, generateName=f"{sts}-", namespace=namespace)
    meta["labels"].update(
        {
            "app": sts,
            "apps.kubernetes.io/pod-index": str(ordinal),
            "statefulset.kubernetes.io/pod-name": name,
        }
    )
    meta["ownerReferences"][0]["name"] = sts
    spec = pod["spec"]
    spec["hostname"], spec["subdomain"] = name, sts
    for volume in spec["volumes"]:
        if "persistentVolumeClaim" in volume:
            volume["persistentVolumeClaim"]["claimName"] = f"data-{sts}-{ordinal}"
    return review


def scale_review(namespace: str, sts: str, *, old: int, new: int) -> dict[str, Any]:
    """A ``statefulsets/scale`` UPDATE from ``old`` to ``new`` replicas (recorded shape, 014)."""
    review = _load("014-Scale-UPDATE.json")
    request = review["request"]
    request["uid"] = str(uuid.uuid4())
    request["name"], request["namespace"] = sts, namespace
    for key, replicas in (("object", new), ("oldObject", old)):
        scale = request[key]
        scale["metadata"].update(name=sts, namespace=namespace)
        scale["spec"]["replicas"] = replicas
        scale["status"]["replicas"] = old
    return review


def built(*, sets: int = 20, replicas: int = 50) -> list[Item]:
    items: list[Item] = []
    for k in range(sets):
        ns, sts = namespace_name(k % 50), set_name((k * 7) % 40)
        ordinal = (k * 13) % replicas
        body = json.dumps(pod_review(ns, sts, ordinal)).encode()
        items += [("/mutate", body), ("/validate", body)]
        if k % 10 == 0:  # about one review in nine is a scale, as in the recorded traffic
            for new in (replicas + 10, replicas - 20, 1):
                review = scale_review(ns, sts, old=replicas, new=new)
                items.append(("/validate", json.dumps(review).encode()))
    return items


def corpus() -> list[Item]:
    """Recorded then built items, interleaved so every stretch of the run sees both."""
    a, b = recorded(), built()
    mixed: list[Item] = []
    for i in range(max(len(a), len(b))):
        mixed += a[i : i + 1] + b[i : i + 1]
    return mixed


def write(directory: Path, items: list[Item]) -> Path:
    """Write the corpus as files for wrk's Lua script: ``index`` lists ``path file`` lines."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, (path, body) in enumerate(items):
        name = directory / f"{i:03d}.json"
        name.write_bytes(body)
        lines.append(f"{path} {name}")
    index = directory / "index"
    index.write_text("\n".join(lines) + "\n")
    return index


def chained(items: list[Item], mutate: Callable[[bytes], dict[str, Any]]) -> list[Item]:
    """Pod reviews for ``/validate`` carry the pod as stszone's ``/mutate`` left it.

    The API server calls validating webhooks after the mutating ones, so what ``/validate``
    really sees is the mutated pod (recorded reviews came from a cluster without stszone).
    """
    out: list[Item] = []
    for path, body in items:
        review = json.loads(body)
        request = review["request"]
        if path == "/validate" and request["kind"]["kind"] == "Pod":
            answer = mutate(body)["response"]
            if answer.get("patch"):
                ops = json.loads(base64.b64decode(answer["patch"]))
                request["object"] = jsonpatch.apply_patch(request["object"], ops)
                body = json.dumps(review).encode()
        out.append((path, body))
    return out
