"""Compare the objects this tree's patches make with another checkout's, review by review.

    python tools/compare_patches.py --root ../base

For every recorded AdmissionReview (``tests/fixtures/admission/``) and each offline view (a zone
list; the guard example's saved cluster, with the reviews' namespaces opted in, as the API
server sends stszone nothing of other namespaces), ``stszone review --endpoint mutate`` answers
it from this tree and from the checkout in ``--root``; each answer's patch is applied to the
object as the API server sent it, and the two resulting objects are compared. A change to how
patches are made (what they are diffed against, how they are rendered) must leave every
resulting object as it was; a change of what stszone decides shows here too, by design.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

HERE = Path(__file__).resolve().parent.parent
GUARD_CLUSTER = HERE / "deploy/examples/guard/cluster.yaml"


def opted_in_cluster(reviews: list[Path], out: Path) -> Path:
    """The guard example's cluster with every namespace of ``reviews`` opted in, written to
    ``out``."""
    cluster = yaml.safe_load(GUARD_CLUSTER.read_text())
    have = {i["metadata"]["name"] for i in cluster["items"] if i.get("kind") == "Namespace"}
    wanted = {json.loads(p.read_text())["request"].get("namespace") or "" for p in reviews}
    for name in sorted(wanted - have - {""}):
        meta = {"name": name, "labels": {"stszone.io/enabled": "true"}}
        cluster["items"].append({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
    out.write_text(yaml.safe_dump(cluster))
    return out


def answer(root: Path, review: Path, view: list[str]) -> dict[str, Any]:
    """The response of ``stszone review`` run from the source tree ``root``."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("KUBECONFIG", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "review",
            "--offline",
            "--endpoint",
            "mutate",
            *view,
            "-",
        ],
        input=review.read_bytes(),
        capture_output=True,
        check=True,
        cwd=root,
        env=env,
    )
    response: dict[str, Any] = json.loads(done.stdout)["response"]
    return response


def patched(review: dict[str, Any], response: dict[str, Any]) -> Any:
    """The object as sent with the response's patch applied (itself when there is none)."""
    sent = review["request"].get("object")
    if not response.get("patch"):
        return sent
    ops = json.loads(base64.b64decode(response["patch"]))
    return jsonpatch.apply_patch(sent, ops, in_place=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", type=Path, required=True, help="the other checkout")
    args = parser.parse_args(argv)
    reviews = sorted((HERE / "tests/fixtures/admission").glob("*.json"))
    with tempfile.TemporaryDirectory() as tmp:
        cluster = opted_in_cluster(reviews, Path(tmp) / "cluster.yaml")
        views = {
            "zones": ["--zones", "zone-a,zone-b,zone-c"],
            "cluster": ["--cluster", str(cluster)],
        }
        return compare(reviews, views, root=args.root.resolve())


def compare(reviews: list[Path], views: dict[str, list[str]], *, root: Path) -> int:
    """Print each review whose resulting object differs between this tree and ``root``."""
    cases = patches = differ = 0
    for path in reviews:
        review = json.loads(path.read_text())
        for name, view in views.items():
            ours, theirs = answer(HERE, path, view), answer(root, path, view)
            cases += 1
            patches += bool(ours.get("patch"))
            same = patched(review, ours) == patched(review, theirs)
            same = same and ours.get("allowed") == theirs.get("allowed")
            if not same:
                differ += 1
                print(f"differs: {path.name} ({name})")
    print(f"{cases} cases ({len(reviews)} reviews x {len(views)} views), {patches} patched here")
    print(f"resulting objects identical in {cases - differ}, different in {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
