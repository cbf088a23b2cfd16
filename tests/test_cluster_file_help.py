"""The saved cluster every command's ``--cluster`` help asks for: one command, said alike, that
saves what the view reads, the Namespace objects (their opt-in label) included, and the
KafkaNodePools and Advanced StatefulSets of a cluster that serves their CRDs.

kubectl is played by a small program (:data:`FAKE_KUBECTL`) that serves a chosen set of
resource types: ``kubectl api-resources -o name`` names them, and ``kubectl get`` refuses the
whole command, as kubectl does, when one of the types it is given is not served.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders as b
from tests.helpexamples import ROOT, help_examples, help_text, run_example
from webhook import cli

COMMANDS = ("serve", "review", "audit", "explain", "rebalance")
SAVED = re.compile(r"from a saved `(kubectl get .+? -A) -o yaml`")
README = (ROOT / "README.md").read_text()
FIXTURES = ROOT / "tests" / "fixtures"

#: The resource types every cluster serves, by the names the saved command gives kubectl
#: (kubectl takes ``pv`` for ``persistentvolumes``): the kind and group each lists.
CORE = {
    "nodes": ("Node", "v1"),
    "pv": ("PersistentVolume", "v1"),
    "pvc": ("PersistentVolumeClaim", "v1"),
    "statefulsets.apps": ("StatefulSet", "apps/v1"),
    "sts": ("StatefulSet", "apps/v1"),
    "pods": ("Pod", "v1"),
    "namespaces": ("Namespace", "v1"),
}
#: The resource types only a cluster with Strimzi's and OpenKruise's CRDs serves.
CRDS = {
    "kafkanodepools.kafka.strimzi.io": ("KafkaNodePool", "kafka.strimzi.io/v1"),
    "statefulsets.apps.kruise.io": ("StatefulSet", "apps.kruise.io/v1beta1"),
}

#: kubectl as far as the saved command uses it: ``api-resources -o name`` and
#: ``get TYPES -A -o json|yaml`` over the objects of $FAKE_CLUSTER.
FAKE_KUBECTL = """\
import json, os, sys
served = json.loads(os.environ["FAKE_SERVED"])
args = sys.argv[1:]
if args == ["api-resources", "-o", "name"]:
    print("\\n".join(served))
    sys.exit(0)
if args[0] != "get" or args[2:] not in (["-A", "-o", "json"], ["-A", "-o", "yaml"]):
    sys.exit(f"fake kubectl: {args} is not what the saved command runs")
kinds = []
for name in args[1].split(","):
    if name not in served:
        sys.exit(f'error: the server doesn\\'t have a resource type "{name}"')
    kinds.append(tuple(served[name]))
items = json.load(open(os.environ["FAKE_CLUSTER"]))["items"]
listed = [o for kind in kinds for o in items if (o["kind"], o["apiVersion"]) == kind]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": listed}, indent=4))
"""


def _said(command: str) -> str:
    """``stszone COMMAND --help`` on one line."""
    return " ".join(help_text(command).split())


def _cluster() -> list[dict[str, Any]]:
    """The guard example (StatefulSets shop/cache and shop/db, opted-in namespace shop), the
    recorded Advanced StatefulSet shop/web, and the recorded pools of namespace kafka."""
    guard = yaml.safe_load((ROOT / "deploy" / "examples" / "guard" / "cluster.yaml").read_text())
    sets = json.loads((FIXTURES / "kruise" / "objects" / "statefulsets.v1beta1.json").read_text())
    pools = json.loads((FIXTURES / "strimzi" / "objects" / "kafkanodepools.v1.json").read_text())
    kafka = {"metadata": {"name": "kafka", "labels": {"stszone.io/enabled": "true"}}}
    return [
        *guard["items"],
        *({**o, "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet"} for o in sets["items"]),
        *({**o, "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaNodePool"} for o in pools["items"]),
        {"apiVersion": "v1", "kind": "Namespace", **kafka},
    ]  # fmt: skip


def _with_kubectl(
    tmp_path: Path, line: str, *, crds: bool, objects: list[dict[str, Any]] | None = None
) -> str:
    """``line`` run with the fake kubectl first on PATH, serving ``objects`` (else
    :func:`_cluster`) of the core types and, with ``crds``, of the CRDs' too."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(f"#!{sys.executable}\n{FAKE_KUBECTL}")
    kubectl.chmod(0o755)
    cluster = tmp_path / "cluster-objects.json"
    cluster.write_text(json.dumps({"items": _cluster() if objects is None else objects}))
    served = {**CORE, **(CRDS if crds else {})}
    return (
        f"export PATH={shlex.quote(str(bin_dir))}:$PATH "
        f"FAKE_CLUSTER={shlex.quote(str(cluster))} FAKE_SERVED={shlex.quote(json.dumps(served))}\n"
        + line
    )


def test_every_command_asks_for_one_saved_cluster_with_its_namespaces() -> None:
    saved = {command: SAVED.findall(_said(command)) for command in COMMANDS}
    assert all(len(found) == 1 for found in saved.values()), saved
    assert len({found[0] for found in saved.values()}) == 1, saved
    assert "namespaces" in saved["serve"][0], saved
    for command in COMMANDS:  # the stdin example is the command's own
        piped = f"-o json | stszone {command} --cluster -"
        assert piped in _said(command), command


def test_the_readme_and_audit_help_save_the_cluster_the_help_asks_for() -> None:
    """The README's offline audit and ``stszone audit --help``'s examples save the cluster with
    the command every ``--cluster`` help names."""
    (saved,) = SAVED.findall(_said("audit"))
    offline = [line for line in README.splitlines() if "stszone audit --cluster -" in line]
    assert offline and all(line.startswith(f"{saved} -o json | ") for line in offline), offline
    examples = [line for line in help_examples("audit") if line.startswith("kubectl get ")]
    assert examples == [
        f"{saved} -o yaml > cluster.yaml",
        f"{saved} -o json | stszone audit --cluster -",
    ]


@pytest.mark.parametrize("crds", [False, True], ids=["without-the-crds", "with-the-crds"])
def test_the_saved_cluster_holds_pools_and_advanced_sets_only_where_served(
    tmp_path: Path, crds: bool
) -> None:
    """The README's offline audit, run as written: on a cluster without Strimzi's and
    OpenKruise's CRDs the command still saves the cluster (naming a type the cluster does
    not serve would fail the whole kubectl get), and on one with them the saved file holds the
    KafkaNodePools and the Advanced StatefulSet, which the audit reports."""
    (line,) = [line for line in README.splitlines() if "stszone audit --cluster -" in line]
    line = line.partition("   #")[0]
    done = run_example(_with_kubectl(tmp_path, line, crds=crds), cwd=tmp_path)
    # The guard example holds misplaced pods: exit 1 with the audit's table.
    assert done.returncode == 1, done.stderr
    assert "StatefulSet shop/db:" in done.stdout and done.stderr == "", done.stderr
    assert ("Advanced StatefulSet shop/web:" in done.stdout) == crds, done.stdout
    assert ("KafkaNodePool kafka/broker " in done.stdout) == crds, done.stdout


def test_the_saved_cluster_of_the_help_keeps_a_namespace_not_opted_in_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """review of a pod in namespace cap, with the cluster saved as review --help says: not
    sent to stszone, answered unchanged (without the Namespace objects, every namespace is
    taken as opted in and the pod gets a zone)."""
    (saved,) = SAVED.findall(_said("review"))
    cap = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "cap"}}
    objects = [*(b.node(f"n-{z}", z) for z in ("zone-a", "zone-b", "zone-c")), cap]
    line = _with_kubectl(tmp_path, f"{saved} -o json > cluster.json", crds=False, objects=objects)
    done = run_example(line, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cluster = tmp_path / "cluster.json"
    request = ROOT / "tests" / "fixtures" / "admission" / "003-Pod-CREATE.json"
    status = cli.main(["review", "--cluster", str(cluster), str(request)])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "namespace cap is not opted in" in err, err
    assert "patch" not in json.loads(out)["response"]
